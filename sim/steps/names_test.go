package steps

import (
	"context"
	"io"
	"regexp"
	"slices"
	"sync"
	"testing"

	"github.com/cucumber/godog"

	"github.com/zooid-dev/zooid/fakeagent"
)

func TestNamesMapTheSameWayOnEveryServer(t *testing.T) {
	fake := names{serverName: "localhost", agentPrefix: "zs-"}
	shared := names{serverName: "localhost", agentPrefix: "zsab12cd0-", humanPrefix: "hab12cd3-", aliasSuffix: "-ab12cd3"}
	for _, c := range []struct {
		n                  names
		agent, alias, room string
	}{
		{fake, "@zs-agent-a:localhost", "#ops:localhost", "ops"},
		{shared, "@zsab12cd0-agent-a:localhost", "#ops-ab12cd3:localhost", "ops-ab12cd3"},
	} {
		if got := c.n.agent("agent-a"); string(got) != c.agent {
			t.Errorf("agent: got %s, want %s", got, c.agent)
		}
		if got := c.n.alias("#ops"); string(got) != c.alias {
			t.Errorf("alias: got %s, want %s", got, c.alias)
		}
		if got := c.n.aliasLocalpart("#ops"); got != c.room {
			t.Errorf("alias localpart: got %s, want %s", got, c.room)
		}
		ns := regexp.MustCompile("^" + c.n.agentNamespace() + "$")
		if !ns.MatchString(c.agent) {
			t.Errorf("namespace %s does not cover %s", c.n.agentNamespace(), c.agent)
		}
		if ns.MatchString("@ori:localhost") || ns.MatchString("@"+c.n.humanLocalpart("ori")+":localhost") {
			t.Errorf("namespace %s covers a human", c.n.agentNamespace())
		}
	}
	other := names{serverName: "localhost", agentPrefix: "zsab12cd1-"}
	if regexp.MustCompile("^" + shared.agentNamespace() + "$").MatchString(string(other.agent("agent-a"))) {
		t.Error("one slot's namespace covers another slot's agents")
	}
}

func TestBusyLayoutHasTheAskedThreadsAndRootsBeforeReplies(t *testing.T) {
	for _, c := range []struct{ total, threads int }{{2000, 40}, {300, 6}, {10, 0}, {5, 5}} {
		b := &busySpec{total: c.total, threads: c.threads, senders: []string{"ori", "mia", "agent-a"}}
		senders, roots := b.layout()
		if len(senders) != c.total || len(roots) != c.total {
			t.Fatalf("%+v: layout sizes %d, %d", c, len(senders), len(roots))
		}
		isRoot := map[int]bool{}
		replies := 0
		for i, r := range roots {
			switch {
			case r == -2:
				isRoot[i] = true
			case r >= 0:
				replies++
				if r >= i || !isRoot[r] {
					t.Fatalf("%+v: message %d replies to %d, which is not an earlier root", c, i, r)
				}
			}
		}
		if len(isRoot) != c.threads {
			t.Errorf("%+v: %d roots, want %d", c, len(isRoot), c.threads)
		}
		if c.threads > 0 && c.total > 2*c.threads && replies == 0 {
			t.Errorf("%+v: no replies at all", c)
		}
	}
}

func TestSplitChunksJoinsBack(t *testing.T) {
	text := "checked svc-a: all 12 pods healthy"
	for _, k := range []int{1, 3, 6, 100} {
		parts := fakeagent.SplitChunks(text, k)
		joined := ""
		for _, p := range parts {
			if p == "" {
				t.Errorf("k=%d: empty chunk", k)
			}
			joined += p
		}
		if joined != text {
			t.Errorf("k=%d: chunks join to %q", k, joined)
		}
	}
}

func TestIncludesMatchesSubsetsAndRejectsDifferences(t *testing.T) {
	got := map[string]any{"members": []any{
		map[string]any{"id": "@a", "is_agent": true, "agent_name": "a"},
		map[string]any{"id": "@o", "is_agent": false},
	}, "has_more": false, "n": 5.0}
	for _, c := range []struct {
		want any
		ok   bool
	}{
		{map[string]any{"members": []any{map[string]any{"id": "@o", "is_agent": false}}}, true},
		{map[string]any{"members": []any{map[string]any{"id": "@o", "is_agent": true}}}, false},
		{map[string]any{"has_more": false, "n": 5.0}, true},
		{map[string]any{"missing": nil}, true},
		{map[string]any{"missing": false}, false},
		{map[string]any{"n": 6.0}, false},
	} {
		if _, ok := includes(got, c.want, "$"); ok != c.ok {
			t.Errorf("includes(%v) = %v, want %v", c.want, ok, c.ok)
		}
	}
}

// TestFakeOnlyIsExcludedWhateverTheTagsSay runs godog's own filter on
// scenarios tagged every way that matters, with the expressions a run
// builds: a @fake-only scenario stays out whatever the tags asked for.
func TestFakeOnlyIsExcludedWhateverTheTagsSay(t *testing.T) {
	const feature = `Feature: tags
  @mcp @fake-only
  Scenario: mcp on the fake
    Given a step

  @mcp
  Scenario: mcp
    Given a step

  @routing
  Scenario: routing
    Given a step

  @real-agents @smoke
  Scenario: smoke
    Given a step

  @real-agents
  Scenario: real
    Given a step

  Scenario: untagged
    Given a step
`
	for _, c := range []struct {
		tags string
		want []string
	}{
		{"", []string{"mcp", "real", "routing", "smoke", "untagged"}},
		{"@mcp", []string{"mcp"}},
		{"@mcp,@routing", []string{"mcp", "routing"}},
		{"~@routing && ~@real-agents,@smoke", []string{"mcp", "smoke", "untagged"}},
		{"@fake-only", nil},
	} {
		tags := andTags(c.tags, "~"+FakeOnlyTag)
		if got := scenariosMatching(t, feature, tags); !slices.Equal(got, c.want) {
			t.Errorf("andTags(%q) = %q ran %q, want %q", c.tags, tags, got, c.want)
		}
	}
}

// scenariosMatching runs feature through godog with the tag expression tags
// and returns the names of the scenarios it ran, sorted.
func scenariosMatching(t *testing.T, feature, tags string) []string {
	t.Helper()
	var (
		mu  sync.Mutex
		ran []string
	)
	status := godog.TestSuite{
		ScenarioInitializer: func(sc *godog.ScenarioContext) {
			sc.Step(`^a step$`, func() {})
			sc.Before(func(ctx context.Context, s *godog.Scenario) (context.Context, error) {
				mu.Lock()
				defer mu.Unlock()
				ran = append(ran, s.Name)
				return ctx, nil
			})
		},
		Options: &godog.Options{
			Format: "progress", Output: io.Discard, Tags: tags, Strict: true,
			FeatureContents: []godog.Feature{{Name: "tags.feature", Contents: []byte(feature)}},
		},
	}.Run()
	if status != 0 {
		t.Fatalf("godog with tags %q exited %d", tags, status)
	}
	slices.Sort(ran)
	return ran
}
