package daemon

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"
)

// recorder runs turns by remembering them, optionally blocking until released.
type recorder struct {
	mu      sync.Mutex
	turns   map[sessionKey][]string
	running map[sessionKey]int
	overlap bool
	ended   []sessionKey
	gate    chan struct{}
}

func newRecorder() *recorder {
	return &recorder{turns: map[sessionKey][]string{}, running: map[sessionKey]int{}}
}

func (r *recorder) run(ctx context.Context, s *session, req turnRequest) {
	r.mu.Lock()
	r.running[s.key]++
	if r.running[s.key] > 1 {
		r.overlap = true
	}
	gate := r.gate
	r.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
		}
	}
	r.mu.Lock()
	r.turns[s.key] = append(r.turns[s.key], req.text)
	r.running[s.key]--
	r.mu.Unlock()
}

func (r *recorder) end(s *session) {
	r.mu.Lock()
	r.ended = append(r.ended, s.key)
	r.mu.Unlock()
}

func (r *recorder) snapshot(k sessionKey) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.turns[k])
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestSessionsRunTurnsInOrderWithoutOverlap(t *testing.T) {
	rec := newRecorder()
	m := newSessions(rec.run, rec.end)
	defer m.close()
	a := sessionKey{agent: "agent-a", room: "!r:x", thread: "$1"}
	b := sessionKey{agent: "agent-b", room: "!r:x", thread: "$1"}
	for _, text := range []string{"one", "two", "three"} {
		m.enqueue(a, turnRequest{text: text})
		m.enqueue(b, turnRequest{text: text})
	}
	waitFor(t, "all turns", func() bool { return len(rec.snapshot(a)) == 3 && len(rec.snapshot(b)) == 3 })
	if got := rec.snapshot(a); !slices.Equal(got, []string{"one", "two", "three"}) {
		t.Fatalf("turns of a ran as %v, want in order", got)
	}
	if rec.overlap {
		t.Fatal("two turns of one session overlapped")
	}
}

func TestEndSessionDropsQueuedTurnsAndNextMessageOpensAFreshSession(t *testing.T) {
	rec := newRecorder()
	rec.gate = make(chan struct{})
	m := newSessions(rec.run, rec.end)
	defer m.close()
	k := sessionKey{agent: "agent-a", room: "!r:x", thread: "$1"}
	m.enqueue(k, turnRequest{text: "running"})
	m.enqueue(k, turnRequest{text: "queued"})
	waitFor(t, "first turn to start", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return rec.running[k] == 1
	})
	if !m.endSession(k) {
		t.Fatal("endSession found no session")
	}
	waitFor(t, "session end", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.ended) == 1
	})
	if got := rec.snapshot(k); !slices.Equal(got, []string{"running"}) {
		t.Fatalf("after end, turns = %v; the queued turn must be dropped", got)
	}
	close(rec.gate)
	m.enqueue(k, turnRequest{text: "after"})
	waitFor(t, "turn after clear", func() bool { return len(rec.snapshot(k)) == 2 })
	if m.endSession(sessionKey{agent: "nobody"}) {
		t.Fatal("endSession of an unknown key reported true")
	}
}

func TestCloseStopsEveryLoop(t *testing.T) {
	rec := newRecorder()
	rec.gate = make(chan struct{}) // turns block until their context ends
	m := newSessions(rec.run, rec.end)
	for i := range 5 {
		m.enqueue(sessionKey{agent: "a", thread: id.EventID(fmt.Sprintf("$%d", i))}, turnRequest{text: "x"})
	}
	done := make(chan struct{})
	go func() { m.close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("close did not return: a session loop is stuck")
	}
	if len(rec.ended) != 5 {
		t.Fatalf("ended %d sessions, want 5", len(rec.ended))
	}
	m.enqueue(sessionKey{agent: "late"}, turnRequest{text: "x"}) // must not start a loop after close
}

// An idle session first lets its agent go; idle again without one, it ends,
// and the thread's next turn opens a fresh session: no loop waits forever for
// a thread that went quiet.
func TestAnIdleSessionLetsItsAgentGoThenEnds(t *testing.T) {
	rec := newRecorder()
	var mu sync.Mutex
	idled := 0
	var m *sessions
	m = newSessions(func(ctx context.Context, s *session, req turnRequest) {
		s.state = "agent" // the runner opened an agent
		rec.run(ctx, s, req)
	}, rec.end).withIdle(20*time.Millisecond, func(s *session) {
		mu.Lock()
		idled++
		mu.Unlock()
		s.state = nil
	})
	defer m.close()
	k := sessionKey{agent: "agent-a", room: "!r:x", thread: "$1"}
	m.enqueue(k, turnRequest{text: "first"})
	waitFor(t, "the session to end once its agent is gone", func() bool {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		return len(rec.ended) == 1
	})
	mu.Lock()
	if idled != 1 {
		t.Fatalf("idled %d times before the session ended, want 1 (a session without an agent has none to let go)", idled)
	}
	mu.Unlock()
	m.mu.Lock()
	left := len(m.byKey)
	m.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d sessions still known after the only one ended", left)
	}
	m.enqueue(k, turnRequest{text: "second"})
	waitFor(t, "the next turn in a fresh session", func() bool { return len(rec.snapshot(k)) == 2 })
}
