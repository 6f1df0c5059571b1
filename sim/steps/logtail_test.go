package steps

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAFailedScenarioPrintsItsLog: a scenario that fails on its step prints
// the end of its own log, the daemon's debug lines included, so a CI failure
// says what the daemon did; a passing one prints none.
func TestAFailedScenarioPrintsItsLog(t *testing.T) {
	const feature = `Feature: a log to read

  Background:
    Given the homeserver has users "ori"
    And agents "agent-a" and "agent-b" are bound to "#ops"

  Scenario: an agent prompted as expected
    When ori says in "#ops": "@agent-a how is svc-a?"
    Then agent-a is prompted with "how is svc-a?"

  Scenario: an agent waited for in vain
    When ori says in "#ops": "@agent-a how is svc-b?"
    Then agent-b is prompted with "how is svc-b?"

  Scenario: an agent of a daemon process waited for in vain
    Given the daemon runs as its own process
    When ori says in "#ops": "@agent-a how is svc-c?"
    Then agent-b is prompted with "how is svc-c?"
`
	path := filepath.Join(t.TempDir(), "log.feature")
	if err := os.WriteFile(path, []byte(feature), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	status := Run(Options{Homeserver: "fake", Paths: []string{path}, Output: &out, Wait: 2 * time.Second})
	got := out.String()
	if status == 0 {
		t.Fatalf("a run with a failing scenario passed:\n%s", got)
	}
	for _, want := range []string{
		`--- the log of failed scenario "an agent waited for in vain" (agent-b prompted with "how is svc-b?": not within 2s`,
		`msg="waking agent" component=daemon agent=agent-a`,
		`--- end of the log of "an agent waited for in vain"`,
		// A daemon run as its own process logs to a file: its end follows.
		`--- the log of failed scenario "an agent of a daemon process waited for in vain"`,
		`--- the daemon process's log (`,
		`--- end of the daemon process's log`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if _, child, ok := strings.Cut(got, "--- the daemon process's log ("); !ok || !strings.Contains(child, "=== daemon run 1") || !strings.Contains(child, `"waking agent"`) {
		t.Errorf("the daemon process's log lacks its run header or its waking line:\n%s", got)
	}
	if strings.Contains(got, `failed scenario "an agent prompted as expected"`) {
		t.Errorf("the passing scenario's log was printed:\n%s", got)
	}
}
