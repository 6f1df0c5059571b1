package steps

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/zooid-dev/zooid/fakehs"
)

// TestSlowHomeserverFiftySessionsLeaveNothingBehind runs 50 sessions at once
// against a homeserver that takes 1.5 s over every request of the agent (its
// reads and its posts), 25 processes live and the other 25 sessions queued
// behind them (so both a turn's and a queued turn's leftovers count), and
// pins that once their agents went idle and stopped,
// the process's goroutines and open descriptors are back to what they were
// before: nothing a session started outlives it. The daemon runs in this
// process (as in the feature suite), so the counts are its own plus the fake
// homeserver's.
func TestSlowHomeserverFiftySessionsLeaveNothingBehind(t *testing.T) {
	const sessions = 50
	r := &runner{backend: fakeBackend{}, log: slog.New(slog.DiscardHandler), wait: 3 * time.Minute, turnTimeout: 2 * time.Minute}
	ctx := context.Background()
	w := newWorld(r)
	t.Cleanup(func() {
		if err := w.close(); err != nil {
			t.Errorf("closing the scenario: %v", err)
		}
	})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.stepUsers(ctx, `"ori"`))
	must(w.stepAgents(ctx, `"agent-a"`, `"#ops"`, ""))
	must(w.stepIdleTimeout("1"))
	// Two waves: at the default cap of 4 a process, 13 waves of slow turns
	// took 43 s of the package's run.
	must(w.stepAgentMaxProcs("agent-a", "25"))
	must(w.stepDaemonMaxProcs("25"))
	// A first turn warms up what lives as long as the daemon (clients,
	// connections, the agent's socket); its process then stops idle.
	must(w.stepWillReply("agent-a", "warmed up"))
	must(w.stepSays(ctx, "ori", "#ops", "@agent-a warm up"))
	must(w.stepPostsInThread(ctx, "agent-a", "warmed up"))
	allStopped := func() {
		t.Helper()
		must(w.eventually(ctx, "every agent process to stop", func() (bool, string, error) {
			for _, s := range w.ctl.Sessions("agent-a") {
				if err := syscall.Kill(s.Pid, 0); !errors.Is(err, syscall.ESRCH) {
					return false, fmt.Sprintf("process %d still exists", s.Pid), nil
				}
			}
			return true, "", nil
		}))
	}
	allStopped()
	baseG, baseFD := settled(t, w)

	h, err := w.lease.hs.injectFault(fakehs.Fault{User: w.names().agent("agent-a"), Latency: 1500 * time.Millisecond})
	must(err)
	for range sessions {
		must(w.stepWillReply("agent-a", "checked"))
	}
	for i := range sessions {
		must(w.stepSays(ctx, "ori", "#ops", fmt.Sprintf("@agent-a check svc-%d", i)))
	}
	room := w.rooms["#ops"]
	must(w.eventually(ctx, fmt.Sprintf("agent-a to answer all %d mentions", sessions), func() (bool, string, error) {
		msgs, err := w.readRoom(ctx, room, 3)
		if err != nil {
			return false, "", err
		}
		mine, seen := w.fromAgent(msgs, "agent-a")
		n := 0
		for _, m := range mine {
			if m.body == "checked" {
				n++
			}
		}
		return n == sessions, fmt.Sprintf("%d answers:%s", n, seen), nil
	}))
	h.Clear()
	if h.Hits() < sessions {
		t.Fatalf("the slow homeserver delayed %d requests, fewer than the %d sessions", h.Hits(), sessions)
	}
	allStopped()

	var g, fd int
	deadline := time.Now().Add(30 * time.Second)
	for {
		g, fd = settled(t, w)
		if g <= baseG && fd <= baseFD {
			break
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("after %d sessions on a slow homeserver: %d goroutines (before: %d), %d open descriptors (before: %d)\n%s",
				sessions, g, baseG, fd, baseFD, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("%d sessions on a homeserver 1.5 s slow (%d requests delayed): goroutines %d → %d, open descriptors %d → %d", sessions, h.Hits(), baseG, g, baseFD, fd)
}

// settled counts goroutines and open descriptors once idle HTTP connections,
// which come and go with load, are closed: the daemon's, the humans' and any
// on net/http's default pool.
func settled(t *testing.T, w *world) (goroutines, fds int) {
	t.Helper()
	w.d.CloseIdleConnections()
	w.conns.CloseIdleConnections()
	http.DefaultTransport.(*http.Transport).CloseIdleConnections()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatalf("counting open descriptors: %v", err)
	}
	return runtime.NumGoroutine(), len(ents)
}
