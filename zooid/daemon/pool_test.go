package daemon

import (
	"context"
	"errors"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/zooid-dev/zooid/zooid/config"
)

// grantNow acquires for agent and fails the test if the pool makes it wait.
func grantNow(t *testing.T, pl *procPool, agent string, seq uint64) procGrant {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // a grant given at once is returned even with ctx ended
	g, err := pl.acquire(ctx, agent, seq, 0, nil)
	if err != nil {
		t.Fatalf("turn %d of %s: waited, want a process at once", seq, agent)
	}
	return g
}

// startFresh plays the taker of a fresh grant: the victim stops, then the
// new process is up.
func startFresh(t *testing.T, pl *procPool, g procGrant) *proc {
	t.Helper()
	if !g.fresh {
		t.Fatalf("grant %+v is not a fresh process", g)
	}
	if g.victim != nil {
		pl.takeBindings(g.victim)
	}
	pl.started(g.p, nil, acp.AgentCapabilities{})
	return g.p
}

// waiting acquires in the background; the returned channel yields the grant.
// It returns once the pool holds the waiter (a barrier, not a sleep).
func waiting(t *testing.T, ctx context.Context, pl *procPool, agent string, seq uint64) <-chan procGrant {
	t.Helper()
	out := make(chan procGrant, 1)
	go func() {
		g, err := pl.acquire(ctx, agent, seq, 0, nil)
		if err == nil {
			out <- g
		}
		close(out)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		pl.mu.Lock()
		held := false
		for _, w := range pl.waiters {
			held = held || w.seq == seq
		}
		pl.mu.Unlock()
		if held {
			return out
		}
		select {
		case g, ok := <-out:
			if ok {
				t.Fatalf("turn %d of %s got %+v at once, want it to wait", seq, agent, g)
			}
			t.Fatalf("turn %d of %s ended without a grant", seq, agent)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("turn %d of %s never reached the queue", seq, agent)
		}
		time.Sleep(time.Millisecond)
	}
}

func recv(t *testing.T, ch <-chan procGrant) procGrant {
	t.Helper()
	select {
	case g, ok := <-ch:
		if !ok {
			t.Fatal("waiter ended without a grant")
		}
		return g
	case <-time.After(10 * time.Second):
		t.Fatal("waiter was never granted")
	}
	return procGrant{}
}

func TestPoolStartsUpToTheAgentCapThenStopsTheLeastRecentlyUsedIdle(t *testing.T) {
	pl := newProcPool(16)
	pl.addAgent("a", 2, 1, false)
	p1 := startFresh(t, pl, grantNow(t, pl, "a", 1))
	p2 := startFresh(t, pl, grantNow(t, pl, "a", 2))
	// p2's turn ends first, then p1's: p2 is the least recently used.
	pl.done(p2)
	pl.done(p1)
	g := grantNow(t, pl, "a", 3)
	if !g.fresh || g.victim != p2 {
		t.Fatalf("grant %+v, want a fresh process in place of p2 (least recently used)", g)
	}
	if pl.use(p2) {
		t.Fatal("the evicted process took a turn")
	}
	if !pl.use(p1) {
		t.Fatal("p1, still live, refused its session's turn")
	}
	if live, per := pl.counts(); live != 2 || per["a"] != 2 {
		t.Fatalf("live %d, agent a %d; want 2 and 2", live, per["a"])
	}
}

func TestPoolQueuesInArrivalOrderWhenAllAreBusy(t *testing.T) {
	pl := newProcPool(16)
	pl.addAgent("a", 1, 1, false)
	ctx := t.Context()
	p := startFresh(t, pl, grantNow(t, pl, "a", 1))
	// Turns 5, 3 and 4 reach the pool in that order; they arrived 3, 4, 5.
	w5 := waiting(t, ctx, pl, "a", 5)
	w3 := waiting(t, ctx, pl, "a", 3)
	w4 := waiting(t, ctx, pl, "a", 4)
	var order []uint64
	for _, w := range []struct {
		seq uint64
		ch  <-chan procGrant
	}{{3, w3}, {4, w4}, {5, w5}} {
		pl.done(p)
		g := recv(t, w.ch)
		if g.victim != p {
			t.Fatalf("turn %d replaced %p, want the idle %p", w.seq, g.victim, p)
		}
		order = append(order, w.seq)
		p = startFresh(t, pl, g)
		pl.mu.Lock()
		rest := len(pl.waiters)
		pl.mu.Unlock()
		if want := 5 - int(w.seq); rest != want {
			t.Fatalf("after turn %d, %d waiters; want %d (granted out of order)", w.seq, rest, want)
		}
	}
	if live, _ := pl.counts(); live != 1 {
		t.Fatalf("live %d, want 1", live)
	}
	t.Logf("granted in order %v", order)
}

func TestPoolGlobalCapTakesAnotherAgentsIdleProcess(t *testing.T) {
	pl := newProcPool(2)
	pl.addAgent("a", 4, 1, false)
	pl.addAgent("b", 4, 1, false)
	a1 := startFresh(t, pl, grantNow(t, pl, "a", 1))
	a2 := startFresh(t, pl, grantNow(t, pl, "a", 2))
	wb := waiting(t, t.Context(), pl, "b", 3)
	pl.done(a2)
	g := recv(t, wb)
	if g.victim != a2 || g.p.agent != "b" {
		t.Fatalf("grant %+v, want b's process in place of a's idle a2", g)
	}
	startFresh(t, pl, g)
	if live, per := pl.counts(); live != 2 || per["a"] != 1 || per["b"] != 1 {
		t.Fatalf("live %d, per agent %v; want 2, a 1, b 1", live, per)
	}
	_ = a1
}

func TestPoolWaiterNoResourceSuitsDoesNotHoldBackOthers(t *testing.T) {
	pl := newProcPool(3)
	pl.addAgent("a", 1, 1, false)
	pl.addAgent("b", 2, 1, false)
	startFresh(t, pl, grantNow(t, pl, "a", 1))
	wa := waiting(t, t.Context(), pl, "a", 2) // a is at its own cap, busy
	// b is not: its turn, arriving later, starts at once.
	startFresh(t, pl, grantNow(t, pl, "b", 3))
	select {
	case g := <-wa:
		t.Fatalf("a's waiter got %+v while a's only process is busy", g)
	default:
	}
}

func TestPoolSessionsShareAProcess(t *testing.T) {
	pl := newProcPool(16)
	pl.addAgent("a", 2, 3, false)
	p := startFresh(t, pl, grantNow(t, pl, "a", 1))
	for seq := uint64(2); seq <= 3; seq++ {
		if g := grantNow(t, pl, "a", seq); g.fresh || g.p != p {
			t.Fatalf("turn %d got %+v, want a place on the running process", seq, g)
		}
	}
	// Three sessions over its life: the fourth thread needs a new process.
	if g := grantNow(t, pl, "a", 4); !g.fresh || g.victim != nil {
		t.Fatalf("turn 4 got %+v, want a new process", g)
	}
	// The process stops when its last session leaves, not before.
	for i := range 3 {
		pl.done(p)
		stop := pl.detach(p, "")
		if want := i == 2; stop != want {
			t.Fatalf("detach %d: stop %v, want %v", i+1, stop, want)
		}
	}
	pl.gone(p)
	if live, _ := pl.counts(); live != 1 {
		t.Fatalf("live %d, want 1", live)
	}
}

func TestPoolEvictedProcessIsStoppedByItsTakerOnly(t *testing.T) {
	pl := newProcPool(1)
	pl.addAgent("a", 1, 1, false)
	p := startFresh(t, pl, grantNow(t, pl, "a", 1))
	pl.done(p)
	g := grantNow(t, pl, "a", 2)
	if g.victim != p {
		t.Fatalf("grant %+v, want p evicted", g)
	}
	// p's own session, idle, lets go later: the taker stops it, not the session.
	if pl.detach(p, "") {
		t.Fatal("the evicted process's session was told to stop it too")
	}
}

func TestPoolWaitEndsWithItsContextAndSaysWhyItWaits(t *testing.T) {
	pl := newProcPool(16)
	pl.addAgent("a", 1, 1, false)
	startFresh(t, pl, grantNow(t, pl, "a", 1))
	ctx, cancel := context.WithCancel(context.Background())
	reasons := make(chan waitReason, 1)
	errc := make(chan error, 1)
	go func() {
		_, err := pl.acquire(ctx, "a", 2, time.Millisecond, func(r waitReason) {
			reasons <- r
		})
		errc <- err
	}()
	select {
	case r := <-reasons:
		if !r.agentCap || r.max != 1 {
			t.Fatalf("reason %+v, want the agent's cap of 1", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the long wait was never reported")
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("acquire returned %v, want context.Canceled", err)
	}
	pl.mu.Lock()
	n := len(pl.waiters)
	pl.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d waiters left after the wait was cancelled", n)
	}
}

func TestPoolFailedStartGivesItsPlaceBack(t *testing.T) {
	pl := newProcPool(1)
	pl.addAgent("a", 1, 1, false)
	g := grantNow(t, pl, "a", 1)
	w := waiting(t, t.Context(), pl, "a", 2)
	pl.failed(g.p, errors.New("no such agent"))
	if g2 := recv(t, w); !g2.fresh || g2.victim != nil {
		t.Fatalf("grant %+v, want a fresh process in the freed place", g2)
	}
}

func TestPoolSessionsJoinAProcessStillStarting(t *testing.T) {
	pl := newProcPool(16)
	pl.addAgent("a", 4, 2, false)
	first := grantNow(t, pl, "a", 1)
	joined := grantNow(t, pl, "a", 2)
	if joined.fresh || joined.p != first.p {
		t.Fatalf("second thread got %+v, want a place on the process still starting", joined)
	}
	select {
	case <-joined.p.up:
		t.Fatal("the process is up before its start ended")
	default:
	}
	pl.failed(first.p, errors.New("no such agent"))
	<-joined.p.up
	if joined.p.startErr == nil {
		t.Fatal("the joined session does not learn the start failed")
	}
	if live, _ := pl.counts(); live != 0 {
		t.Fatalf("live %d after the failed start, want 0", live)
	}
}

// sessions_per_process auto: one session a process until the agent's first
// process has said what it can; then AutoSessionsPerProcess for an agent that
// can close sessions, and still one for an agent that can't.
func TestPoolAutoSessionsPerProcess(t *testing.T) {
	pl := newProcPool(16)
	pl.addAgent("closer", 4, config.SessionsPerProcessAuto, false)
	pl.addAgent("plain", 4, config.SessionsPerProcessAuto, false)
	g1 := grantNow(t, pl, "closer", 1)
	// Until the first process says what it can, the next turn waits for it.
	second := waiting(t, context.Background(), pl, "closer", 2)
	pl.started(g1.p, nil, acp.AgentCapabilities{SessionCapabilities: acp.SessionCapabilities{Close: &acp.SessionCloseCapabilities{}}})
	if n := pl.perProcess("closer"); n != config.AutoSessionsPerProcess {
		t.Fatalf("closer hosts %d sessions a process, want %d", n, config.AutoSessionsPerProcess)
	}
	if g2 := recv(t, second); g2.fresh || g2.p != g1.p {
		t.Fatalf("the waiting turn got %+v, want a place on the first process", g2)
	}
	for seq := uint64(3); seq < 3+config.AutoSessionsPerProcess-2; seq++ {
		if g := grantNow(t, pl, "closer", seq); g.fresh || g.p != g1.p {
			t.Fatalf("turn %d: grant %+v, want a place on the first process", seq, g)
		}
	}
	if g := grantNow(t, pl, "closer", 100); g.p == g1.p {
		t.Fatalf("the first process took more than %d sessions", config.AutoSessionsPerProcess)
	}

	gp := grantNow(t, pl, "plain", 1)
	next := waiting(t, context.Background(), pl, "plain", 2)
	p := startFresh(t, pl, gp)
	if g := recv(t, next); !g.fresh || g.p == p {
		t.Fatalf("plain's waiting turn got %+v, want a process of its own", g)
	}
	if n := pl.perProcess("plain"); n != 1 {
		t.Fatalf("plain (no session/close) hosts %d sessions a process, want 1", n)
	}
	if g := grantNow(t, pl, "plain", 3); !g.fresh || g.p == p {
		t.Fatalf("plain's third thread got %+v, want a process of its own", g)
	}
}

// spareUp places agent's spare and starts it, failing the test if the pool
// does not want one.
func spareUp(t *testing.T, pl *procPool, agent string) *proc {
	t.Helper()
	p, ok := pl.wantSpare(agent)
	if !ok {
		t.Fatalf("no spare of %s wanted, want one", agent)
	}
	if !pl.started(p, nil, acp.AgentCapabilities{}) {
		t.Fatalf("spare of %s reported stopping as it started", agent)
	}
	return p
}

func unsparedNow(p *proc) bool {
	select {
	case <-p.unspared:
		return true
	default:
		return false
	}
}

func TestPoolTurnTakesTheSpareAndAnotherIsWanted(t *testing.T) {
	pl := newProcPool(16)
	pl.addAgent("a", 2, 1, true)
	spare := spareUp(t, pl, "a")
	if _, ok := pl.wantSpare("a"); ok {
		t.Fatal("a second spare wanted while one waits, want one at most")
	}
	g := grantNow(t, pl, "a", 1)
	if g.p != spare || g.fresh || !g.spare {
		t.Fatalf("grant %+v, want the spare %p taken (not fresh)", g, spare)
	}
	if !unsparedNow(spare) || pl.spareOf("a") != nil {
		t.Fatal("the taken spare is still the agent's spare")
	}
	next := spareUp(t, pl, "a")
	if next == spare {
		t.Fatal("the replacement is the taken process")
	}
	if live, per := pl.counts(); live != 2 || per["a"] != 2 {
		t.Fatalf("live %d, agent a %d; want 2 and 2 (the spare counted)", live, per["a"])
	}
	// At the agent's cap (2): no third spare, however many turns end.
	pl.done(spare)
	if _, ok := pl.wantSpare("a"); ok {
		t.Fatal("a spare wanted at the agent's cap")
	}
}

func TestPoolNoSpareWithoutPrewarm(t *testing.T) {
	pl := newProcPool(16)
	pl.addAgent("a", 2, 1, false)
	if p, ok := pl.wantSpare("a"); ok {
		t.Fatalf("spare %+v placed for an agent without prewarm", p)
	}
}

func TestPoolSpareNeverPushesOutAndGoesFirst(t *testing.T) {
	pl := newProcPool(2)
	pl.addAgent("a", 4, 1, true)
	pl.addAgent("b", 4, 1, false)
	b1 := startFresh(t, pl, grantNow(t, pl, "b", 1))
	spare := spareUp(t, pl, "a")
	// The daemon's cap (2) is full: b1 is busy, the spare idle. b's next turn
	// stops the spare, not b1, and no new spare of a is wanted.
	g := grantNow(t, pl, "b", 2)
	if !g.fresh || g.victim != spare {
		t.Fatalf("grant %+v, want a fresh process in place of a's spare", g)
	}
	if !unsparedNow(spare) {
		t.Fatal("the pushed-out spare's keeper was not told")
	}
	b2 := startFresh(t, pl, g)
	pl.done(b2)
	pl.done(b1)
	if _, ok := pl.wantSpare("a"); ok {
		t.Fatal("a spare wanted at the daemon's cap, want none: it would push out a thread's process")
	}
	if live, _ := pl.counts(); live != 2 {
		t.Fatalf("live %d, want 2 (the cap)", live)
	}
}

func TestPoolStartingSpareGoesOnceUp(t *testing.T) {
	pl := newProcPool(1)
	pl.addAgent("a", 4, 1, true)
	pl.addAgent("b", 4, 1, false)
	spare, ok := pl.wantSpare("a")
	if !ok {
		t.Fatal("no spare wanted")
	}
	// b's turn waits while a's spare starts (a process still starting is
	// never stopped), and takes its place once it is up.
	w := waiting(t, t.Context(), pl, "b", 1)
	if _, ok := pl.wantSpare("a"); ok {
		t.Fatal("a spare wanted while a turn waits")
	}
	pl.started(spare, nil, acp.AgentCapabilities{})
	g := recv(t, w)
	if !g.fresh || g.victim != spare {
		t.Fatalf("grant %+v, want a fresh process in place of the spare once up", g)
	}
}

func TestPoolIdleSpareIsDroppedAndNotReplacedUntilAsked(t *testing.T) {
	pl := newProcPool(16)
	pl.addAgent("a", 4, 1, true)
	spare := spareUp(t, pl, "a")
	if !pl.dropSpare(spare) {
		t.Fatal("the idle spare was not given to its keeper to stop")
	}
	pl.gone(spare)
	if live, per := pl.counts(); live != 0 || per["a"] != 0 {
		t.Fatalf("live %d, agent a %d after the spare idled out; want 0 and 0", live, per["a"])
	}
	if _, ok := pl.wantSpare("a"); ok {
		t.Fatal("a spare wanted right after one idled out, want none until a turn asks")
	}
	p := startFresh(t, pl, grantNow(t, pl, "a", 1))
	pl.done(p)
	if _, ok := pl.wantSpare("a"); !ok {
		t.Fatal("no spare wanted after a turn of the agent asked for a process")
	}
}

func TestPoolDroppingATakenSpareIsNotTheKeepers(t *testing.T) {
	pl := newProcPool(16)
	pl.addAgent("a", 4, 1, true)
	spare := spareUp(t, pl, "a")
	grantNow(t, pl, "a", 1)
	if pl.dropSpare(spare) {
		t.Fatal("the keeper was told to stop a spare a turn took")
	}
}

func TestPoolFailedSpareGivesItsPlaceBack(t *testing.T) {
	pl := newProcPool(16)
	pl.addAgent("a", 4, 1, true)
	spare, _ := pl.wantSpare("a")
	pl.failed(spare, errors.New("no such program"))
	if live, per := pl.counts(); live != 0 || per["a"] != 0 || pl.spareOf("a") != nil {
		t.Fatalf("live %d, agent a %d, spare %v after a failed start; want 0, 0, none", live, per["a"], pl.spareOf("a"))
	}
	if _, ok := pl.wantSpare("a"); ok {
		t.Fatal("a failed spare is started again at once, want it left until a turn asks")
	}
}

func TestPoolSpareGivenUpWhileStartingIsStoppedByItsStarter(t *testing.T) {
	pl := newProcPool(16)
	pl.addAgent("a", 4, 1, true)
	spare, _ := pl.wantSpare("a")
	g := grantNow(t, pl, "a", 1)
	if g.p != spare {
		t.Fatalf("grant %+v, want the starting spare", g)
	}
	// Its turn gives up before the spare is up (openAgent's ctx ended).
	pl.done(spare)
	if pl.detachWaiting(spare) {
		t.Fatal("the taker was told to stop a process still starting")
	}
	if pl.started(spare, nil, acp.AgentCapabilities{}) {
		t.Fatal("started kept a spare its taker gave up, want its starter told to stop it")
	}
	pl.gone(spare)
	if live, per := pl.counts(); live != 0 || per["a"] != 0 {
		t.Fatalf("live %d, agent a %d; want 0 and 0", live, per["a"])
	}
}
