package steps

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestManyWorldsAtOnceNeverCollideOnPorts starts 64 scenarios at once on
// fakehs, each with its own homeserver, push port and daemon, and has each
// daemon receive a push. Every port a homeserver is told of is bound before
// it is named and held until the scenario ends (the daemon serves on the
// held socket, it never binds the address again), so however the starts
// interleave no scenario can take another's port; a daemon that bound the
// address itself would fail every scenario with "address already in use",
// since the harness still holds it.
func TestManyWorldsAtOnceNeverCollideOnPorts(t *testing.T) {
	const worlds = 64
	var f strings.Builder
	f.WriteString("Feature: many worlds at once\n\n")
	f.WriteString("  Scenario Outline: world <n> starts and its daemon is pushed a mention\n")
	f.WriteString("    Given the homeserver has users \"ori\" and \"mia\"\n")
	f.WriteString("    And agent \"agent-a\" is bound to \"#ops\"\n")
	f.WriteString("    When ori says in \"#ops\": \"@agent-a ping <n>\"\n")
	f.WriteString("    Then agent-a is prompted with \"ping <n>\"\n\n")
	f.WriteString("    Examples:\n      | n |\n")
	for i := range worlds {
		fmt.Fprintf(&f, "      | %d |\n", i)
	}
	path := filepath.Join(t.TempDir(), "many_worlds.feature")
	if err := os.WriteFile(path, []byte(f.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	start := time.Now()
	// Generous bounds: 64 daemons and 64 agent processes start at once on
	// whatever cores CI has, and the test is about ports, not speed. With the
	// suite's 3s turn timeout (which bounds an agent's start-up too), 16 to 38
	// of 64 agents failed to initialise in time on a 2-core machine with one
	// core busy; none of 64 did with 1m.
	opts := Options{
		Homeserver: "fake", Paths: []string{path}, Concurrency: worlds, Output: &out,
		Wait: time.Minute, TurnTimeout: time.Minute,
	}
	if os.Getenv("ZOOID_TEST_LOG") != "" {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	status := Run(opts)
	t.Logf("%d worlds at concurrency %d in %s", worlds, worlds, time.Since(start).Round(time.Millisecond))
	if status != 0 {
		t.Fatalf("godog status %d:\n%s", status, out.String())
	}
	if !strings.Contains(out.String(), fmt.Sprintf("%d scenarios (%d passed)", worlds, worlds)) {
		t.Fatalf("not every world passed:\n%s", out.String())
	}
	if strings.Contains(out.String(), "address already in use") {
		t.Fatalf("a port collided:\n%s", out.String())
	}
}
