package steps

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cucumber/godog"

	"github.com/zooid-dev/zooid/internal/childproc"
)

// interruptFeature waits, in its first scenario, for a post that never comes
// (the agent, prompted, hangs in its turn) after the run was interrupted; the
// second scenario should never start.
const interruptFeature = `Feature: interrupting a run

  Scenario: a wait that the interrupt ends
    Given the homeserver has users "ori"
    And agent "agent-a" is bound to "#ops"
    And agent-a will hang
    When ori says in "#ops": "@agent-a audit svc-a"
    And agent-a is prompted with "audit svc-a"
    And the run is interrupted
    Then agent-a posts "never sent" in the thread

  Scenario: a scenario after the interrupt
    Given a step that counts
`

// TestRunStopsWhenItsContextEnds: ending Options.Context fails the wait that
// is running as interrupted, long before its bound, starts no later
// scenario, and still tears the world down (the hung agent's process), so Run
// returns a failure.
func TestRunStopsWhenItsContextEnds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "interrupt.feature")
	if err := os.WriteFile(path, []byte(interruptFeature), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	before := children(t)
	var later atomic.Int32
	var out bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Run(Options{
			Context: ctx, Homeserver: "fake", Paths: []string{path}, Output: &out, Concurrency: 1,
			// Bounds no interrupt-free run would get through before the
			// guard below fires.
			Wait: 10 * time.Minute, TurnTimeout: 10 * time.Minute,
			testSteps: func(sc *godog.ScenarioContext) {
				sc.Step(`^the run is interrupted$`, func() error { cancel(); return nil })
				sc.Step(`^a step that counts$`, func() error { later.Add(1); return nil })
			},
		})
	}()
	var status int
	select {
	case status = <-done:
	case <-time.After(2 * time.Minute):
		t.Fatal("Run did not return within 2 minutes of its context ending; the wait bound is 10 minutes")
	}
	if status == 0 {
		t.Fatalf("an interrupted run passed:\n%s", out.String())
	}
	if n := later.Load(); n != 0 {
		t.Errorf("the scenario after the interrupt ran its step %d times, want 0", n)
	}
	if after := children(t); after != before {
		t.Errorf("%d child processes after the interrupted run, %d before: the hung agent was left running", after, before)
	}
	for _, want := range []string{
		`agent-a posts "never sent" in #ops: the run was interrupted`,
		"before scenario hook failed: the run was interrupted",
		"zooid sim: the run was interrupted",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// children counts this process's child processes, zombies included.
func children(t *testing.T) int {
	t.Helper()
	kids, err := childproc.Children(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	return len(kids)
}
