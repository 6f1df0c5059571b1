package steps

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cucumber/godog"
)

// wornBackend is the fake homeserver posing as one started from a snapshot
// whose scenarios spent spent of its 18 seeded rooms; it counts its closes.
type wornBackend struct {
	fakeBackend
	spent  int
	closes *atomic.Int32
}

func (w wornBackend) worn() (spent, total int)    { return w.spent, 18 }
func (w wornBackend) close(context.Context) error { w.closes.Add(1); return nil }

// wornRun runs a one-scenario feature for repeat passes on backends from
// start, and returns the status, the output and how often the scenario ran.
func wornRun(t *testing.T, repeat int, start func(context.Context) (backend, error)) (int, string, int32) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "steady.feature")
	if err := os.WriteFile(path, []byte("Feature: steady\n\n  Scenario: a steady scenario\n    Given nothing happens\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var runs atomic.Int32
	var out bytes.Buffer
	status := Run(Options{
		Paths: []string{path}, Output: &out, Repeat: repeat, testBackend: start,
		testSteps: func(sc *godog.ScenarioContext) {
			sc.Step(`^nothing happens$`, func() error { runs.Add(1); return nil })
		},
	})
	return status, out.String(), runs.Load()
}

// A pass that spent seeded rooms of the snapshot is followed by a fresh
// homeserver from the snapshot, so the next pass does not seed its busy
// rooms by sending: with --repeat 3, three homeservers are started and each
// is closed, and the restart is said.
func TestRepeatStartsTheHomeserverAgainWhenAPassSpentSeededRooms(t *testing.T) {
	var starts, closes atomic.Int32
	status, out, runs := wornRun(t, 3, func(context.Context) (backend, error) {
		starts.Add(1)
		return wornBackend{spent: 2, closes: &closes}, nil
	})
	if status != 0 || runs != 3 {
		t.Fatalf("status %d, the scenario ran %d times in 3 passes:\n%s", status, runs, out)
	}
	if starts.Load() != 3 || closes.Load() != 3 {
		t.Fatalf("homeservers started %d, closed %d; want 3 and 3:\n%s", starts.Load(), closes.Load(), out)
	}
	for _, pass := range []string{"2", "3"} {
		want := "zooid sim: pass " + pass + ": the passes before spent 2 of the snapshot's 18 seeded rooms; starting the fake homeserver again from the snapshot"
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// Passes that spent nothing share one homeserver.
func TestRepeatKeepsTheHomeserverWhenNothingWasSpent(t *testing.T) {
	var starts, closes atomic.Int32
	status, out, runs := wornRun(t, 3, func(context.Context) (backend, error) {
		starts.Add(1)
		return wornBackend{closes: &closes}, nil
	})
	if status != 0 || runs != 3 || starts.Load() != 1 || closes.Load() != 1 || strings.Contains(out, "starting the fake homeserver again") {
		t.Fatalf("status %d, runs %d, homeservers started %d, closed %d; want 0, 3, 1, 1 and no restart:\n%s",
			status, runs, starts.Load(), closes.Load(), out)
	}
}

// A homeserver that fails to start again ends the run with status 2 and the
// reason, before the pass that would have needed it.
func TestRepeatStopsWhenTheHomeserverFailsToStartAgain(t *testing.T) {
	var starts, closes atomic.Int32
	status, out, runs := wornRun(t, 3, func(context.Context) (backend, error) {
		if starts.Add(1) > 1 {
			return nil, errors.New("no engine answers")
		}
		return wornBackend{spent: 1, closes: &closes}, nil
	})
	if status != 2 || runs != 1 || closes.Load() != 1 {
		t.Fatalf("status %d, runs %d, closes %d; want 2, 1, 1:\n%s", status, runs, closes.Load(), out)
	}
	if want := "zooid sim: pass 2: restarting the homeserver: no engine answers"; !strings.Contains(out, want) {
		t.Fatalf("output lacks %q:\n%s", want, out)
	}
}

// The Synapse backend counts the copies its scenarios spent.
func TestPoolCountsSpentCopies(t *testing.T) {
	p := &pool{entries: []*pooled{{spent: true}, {}, {spent: true}}}
	b := &sharedBackend{pool: p}
	if spent, total := b.worn(); spent != 2 || total != 3 {
		t.Fatalf("worn %d of %d, want 2 of 3", spent, total)
	}
	if spent, total := (&sharedBackend{}).worn(); spent != 0 || total != 0 {
		t.Fatalf("without a snapshot: worn %d of %d, want 0 of 0", spent, total)
	}
}
