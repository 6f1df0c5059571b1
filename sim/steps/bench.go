package steps

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zooid-dev/zooid/fakeagent"
	"github.com/zooid-dev/zooid/internal/childproc"
	"github.com/zooid-dev/zooid/zooid/tools"
)

// The benchmark bodies here drive the same world as the features: the daemon
// in-process, fakehs, and this executable as the agents and their MCP bridge
// (`<exe> fake-agent`, `<exe> mcp`). They are exported, in a non-test file, so
// sim/bench can run them from `zooid bench` as well as from go test.

// BenchFailure, if set, hears why a Bench function failed before it calls
// b.Fatal: testing.Benchmark, which `zooid bench` runs them with, drops a
// benchmark's failure message.
var BenchFailure func(name string, err error)

func benchFatal(b *testing.B, err error) {
	b.Helper()
	if BenchFailure != nil {
		BenchFailure(b.Name(), err)
	}
	b.Fatal(err)
}

func benchRunner() *runner {
	return &runner{backend: fakeBackend{}, log: slog.New(slog.DiscardHandler), wait: 30 * time.Second, turnTimeout: 10 * time.Second}
}

// BenchScenarioSetup measures what every scenario pays before its first step
// acts: a fresh fakehs, two humans, a room with three agents bound (one with
// trigger any) and the daemon started and joined; busy adds a generated
// history of that many messages in 40 threads, imported in one go.
func BenchScenarioSetup(b *testing.B, busy int) {
	r := benchRunner()
	ctx := context.Background()
	for b.Loop() {
		w := newWorld(r)
		err := setupWorld(ctx, w, busy)
		if cerr := w.close(); err == nil {
			err = cerr
		}
		if err != nil {
			benchFatal(b, err)
		}
	}
}

func setupWorld(ctx context.Context, w *world, busy int) error {
	if err := w.stepUsers(ctx, `"ori" and "mia"`); err != nil {
		return err
	}
	if err := w.stepAgents(ctx, `"agent-a" and "agent-b"`, `"#ops"`, ""); err != nil {
		return err
	}
	if err := w.stepAgents(ctx, `"agent-c"`, `"#ops"`, "any"); err != nil {
		return err
	}
	if busy > 0 {
		if err := w.stepBusyRoom(ctx, "#ops", strconv.Itoa(busy), "40", "ori, mia, agent-a and agent-b"); err != nil {
			return err
		}
	}
	return w.start(ctx)
}

// BenchToolCall is one zooid_get_room_info call end to end as an agent makes
// it: the fake agent writes the request to its bridge's stdin (`<exe> mcp`, a
// child process of the agent), the bridge pipes it over the agent's unix socket
// to the daemon, the daemon's handler asks fakehs over HTTP, and the answer
// comes back the same way. The time is the agent's own (ToolResult.Elapsed),
// summed over b.N calls made in one turn, so the Matrix turn that asks for them
// is not counted.
func BenchToolCall(b *testing.B) { benchToolCall(b, false) }

// BenchToolCallFromBridge is the same call measured where the path
// starts, at the agent-side bridge: the fake agent starts a bridge of its own
// from the session's MCP entry and times each hand-written tools/call line
// from its bridge's stdin until the answer's line is read from the bridge's
// stdout (fakeagent.Action.Raw). The agent's MCP client (mcp-go, the agent's
// code, not zooid's) and its ACP tool-call updates are not in it.
func BenchToolCallFromBridge(b *testing.B) { benchToolCall(b, true) }

func benchToolCall(b *testing.B, raw bool) {
	ctx := context.Background()
	w := newWorld(benchRunner())
	defer func() {
		if err := w.close(); err != nil {
			benchFatal(b, err)
		}
	}()
	if err := w.stepUsers(ctx, `"ori"`); err != nil {
		benchFatal(b, err)
	}
	if err := w.stepAgents(ctx, `"agent-a"`, `"#ops"`, ""); err != nil {
		benchFatal(b, err)
	}
	// The first call starts the session and its bridge; only later ones count.
	if _, err := w.call(ctx, "agent-a", tools.GetRoomInfo, map[string]any{}); err != nil {
		benchFatal(b, err)
	}
	n := b.N
	b.ResetTimer()
	cpu0 := processCPU()
	total, err := w.repeatCall(ctx, "agent-a", tools.GetRoomInfo, map[string]any{}, n, raw)
	if err != nil {
		benchFatal(b, err)
	}
	cpu := processCPU() - cpu0
	b.StopTimer()
	b.ReportMetric(float64(total.Nanoseconds())/float64(n), "ns/op")
	// This process holds the daemon and fakehs (and the harness, which does
	// little during the calls); the agent and its bridge are children, not
	// counted. CPU moves far less with the machine's load than wall time.
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(n), "cpu-ns/op")
}

// processCPU is this process's CPU time so far, user and system.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// repeatCall has agent call tool n times in one turn and returns the sum of
// the calls' own durations; every call must succeed. raw makes the calls
// from the bridge's stdin (fakeagent.Action.Raw).
func (w *world) repeatCall(ctx context.Context, agent, tool string, args map[string]any, n int, raw bool) (time.Duration, error) {
	f := w.focus[agent]
	if f == nil {
		return 0, fmt.Errorf("%s has no thread to be woken in", agent)
	}
	before := len(w.ctl.ToolResults(agent))
	act := fakeagent.CallTool(tool, args)
	act.Repeat = n
	act.Raw = raw
	w.ctl.Queue(agent, fakeagent.Turn{act, fakeagent.Stop("end_turn")})
	w.stepSeq++
	if _, err := w.say(ctx, f.sender, f.room.name, fmt.Sprintf("@%s go on (%d)", agent, w.stepSeq), f.root, true); err != nil {
		return 0, err
	}
	// The bound grows with n: each call is well under 100 ms even on a loaded machine.
	wctx, cancel := context.WithTimeout(ctx, w.run.wait+time.Duration(n)*100*time.Millisecond)
	defer cancel()
	rs, err := w.ctl.WaitToolResults(wctx, agent, before+n)
	if err != nil {
		return 0, fmt.Errorf("%s calling %s %d times: %w", agent, tool, n, err)
	}
	var total time.Duration
	for _, r := range rs[before : before+n] {
		if r.Err != "" || r.IsError || r.Text == "" {
			return 0, fmt.Errorf("%s: %q %q", tool, r.Err, r.Text)
		}
		total += r.Elapsed
	}
	return total, nil
}

// SessionStats is what BenchIdleSessions measured of the daemon's process
// (which also holds fakehs and the harness: the figures are upper bounds).
type SessionStats struct {
	Sessions int
	// HeapPerSession is the live heap grown per idle session, in bytes.
	HeapPerSession float64
	// GoroutinesPerSession and FDsPerSession are what each idle session
	// holds once its agent process was let go.
	GoroutinesPerSession, FDsPerSession float64
	// GoroutinesLeft and FDsLeft are the goroutines and open files above
	// the count before the world started, after it closed.
	GoroutinesLeft, FDsLeft int
}

// MeasureIdleSessions runs agents agents bound to one room and opens
// perAgent sessions each (a thread per session, woken by a mention, answered
// with one reply), lets every agent process go idle and stop, and measures the
// daemon's heap, goroutines and file descriptors against the daemon idle with
// no session; then it closes the world and measures what is left against
// before it started.
func MeasureIdleSessions(ctx context.Context, agents, perAgent int) (SessionStats, error) {
	st := SessionStats{Sessions: agents * perAgent}
	g0, fd0, err := settledCounts(ctx, 0, -1, false)
	if err != nil {
		return st, err
	}
	w := newWorld(benchRunner())
	closed := false
	defer func() {
		if !closed {
			_ = w.close()
		}
	}()
	w.idleTimeout = time.Second // the least zooid.yaml allows
	if err := w.stepUsers(ctx, `"ori"`); err != nil {
		return st, err
	}
	names := make([]string, agents)
	for i := range names {
		names[i] = fmt.Sprintf("agent-%d", i)
		if err := w.stepAgents(ctx, strconv.Quote(names[i]), `"#ops"`, ""); err != nil {
			return st, err
		}
	}
	if err := w.start(ctx); err != nil {
		return st, err
	}
	heap1, g1, fd1 := liveHeap(), runtime.NumGoroutine(), openFDs()
	// Ten agents woken per message keeps at most about ten agent processes
	// (and their bridges) alive at once on a small machine.
	const batch = 10
	for s := range perAgent {
		for lo := 0; lo < agents; lo += batch {
			group := names[lo:min(lo+batch, agents)]
			var text strings.Builder
			for _, n := range group {
				text.WriteString("@" + n + " ")
			}
			fmt.Fprintf(&text, "session %d", s)
			if _, err := w.say(ctx, "ori", "#ops", text.String(), "", true); err != nil {
				return st, err
			}
			wctx, cancel := w.waitCtx(ctx)
			for _, n := range group {
				if _, err := w.ctl.WaitPrompts(wctx, n, s+1); err != nil {
					cancel()
					return st, err
				}
			}
			cancel()
		}
	}
	// Every agent process stops once idle; then only the sessions remain.
	if err := waitNoChildren(ctx, w.run.wait+time.Duration(agents)*50*time.Millisecond); err != nil {
		return st, err
	}
	g2, fd2, err := settledCounts(ctx, g1, fd1, false)
	if err != nil {
		return st, err
	}
	heap2 := liveHeap()
	n := float64(st.Sessions)
	st.HeapPerSession = float64(int64(heap2)-int64(heap1)) / n
	st.GoroutinesPerSession = float64(g2-g1) / n
	st.FDsPerSession = float64(fd2-fd1) / n
	closed = true
	if err := w.close(); err != nil {
		return st, fmt.Errorf("closing the world: %w", err)
	}
	g3, fd3, err := settledCounts(ctx, g0, fd0, true)
	st.GoroutinesLeft, st.FDsLeft = g3-g0, fd3-fd0
	return st, err
}

// BenchIdleSessions reports MeasureIdleSessions as metrics: bytes, goroutines
// and file descriptors per idle session, and goroutines and files left open
// after the world closed. It measures once, whatever b.N: one run is minutes
// at 200 agents, and its figures are counts, not times.
func BenchIdleSessions(b *testing.B, agents, perAgent int) {
	st, err := MeasureIdleSessions(context.Background(), agents, perAgent)
	if err != nil {
		benchFatal(b, err)
	}
	b.ReportMetric(st.HeapPerSession, "B/session")
	b.ReportMetric(st.GoroutinesPerSession, "goroutines/session")
	b.ReportMetric(st.FDsPerSession, "fds/session")
	b.ReportMetric(float64(st.GoroutinesLeft), "goroutines-left")
	b.ReportMetric(float64(st.FDsLeft), "fds-left")
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// openFDs counts this process's open file descriptors.
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// settledCounts polls the goroutine and descriptor counts until they are at
// most the given ones (goroutines 0 or fds < 0: no target), or 10 s passed;
// unless strict, counts that have not changed for half a second also end the
// wait. Goroutines of closed connections and stopped processes take a moment
// to exit, longer on a loaded machine.
func settledCounts(ctx context.Context, goroutines, fds int, strict bool) (int, int, error) {
	deadline := time.Now().Add(10 * time.Second)
	g, fd := runtime.NumGoroutine(), openFDs()
	for same := 0; ; {
		if goroutines > 0 && g <= goroutines && (fds < 0 || fd <= fds) {
			return g, fd, nil
		}
		if (!strict && same >= 25) || time.Now().After(deadline) {
			return g, fd, nil
		}
		select {
		case <-ctx.Done():
			return g, fd, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		g2, fd2 := runtime.NumGoroutine(), openFDs()
		if g2 == g && fd2 == fd {
			same++
		} else {
			same = 0
		}
		g, fd = g2, fd2
	}
}

// waitNoChildren waits until this process has no child process left.
func waitNoChildren(ctx context.Context, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for {
		kids := childPids()
		if len(kids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d agent processes still running %s after the last prompt: %v", len(kids), bound, kids)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// childPids lists the live (not ended) processes whose parent is this one.
func childPids() []int { return childproc.LiveChildren(os.Getpid()) }
