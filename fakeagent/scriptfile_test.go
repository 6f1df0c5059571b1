package fakeagent_test

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/zooid-dev/zooid/fakeagent"
	"github.com/zooid-dev/zooid/zooid/acpagent"
)

const script = `# the coder's turns, in order
coder will reply "on it"
coder will reply "abcd" in 2 chunks
coder will reply "later" after 0.5 seconds
coder will call zooid_get_history with {"limit": 5}

coder will take a turn that:
  | says  | looking |
  | calls | zooid_get_recent_threads with {"limit": 2} |
  | waits | 1.5s |
reviewer will list its tools
reviewer will crash
`

func TestParseScriptReadsTheFeaturesWording(t *testing.T) {
	got, err := fakeagent.ParseScript(strings.NewReader(script), "agents.script")
	if err != nil {
		t.Fatal(err)
	}
	end := fakeagent.Stop(acp.StopReasonEndTurn)
	want := map[string][]fakeagent.Turn{
		"coder": {
			{fakeagent.Say("on it"), end},
			{fakeagent.SayInChunks("ab", "cd"), end},
			{fakeagent.Wait(500 * time.Millisecond), fakeagent.Say("later"), end},
			{fakeagent.CallTool("zooid_get_history", map[string]any{"limit": 5.0}), end},
			{fakeagent.Say("looking"), fakeagent.CallTool("zooid_get_recent_threads", map[string]any{"limit": 2.0}), fakeagent.Wait(1500 * time.Millisecond), end},
		},
		"reviewer": {{fakeagent.ListTools(), end}, {fakeagent.Say("starting"), fakeagent.Crash()}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("ParseScript:\n got %+v\nwant %+v", got, want)
	}
}

func TestParseScriptRefusesWithFileAndLine(t *testing.T) {
	cases := map[string]string{
		"coder will reply \"ok\"\ncoder says hello\n":                     `agents.script:2: "coder says hello" is not a script line`,
		"coder will call zooid_get_history with {\"limit\": }\n":          "agents.script:1: tool arguments",
		"\ncoder will take a turn that:\n  | dances | |\n":                `agents.script:2: row 1: unknown action "dances"`,
		"coder will take a turn that:\ncoder will reply \"x\"\n":          `agents.script:1: "will take a turn that:" takes rows`,
		"coder will take a turn that:\n  | waits until | released |\n":    "agents.script:1: | waits until | released | waits for a feature's step",
		"coder will take a turn that:\n  | crashes | |\n  | says | x |\n": "agents.script:1: row 2: nothing can follow a row that ends the turn",
	}
	for in, want := range cases {
		_, err := fakeagent.ParseScript(strings.NewReader(in), "agents.script")
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("ParseScript(%q) = %v, want an error starting %q", in, err, want)
		}
	}
}

// An agent run by hand with --script takes the file's turns in order, then
// says DefaultReply; no harness serves it a controller.
func TestFakeAgentRunByHandFromAScript(t *testing.T) {
	s := scriptedSession(t, script, "reviewer")
	// reviewer's first turn lists its tools (none: no MCP server given) and
	// ends without prose; its second crashes the process after a word.
	var said []string
	if _, err := s.Prompt(ctx10(t), "hi", func(u acpagent.Update) { said = append(said, u.Text) }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Prompt(ctx10(t), "again", func(u acpagent.Update) { said = append(said, u.Text) }); err == nil {
		t.Fatal("the scripted crash did not end the turn with an error")
	}
	if !slices.Equal(said, []string{"starting"}) {
		t.Fatalf("said %q, want nothing in the tools turn, then the crash turn's %q", said, "starting")
	}
}

func TestFakeAgentScriptDefaultsToOk(t *testing.T) {
	s := scriptedSession(t, "coder will reply \"on it\"\n", "coder")
	var said []string
	for _, p := range []string{"first", "second"} {
		var text string
		if _, err := s.Prompt(ctx10(t), p, func(u acpagent.Update) { text += u.Text }); err != nil {
			t.Fatal(err)
		}
		said = append(said, text)
	}
	if !slices.Equal(said, []string{"on it", fakeagent.DefaultReply}) {
		t.Fatalf("said %q, want %q then %q", said, "on it", fakeagent.DefaultReply)
	}
}

// scriptedSession starts agent as `fake-agent --script` run by hand on a file
// holding script, and opens a session on it.
func scriptedSession(t *testing.T, script, agent string) *acpagent.Session {
	t.Helper()
	file := filepath.Join(t.TempDir(), "agents.script")
	if err := os.WriteFile(file, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := acpagent.Start(ctx10(t), acpagent.Spec{
		Command: exe(t),
		Args:    []string{"fake-agent", "--agent", agent, "--script", file},
		Env:     []string{fakeagent.ExecEnv + "=fake-agent", "PATH=" + os.Getenv("PATH")},
	}, acpagent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	s, err := c.NewSession(ctx10(t), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
