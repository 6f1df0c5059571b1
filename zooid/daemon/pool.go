package daemon

import (
	"context"
	"slices"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/zooid-dev/zooid/zooid/acpagent"
	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/container"
)

// procPool bounds live agent processes, per agent and across the daemon.
// A turn whose thread has no live process asks the pool for one and gets, in
// this order of preference: a place on a live process of its agent that has
// hosted fewer sessions than sessions_per_process allows; a new process, when
// both caps allow; or the place of the least recently used idle process,
// which the taker stops before starting its own, so the real number of
// processes never exceeds a cap. When none of that is possible the turn waits;
// waiters are served in arrival order (their turn's sequence number), so a
// chatty thread cannot starve a quiet one.
//
// An agent with prewarm keeps one spare: a process started and initialized
// before any thread needs it, counted against both caps like any other. A
// turn takes its agent's spare before it starts a process of its own. A spare
// never pushes out a busy process (one is started only below both caps and
// with no turn waiting), and it is the first to go when a cap is needed; the
// one still starting goes once it is up.
type procPool struct {
	mu      sync.Mutex
	max     int // live processes across agents
	live    int // processes counted against max: starting, running, stopping
	agents  map[string]*agentProcs
	tick    uint64        // orders the ends of turns, for least recently used
	waiters []*procWaiter // by seq
}

// agentProcs is one agent's share of the pool.
type agentProcs struct {
	max     int // live processes of this agent
	perProc int // sessions one process hosts over its life
	// auto: sessions_per_process auto, decided by the agent's first
	// process once it has said what it can (learned); until then its other
	// turns wait for it.
	auto, learned bool
	procs         []*proc
	// prewarm: keep a spare. spare is the one kept (nil when none is);
	// paused says the last spare failed, idled out or was pushed out, so
	// none is started again until a turn of the agent asks for a process.
	prewarm bool
	spare   *proc
	paused  bool
}

// proc is one agent process as the pool sees it. Its counters are the pool's
// (under procPool.mu); conn and bindings are set by the daemon.
type proc struct {
	agent    string
	busy     int    // turns running on it, or its start in progress
	sessions int    // sessions placed on it over its life
	attached int    // sessions still holding it
	used     uint64 // tick of its last turn's end
	ready    bool   // started
	stopping bool   // chosen to stop: no turn or session may start on it
	// spare: started ahead of need and not yet taken by a turn. unspared
	// is closed when it stops being a spare (taken, or chosen to stop), so
	// its keeper (Daemon.keepSpare) lets it go.
	spare    bool
	unspared chan struct{}
	// up is closed once the start ended (ready, or failed with startErr):
	// sessions placed on a process still starting wait for it.
	up       chan struct{}
	startErr error

	conn *acpagent.Conn
	// agentPid is whom its sessions' bindings serve (the container's first
	// process with runtime docker), cwd where its sessions run, container
	// its container, removed with it.
	agentPid  int
	cwd       string
	container *container.Started
	// smu guards byID and spareSess: permission requests arrive on the
	// connection's goroutine and name their ACP session.
	smu  sync.Mutex
	byID map[acp.SessionId]*agentSession
	// spareSess is the session a spare opened before any thread needed it,
	// until the thread that takes the process takes it too.
	spareSess *spareSession
	// bindings are the MCP bindings of its sessions: whoever stops the
	// process unbinds them, since an evicted session's own loop is idle.
	bindings map[string]struct{}
}

// spareSession is an ACP session opened on a spare process ahead of its
// thread, its Zooid tools bound pending (mcpserver.BindPending).
type spareSession struct {
	sess    *acpagent.Session
	binding string
}

// setSpareSession and takeSpareSession hand a spare session from the
// spare's keeper to the first thread placed on the process.
func (p *proc) setSpareSession(ss *spareSession) {
	p.smu.Lock()
	defer p.smu.Unlock()
	p.spareSess = ss
}

func (p *proc) takeSpareSession() *spareSession {
	p.smu.Lock()
	defer p.smu.Unlock()
	ss := p.spareSess
	p.spareSess = nil
	return ss
}

// remember maps an ACP session on p to the daemon's session, and forget
// unmaps it; session finds it for a permission request.
func (p *proc) remember(id acp.SessionId, st *agentSession) {
	p.smu.Lock()
	defer p.smu.Unlock()
	if p.byID == nil {
		p.byID = map[acp.SessionId]*agentSession{}
	}
	p.byID[id] = st
}

func (p *proc) forget(id acp.SessionId) {
	p.smu.Lock()
	defer p.smu.Unlock()
	delete(p.byID, id)
}

func (p *proc) session(id acp.SessionId) *agentSession {
	p.smu.Lock()
	defer p.smu.Unlock()
	return p.byID[id]
}

// dead says whether the process exited on its own (a crash between turns).
func (p *proc) dead() bool {
	if p.conn == nil {
		return false
	}
	select {
	case <-p.conn.Done():
		return true
	default:
		return false
	}
}

// procGrant is what acquire hands a turn: the process to run on and, when
// fresh, the duty to start it (after stopping victim, if set). A grant that
// is not fresh may name a process still starting: wait on its up channel.
type procGrant struct {
	p      *proc
	fresh  bool
	victim *proc
	spare  bool // p was its agent's spare
}

type procWaiter struct {
	agent   string
	seq     uint64
	ready   chan struct{} // closed once g is set
	g       procGrant
	granted bool
}

// newProcPool makes a pool with max live processes across agents.
func newProcPool(max int) *procPool {
	return &procPool{max: max, agents: map[string]*agentProcs{}}
}

// addAgent sets an agent's caps; call before the first acquire for it.
// perProc config.SessionsPerProcessAuto is decided by the agent's first
// process (see started); until then a process hosts one session.
// prewarm keeps a spare process of the agent (see procPool).
func (pl *procPool) addAgent(name string, max, perProc int, prewarm bool) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if perProc == config.SessionsPerProcessAuto {
		pl.agents[name] = &agentProcs{max: max, perProc: 1, auto: true, prewarm: prewarm}
		return
	}
	pl.agents[name] = &agentProcs{max: max, perProc: max1(perProc), prewarm: prewarm}
}

// perProcess is how many sessions a process of agent hosts now.
func (pl *procPool) perProcess(agent string) int {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.agents[agent].perProc
}

func max1(n int) int { return max(n, 1) }

// waitReason says which cap holds a waiting turn back.
type waitReason struct {
	agentCap bool // the agent's own max_processes; else the daemon's
	max      int
}

// acquire finds a process for a turn of agent with arrival number seq. It
// waits while every process that could serve it is busy; after noticeAfter
// (if positive) it calls long once, from the caller's goroutine, with what
// the turn waits for. It fails only when ctx ends first.
func (pl *procPool) acquire(ctx context.Context, agent string, seq uint64, noticeAfter time.Duration, long func(waitReason)) (procGrant, error) {
	w := &procWaiter{agent: agent, seq: seq, ready: make(chan struct{})}
	pl.mu.Lock()
	i, _ := slices.BinarySearchFunc(pl.waiters, seq, func(x *procWaiter, s uint64) int {
		switch {
		case x.seq < s:
			return -1
		case x.seq > s:
			return 1
		}
		return 0
	})
	pl.waiters = slices.Insert(pl.waiters, i, w)
	pl.serve()
	pl.mu.Unlock()

	var notice <-chan time.Time
	if noticeAfter > 0 && long != nil {
		t := time.NewTimer(noticeAfter)
		defer t.Stop()
		notice = t.C
	}
	for {
		select {
		case <-w.ready:
			return w.g, nil
		case <-notice:
			notice = nil
			select {
			case <-w.ready:
				return w.g, nil
			default:
			}
			long(pl.reason(agent))
		case <-ctx.Done():
			pl.mu.Lock()
			defer pl.mu.Unlock()
			if w.granted {
				// Granted as ctx ended: the caller starts and fails, and gives
				// the place back as a failed start would.
				return w.g, nil
			}
			pl.waiters = slices.DeleteFunc(pl.waiters, func(x *procWaiter) bool { return x == w })
			return procGrant{}, ctx.Err()
		}
	}
}

// reason says which cap a turn of agent waits behind.
func (pl *procPool) reason(agent string) waitReason {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	a := pl.agents[agent]
	if len(a.procs) >= a.max {
		return waitReason{agentCap: true, max: a.max}
	}
	return waitReason{max: pl.max}
}

// serve grants waiters in arrival order while anything can be granted; a
// waiter no free resource suits does not hold back later ones that another
// resource suits. Called with mu held after every change.
func (pl *procPool) serve() {
	for i := 0; i < len(pl.waiters); {
		w := pl.waiters[i]
		g, ok := pl.try(w.agent)
		if !ok {
			i++
			continue
		}
		w.g, w.granted = g, true
		close(w.ready)
		pl.waiters = slices.Delete(pl.waiters, i, i+1)
	}
}

// try grants a process to a turn of agent now, if any can be had.
func (pl *procPool) try(agent string) (procGrant, bool) {
	a := pl.agents[agent]
	// A turn that asks for a process wants the agent warm again.
	a.paused = false
	if p := a.spare; p != nil && !p.dead() {
		// Taken even while it starts: it started earlier than a fresh one
		// would. Its taker waits on up like any session placed on a
		// starting process.
		pl.unspare(p)
		p.sessions++
		p.attached++
		p.busy++
		return procGrant{p: p, spare: true}, true
	}
	if a.auto && !a.learned && len(a.procs) > 0 {
		// The agent's first process is starting and will say how many
		// sessions a process may host: wait for it rather than start more.
		return procGrant{}, false
	}
	// A process still starting takes sessions too: a burst of threads fills
	// one process instead of starting one each.
	for _, p := range a.procs {
		if !p.spare && !p.stopping && p.sessions < a.perProc && !p.dead() {
			p.sessions++
			p.attached++
			p.busy++
			return procGrant{p: p}, true
		}
	}
	fresh := &proc{agent: agent, busy: 1, sessions: 1, attached: 1, up: make(chan struct{}), bindings: map[string]struct{}{}}
	if len(a.procs) < a.max && pl.live < pl.max {
		a.procs = append(a.procs, fresh)
		pl.live++
		return procGrant{p: fresh, fresh: true}, true
	}
	// At a cap: the least recently used idle process makes room. At the
	// agent's own cap only its processes can; at the daemon's, any agent's.
	// A spare goes before any process a thread used; among those, the
	// least recently used.
	var victim *proc
	consider := func(p *proc) {
		if !p.ready || p.stopping || p.busy != 0 {
			return
		}
		if victim == nil || p.spare && !victim.spare || p.spare == victim.spare && p.used < victim.used {
			victim = p
		}
	}
	if len(a.procs) >= a.max {
		for _, p := range a.procs {
			consider(p)
		}
	} else {
		for _, o := range pl.agents {
			for _, p := range o.procs {
				consider(p)
			}
		}
	}
	if victim == nil {
		return procGrant{}, false
	}
	if victim.spare {
		pl.unspare(victim)
		// Not started again while the caps are wanted: the next turn of its
		// agent asks for it.
		pl.agents[victim.agent].paused = true
	}
	victim.stopping = true
	pl.remove(victim)
	// The victim's place passes to fresh: live is unchanged, and the taker
	// stops the victim before it starts fresh.
	a.procs = append(a.procs, fresh)
	return procGrant{p: fresh, fresh: true, victim: victim}, true
}

// unspare makes p an ordinary process (with mu held): taken by a turn, or
// chosen to stop.
func (pl *procPool) unspare(p *proc) {
	if !p.spare {
		return
	}
	p.spare = false
	close(p.unspared)
	if a := pl.agents[p.agent]; a.spare == p {
		a.spare = nil
	}
}

// wantSpare places a new spare of agent and returns it for its caller to
// start (then started or failed), when the agent keeps one, has none and
// both caps have room with no turn waiting for a place.
func (pl *procPool) wantSpare(agent string) (*proc, bool) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	a := pl.agents[agent]
	if a == nil || !a.prewarm || a.paused || a.spare != nil || len(a.procs) >= a.max || pl.live >= pl.max || len(pl.waiters) > 0 {
		return nil, false
	}
	p := &proc{agent: agent, spare: true, unspared: make(chan struct{}), up: make(chan struct{}), bindings: map[string]struct{}{}}
	a.spare = p
	a.procs = append(a.procs, p)
	pl.live++
	return p, true
}

// dropSpare chooses the spare p to stop (it idled out, died, or the daemon
// is stopping) unless a turn took it first; true means the caller stops it
// and calls gone. No new spare is started until a turn of the agent asks.
func (pl *procPool) dropSpare(p *proc) bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if !p.spare || p.stopping {
		return false
	}
	pl.unspare(p)
	pl.agents[p.agent].paused = true
	p.stopping = true
	pl.remove(p)
	return true
}

// remove takes p out of its agent's list (with mu held).
func (pl *procPool) remove(p *proc) {
	a := pl.agents[p.agent]
	a.procs = slices.DeleteFunc(a.procs, func(x *proc) bool { return x == p })
}

// started marks a fresh process ready: later sessions may join it. Under
// sessions_per_process auto the agent's first process decides how many
// sessions its processes host: config.AutoSessionsPerProcess if it
// advertised session/close (caps, from its initialize), else 1.
//
// It reports false when p was chosen to stop while it started (a spare whose
// taker gave up on it, see detachWaiting): the starter then stops it and
// gives its place back (Daemon.stopProc).
func (pl *procPool) started(p *proc, conn *acpagent.Conn, caps acp.AgentCapabilities) bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	p.conn, p.ready = conn, true
	close(p.up)
	if p.stopping {
		return false
	}
	if a := pl.agents[p.agent]; a.auto && !a.learned {
		a.learned = true
		if caps.SessionCapabilities.Close != nil {
			a.perProc = config.AutoSessionsPerProcess
		}
	}
	pl.serve()
	return true
}

// failed gives back the place of a fresh process that did not start; the
// sessions placed on it meanwhile fail with err.
func (pl *procPool) failed(p *proc, err error) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	p.startErr = err
	close(p.up)
	if p.spare {
		pl.unspare(p)
		pl.agents[p.agent].paused = true // a failing agent is not restarted in a loop
	}
	if !p.stopping {
		p.stopping = true
		pl.remove(p)
	}
	// Chosen to stop while it started (see detachWaiting) or not, the
	// starter gives its place back.
	pl.live--
	pl.serve()
}

// use starts a turn on the live process a session already holds; false means
// the process was chosen to stop (evicted) and the turn must acquire anew.
func (pl *procPool) use(p *proc) bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if p.stopping {
		return false
	}
	p.busy++
	return true
}

// done ends a turn on p: it becomes idle (if no other turn runs on it) as the
// most recently used, and a waiter may take it.
func (pl *procPool) done(p *proc) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	p.busy--
	pl.tick++
	p.used = pl.tick
	pl.serve()
}

// detach lets a session go of p, with its binding. It reports whether the
// caller must stop p (its last session left and nobody else is stopping it);
// the caller then calls gone once the process has exited.
func (pl *procPool) detach(p *proc, binding string) bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	p.attached--
	delete(p.bindings, binding)
	if p.attached > 0 || p.stopping {
		return false
	}
	p.stopping = true
	pl.remove(p)
	return true
}

// detachWaiting is detach for a session that gave up waiting for p to
// start. When p's start is still under way its starter is told to stop it
// instead (started reports false, or failed gives the place back), so nobody
// touches a process while it starts.
func (pl *procPool) detachWaiting(p *proc) bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	p.attached--
	if p.attached > 0 || p.stopping {
		return false
	}
	p.stopping = true
	pl.remove(p)
	return p.ready || p.startErr != nil
}

// stays says whether p goes on after a session left it: not chosen to stop.
func (pl *procPool) stays(p *proc) bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return !p.stopping
}

// evict chooses p to stop now, busy or not; it reports whether the caller
// must stop it (false: someone already is).
func (pl *procPool) evict(p *proc) bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	if p.stopping {
		return false
	}
	p.stopping = true
	pl.remove(p)
	return true
}

// gone gives back the place of a process its stopper has seen exit.
func (pl *procPool) gone(p *proc) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.live--
	pl.serve()
}

// bind records a session's MCP binding on p, and unbind list p's bindings
// for its stopper.
func (pl *procPool) bind(p *proc, binding string) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	p.bindings[binding] = struct{}{}
}

func (pl *procPool) takeBindings(p *proc) []string {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	var out []string
	for b := range p.bindings {
		out = append(out, b)
	}
	clear(p.bindings)
	return out
}

// counts reports live processes in all and per agent, for tests and logs.
func (pl *procPool) counts() (live int, per map[string]int) {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	per = map[string]int{}
	for n, a := range pl.agents {
		per[n] = len(a.procs)
	}
	return pl.live, per
}

// spareOf is the agent's spare, nil when it has none (for tests and logs).
func (pl *procPool) spareOf(agent string) *proc {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.agents[agent].spare
}
