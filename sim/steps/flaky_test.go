package steps

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cucumber/godog"
)

// coinFeature has one scenario that lands heads only after the first toss,
// one that always passes and one that always fails.
const coinFeature = `Feature: coins

  Scenario: a coin that lands tails first
    Given the coin is tossed

  Scenario: a steady scenario
    Given nothing happens

  Scenario: a broken scenario
    Given everything breaks
`

func coinRun(t *testing.T, repeat int, random int64) (int, string, *atomic.Int32) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "coins.feature")
	if err := os.WriteFile(path, []byte(coinFeature), 0o600); err != nil {
		t.Fatal(err)
	}
	var tosses atomic.Int32
	var out bytes.Buffer
	status := Run(Options{
		Homeserver: "fake", Paths: []string{path}, Output: &out, Repeat: repeat, Random: random,
		testSteps: func(sc *godog.ScenarioContext) {
			sc.Step(`^the coin is tossed$`, func() error {
				if tosses.Add(1) == 1 {
					return errors.New("tails")
				}
				return nil
			})
			sc.Step(`^nothing happens$`, func() error { return nil })
			sc.Step(`^everything breaks$`, func() error { return errors.New("broken for good") })
		},
	})
	return status, out.String(), &tosses
}

// TestRepeatReportsAFlakyScenarioWithBothOutcomes: a scenario that fails in
// one pass and passes in the next is called flaky, with its failure, and the
// run fails; the always-failing one is told apart; the steady one is not listed.
func TestRepeatReportsAFlakyScenarioWithBothOutcomes(t *testing.T) {
	status, out, tosses := coinRun(t, 3, 0)
	if got := tosses.Load(); got != 3 {
		t.Fatalf("the coin was tossed %d times in 3 passes, want 3", got)
	}
	if status == 0 {
		t.Fatalf("a run with a flaky scenario passed:\n%s", out)
	}
	for _, want := range []string{
		"FLAKY: 1 scenario(s)",
		"coins.feature: a coin that lands tails first — passed 2, failed 1 of 3",
		"pass 1: tails",
		"1 scenario(s) failed in every pass",
		"coins.feature: a broken scenario — failed 3 of 3",
		"zooid sim: pass 3 of 3",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "a steady scenario —") {
		t.Errorf("the steady scenario is listed:\n%s", out)
	}
}

// TestRandomPrintsTheSeedOfEachPass: a picked seed is printed so the order
// can be replayed, and each pass shuffles with its own.
func TestRandomPrintsTheSeedOfEachPass(t *testing.T) {
	_, out, _ := coinRun(t, 2, -1)
	m := regexp.MustCompile(`pass 1 of 2, order shuffled with seed (\d+) \(replay it: --random (\d+)\)`).FindStringSubmatch(out)
	if m == nil || m[1] != m[2] {
		t.Fatalf("no replayable seed printed for pass 1:\n%s", out)
	}
	if !strings.Contains(out, "pass 2 of 2, order shuffled with seed") {
		t.Fatalf("pass 2's seed not printed:\n%s", out)
	}
	if status, out, _ := coinRun(t, 1, 42); !strings.Contains(out, "order shuffled with seed 42 (replay it: zooid sim --random 42, or go test -args -godog.random 42)") || status == 0 {
		t.Fatalf("status %d; a given seed is not echoed:\n%s", status, out)
	}
}
