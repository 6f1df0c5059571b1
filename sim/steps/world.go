package steps

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	acp "github.com/coder/acp-go-sdk"

	"github.com/zooid-dev/zooid/fakeagent"
	"github.com/zooid-dev/zooid/modeldouble"
	"github.com/zooid-dev/zooid/zooid/daemon"
	"github.com/zooid-dev/zooid/zooid/recording"
)

// world is one scenario: its homeserver lease, its humans, agents and rooms,
// the daemon under test and the controller scripting the agents. Given steps
// only declare agents and rooms; the first step that acts materialises them
// (rooms created or imported, daemon started), so setup costs one pass.
//
// Its state comes in parts, each a struct of its own embedded here, so a step
// reads the fields by name (w.humans, w.thread) and a reader sees which part
// a step touches: the cast, the daemon's settings, the conversation, the
// tool calls, the recordings and the HTTP-bound agents' answers.
type world struct {
	run     *runner
	log     *slog.Logger
	logs    *logTail       // the end of log, printed when the scenario fails
	dir     string         // scratch directory, removed on close
	closers []func() error // run in reverse by close
	stepSeq int
	timing  *scenarioTiming // where the scenario's time goes; nil unless Options.Timings

	cast
	daemonSetup
	conversation
	toolUse
	recordings
	httpAgents
	reachProbes
	several
}

// cast is who and where: the homeserver lease and its users, the agents with
// the controller scripting them (or the model double behind real ones), and
// the rooms.
type cast struct {
	lease    *lease
	as       *mautrix.Client
	conns    *http.Transport     // the humans' connections (humanClient)
	model    *modeldouble.Server // the real agents' model API, once one is declared
	ctl      *fakeagent.Controller
	humans   map[string]*human
	humanSeq []string
	agents   map[string]*agentDecl
	agentSeq []string
	rooms    map[string]*room
	roomSeq  []string
}

// daemonSetup is the daemon under test and what the scenario configured of
// it: zooid.yaml's knobs (zero: the daemon's default) and the faults
// programmed into its peers.
type daemonSetup struct {
	d       *daemon.Daemon
	started bool
	faults  []*programmedFault
	// lostToDevice counts the to-device messages fakehs lost as asked
	// ("the homeserver loses the next N encrypted to-device messages …").
	lostToDevice func() int
	idleTimeout  time.Duration // zooid.yaml idle_timeout
	traceDir     string        // zooid.yaml trace.dir; empty: tracing off
	encryption   bool          // zooid.yaml encryption: the agents get devices
	// agentDevices are the agents' devices as "has one end-to-end
	// encryption device" first saw them, to compare with later.
	agentDevices map[string]*id.Device
	turnTimeout  time.Duration   // the daemon's turn timeout; zero: the run's
	maxProcs     int             // zooid.yaml max_processes
	queueNotice  time.Duration   // zooid.yaml queue_notice_after
	toolTimeout  time.Duration   // zooid.yaml tool_timeout
	postTimeout  time.Duration   // zooid.yaml post_timeout
	roomKeyWait  time.Duration   // zooid.yaml room_key_wait; zero: lateKeyWait's
	taskTimeout  time.Duration   // zooid.yaml task_timeout
	unsandboxed  bool            // every agent's zooid.yaml sandbox is none
	observer     daemon.Observer // hears the daemon's timings (bench_routing.go); nil: none
}

// conversation is what the humans posted and what later steps mean by "the
// thread" and "the message it is answering".
type conversation struct {
	posts  []*post          // every message the harness posted, in order
	thread *post            // the thread steps mean by "the thread"
	focus  map[string]*post // per agent: the message it is answering
	batch  []*post          // the threads the last "mentions … in N new threads" step started
	pushes int
	// barriers are the barrier mentions sent and not yet seen answered;
	// a kill or stop waits for their answers (see settleBarriers).
	barriers []barrierSent
	// encrypted are the m.room.encrypted events humans sent, by the text
	// their step said they stood for (the ciphertext hides it).
	encrypted []*post
}

// toolUse is the tool calls agents made through steps, the paging cursors
// they hold and the long replies queued for them.
type toolUse struct {
	calls  map[string][]*call // per agent: tool calls made through steps
	last   *call              // the most recent tool call of any agent
	paging map[string]*paging
	prose  map[string]string // per agent: the long reply queued by a step
}

// recordings is the last room a step recorded and what replaying it said.
type recordings struct {
	recording    *recording.Recording // the last room recorded by a step
	recordedFrom *room                // and the room it was recorded from
	replayOut    string               // what the last `zooid replay` printed
}

// httpAgents is the answers of HTTP-bound agents.
type httpAgents struct {
	http *httpAnswer // the last answer of an HTTP-bound agent
	// httpWait waits for the answers of the last "asked over HTTP N times at once".
	httpWait func(context.Context) ([]*httpAnswer, error)
}

// reachProbes is what agents tried to reach from inside their sandbox
// (area_sandbox.go): per agent, the targets of its last reach step and what
// came of them, and its last tool run.
type reachProbes struct {
	reaches map[string][]reachTry
	tool    map[string]fakeagent.Probe
}

// human is a user of the homeserver that steps name.
type human struct {
	name string
	id   id.UserID
	cli  *mautrix.Client
	// dev is the human's encryption device; nil until a step gives it one.
	dev humanDevice
	// heldKeys are the room keys dev sent messages with and has not
	// delivered yet, per room, oldest first.
	heldKeys map[*room][]func(context.Context) error
	// opaqueSessions are the made-up megolm session ids of the human's
	// encrypted messages without a device, one per room: a client's
	// messages go under one session until it rotates, so they fail alike.
	opaqueSessions map[*room]string
}

// agentDecl is an agent as the scenario configured it.
type agentDecl struct {
	name    string
	rooms   []string
	trigger string
	http    bool // bound to the HTTP transport instead of Matrix
	// real runs a preset's real adapter against the model double
	// (real.go); nil for the scripted agent.
	real *realAgent
	// maxProcs and perProc are its max_processes and sessions_per_process;
	// zero: the defaults.
	maxProcs, perProc int
	// prewarm: zooid.yaml prewarm, a spare process kept. spare is the pid
	// the last "has a spare process" step found.
	prewarm      bool
	spare        int
	spareSession acp.SessionId // the session the spare opened
	// closeSessions: the scripted agent advertises session/close.
	closeSessions bool
	// peer: the agent is the second daemon's (several.go), not the daemon
	// under test's. cfgName is its zooid.yaml name when that differs from
	// the step name (two daemons' agents of one name); "" means the same.
	peer    bool
	cfgName string
}

// room is a room as steps name it, and what the harness put in it.
type room struct {
	name    string
	id      id.RoomID
	busy    *busySpec
	seeded  []seeded // the generated history, oldest first
	created bool
	// encrypted: created with m.room.encryption in its initial state.
	encrypted bool

	replay *recordedRoom // a recorded history to replay, see scenarios.go
}

// post is a message the harness sent as a human.
type post struct {
	room     *room
	id       id.EventID
	sender   string
	text     string // as the step wrote it
	core     string // the text without @mentions: what a prompt should contain
	root     id.EventID
	mentions []string
}

func newWorld(r *runner) *world {
	logs := newLogTail()
	return &world{
		run: r, log: teeLog(r.log, logs), logs: logs,
		cast:         cast{humans: map[string]*human{}, agents: map[string]*agentDecl{}, rooms: map[string]*room{}},
		conversation: conversation{focus: map[string]*post{}},
		toolUse:      toolUse{calls: map[string][]*call{}, paging: map[string]*paging{}},
		reachProbes:  reachProbes{reaches: map[string][]reachTry{}, tool: map[string]fakeagent.Probe{}},
	}
}

// waitCtx bounds one wait of a step.
func (w *world) waitCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, w.waitBound())
}

// waitBound is how long one wait of a step may take: the run's bound, longer
// in scenarios with real agents.
func (w *world) waitBound() time.Duration {
	if w.hasRealAgents() {
		return max(w.run.wait, realWait)
	}
	return w.run.wait
}

// ensureHomeserver leases the scenario's homeserver on first use.
func (w *world) ensureHomeserver(ctx context.Context) error {
	if w.lease != nil {
		return nil
	}
	begin := time.Now()
	l, err := w.run.backend.lease(ctx)
	w.timing.add(phaseLease, begin)
	if err != nil {
		return err
	}
	w.lease = l
	// w.lease, not l: claimSeeded may move the scenario to another lease.
	w.closers = append(w.closers, func() error { w.lease.release(); return nil })
	dir, err := os.MkdirTemp(scratchRoot(), "zw")
	if err != nil {
		return fmt.Errorf("scratch dir: %w", err)
	}
	w.dir = dir
	w.closers = append(w.closers, func() error { return os.RemoveAll(dir) })
	w.conns = http.DefaultTransport.(*http.Transport).Clone()
	w.conns.MaxIdleConnsPerHost = humanIdleConns
	w.closers = append(w.closers, func() error { w.conns.CloseIdleConnections(); return nil })
	if err := w.newAppserviceClient(); err != nil {
		return err
	}
	// w.lease at teardown, not l: claimSeeded may move the scenario to a
	// snapshot copy, whose agents outlive the scenario; leaving its rooms
	// keeps the next scenario's zooid_get_rooms its own.
	w.closers = append(w.closers, func() error {
		if !w.lease.sharedAgents {
			return nil
		}
		return w.leaveAgentRooms()
	})
	return nil
}

// newAppserviceClient makes w.as, the lease's appservice bot.
func (w *world) newAppserviceClient() error {
	l := w.lease
	as, err := mautrix.NewClient(l.hs.baseURL(), id.NewUserID(l.reg.SenderLocalpart, l.names.serverName), l.reg.AppToken)
	if err != nil {
		return fmt.Errorf("appservice client: %w", err)
	}
	as.SetAppServiceUserID = true
	w.as = as
	return nil
}

// humanIdleConns is how many idle connections to the homeserver the
// scenario's humans keep. The routing load sends from 20 rooms at once as
// one person; with net/http's default of two a host, nearly every send
// opened a connection and closed it, costing the process under measurement
// (the daemon's) a dial and a close each (docs/performance.md, item 6).
const humanIdleConns = 32

// humanClient is a person's Matrix client on the scenario's own connection
// pool, closed with the scenario, as a real client keeps its connections.
func (w *world) humanClient(base string, uid id.UserID, tok string) (*mautrix.Client, error) {
	cli, err := mautrix.NewClient(base, uid, tok)
	if err != nil {
		return nil, err
	}
	cli.Client = &http.Client{Timeout: cli.Client.Timeout, Transport: w.conns}
	return cli, nil
}

// claimSeeded takes a busy room ready-seeded from the run's snapshot
// (sim/steps/snapshot.go) when one matches, instead of sending its history:
// the scenario moves to the copy's registration, humans and names, and
// gives its slot back. Until start only humans were registered, so nothing
// else has to move.
func (w *world) claimSeeded(ctx context.Context) error {
	b := w.lease.shared
	if b == nil || b.pool == nil {
		return nil
	}
	for _, rn := range w.roomSeq {
		r := w.rooms[rn]
		if r.created {
			continue
		}
		begin := time.Now()
		e, rc := b.pool.claim(ctx, r, w.humanSeq)
		if e == nil {
			continue
		}
		old := w.lease
		server := old.names.serverName
		w.lease = b.pool.lease(e, b.hs, server)
		w.lease.shared = b
		old.release()
		if err := w.newAppserviceClient(); err != nil {
			return err
		}
		for _, hn := range w.humanSeq {
			ph := e.Humans[hn]
			cli, err := w.humanClient(b.hs.baseURL(), ph.ID, ph.Token)
			if err != nil {
				return fmt.Errorf("client for %s: %w", hn, err)
			}
			w.humans[hn] = &human{name: hn, id: ph.ID, cli: cli}
		}
		var events []seedEvent
		r.seeded, events = rc.spec().generate(rc.senderIDs(e.poolEntry, server), time.Time{})
		fillSeeded(r.seeded, e.events, events)
		r.id, r.created = e.Room, true
		w.timing.add(phaseSeed, begin)
		// One room per scenario comes from the pool: a second would
		// belong to another registration.
		return nil
	}
	return nil
}

// leaveAgentRooms makes every agent of the scenario leave every room it is in.
func (w *world) leaveAgentRooms() error {
	ctx, cancel := context.WithTimeout(context.Background(), w.run.wait)
	defer cancel()
	var errs []error
	for _, an := range w.agentSeq {
		cli, err := w.clientFor(ctx, w.agentUser(an))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		joined, err := cli.JoinedRooms(ctx)
		if err != nil {
			errs = append(errs, fmt.Errorf("listing %s's rooms: %w", an, err))
			continue
		}
		for _, rid := range joined.JoinedRooms {
			if rid == w.lease.keep {
				continue
			}
			if _, err := cli.LeaveRoom(ctx, rid); err != nil {
				errs = append(errs, fmt.Errorf("%s leaving %s: %w", an, rid, err))
			}
		}
	}
	return errors.Join(errs...)
}

// names is the scenario's name→id mapping; only valid after ensureHomeserver.
func (w *world) names() names { return w.lease.names }

// close tears everything down in reverse order of creation, whatever failed.
func (w *world) close() error {
	var errs []error
	for i := len(w.closers) - 1; i >= 0; i-- {
		if err := closeWithin(w.closers[i], closeTimeout); err != nil {
			errs = append(errs, err)
		}
	}
	w.closers = nil
	return errors.Join(errs...)
}

// closeTimeout bounds each teardown step, so one stuck part fails its
// scenario with a message instead of hanging the whole run.
const closeTimeout = 20 * time.Second

// closeWithin runs a closer, giving up on it after d. A closer that hangs is
// left running (it can't be stopped from outside) and reported.
func closeWithin(close func() error, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- close() }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		return fmt.Errorf("teardown step still running after %s; abandoned", d)
	}
}

// addHuman registers a human by name.
func (w *world) addHuman(ctx context.Context, name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	if _, ok := w.humans[name]; ok {
		return nil
	}
	if _, ok := w.agents[name]; ok {
		return fmt.Errorf("%q is already an agent", name)
	}
	if err := w.ensureHomeserver(ctx); err != nil {
		return err
	}
	begin := time.Now()
	uid, tok, err := w.lease.hs.registerHuman(ctx, w.names().humanLocalpart(name), name)
	w.timing.add(phaseHumans, begin)
	if err != nil {
		return err
	}
	cli, err := w.humanClient(w.lease.hs.baseURL(), uid, tok)
	if err != nil {
		return fmt.Errorf("client for %s: %w", name, err)
	}
	w.humans[name] = &human{name: name, id: uid, cli: cli}
	w.humanSeq = append(w.humanSeq, name)
	if w.started {
		for _, rn := range w.roomSeq {
			if err := w.join(ctx, w.humans[name], w.rooms[rn]); err != nil {
				return err
			}
		}
	}
	return nil
}

// human looks up a human by name.
func (w *world) human(name string) (*human, error) {
	h, ok := w.humans[name]
	if !ok {
		return nil, fmt.Errorf("no human %q; declare it with: the homeserver has users %q", name, name)
	}
	return h, nil
}

// humanIn starts the scenario if it has not started and looks up a human
// and the room a step has them act in.
func (w *world) humanIn(ctx context.Context, who, roomName string) (*human, *room, error) {
	if err := w.start(ctx); err != nil {
		return nil, nil, err
	}
	h, err := w.human(who)
	if err != nil {
		return nil, nil, err
	}
	r, err := w.room(ctx, roomName)
	if err != nil {
		return nil, nil, err
	}
	return h, r, nil
}

// agent looks up an agent by name.
func (w *world) agent(name string) (*agentDecl, error) {
	a, ok := w.agents[name]
	if !ok {
		return nil, fmt.Errorf("no agent %q; declare it with: agent %q is bound to \"#room\"", name, name)
	}
	return a, nil
}

// userID is the Matrix id of a human or agent by name.
func (w *world) userID(name string) (id.UserID, error) {
	if h, ok := w.humans[name]; ok {
		return h.id, nil
	}
	if _, ok := w.agents[name]; ok {
		return w.agentUser(name), nil
	}
	return "", fmt.Errorf("%q is neither a human nor an agent of this scenario", name)
}

// nameOf is the step name of a Matrix user, or the raw id when unknown.
func (w *world) nameOf(uid id.UserID) string {
	for n, h := range w.humans {
		if h.id == uid {
			return n
		}
	}
	for n := range w.agents {
		if w.agentUser(n) == uid {
			return n
		}
	}
	return string(uid)
}

// room returns the room a step names, declaring it on first mention; once
// the scenario has started, a new room is created on the spot.
func (w *world) room(ctx context.Context, name string) (*room, error) {
	if err := checkRoom(name); err != nil {
		return nil, err
	}
	if r, ok := w.rooms[name]; ok {
		return r, nil
	}
	r := &room{name: name}
	w.rooms[name] = r
	w.roomSeq = append(w.roomSeq, name)
	if w.started {
		if err := w.createRoom(ctx, r); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// start materialises the declared scenario: rooms, agents, daemon.
func (w *world) start(ctx context.Context) error {
	if w.started {
		return nil
	}
	if len(w.humanSeq) == 0 {
		return errors.New("the scenario has no human users; start with: the homeserver has users \"ori\" and \"mia\"")
	}
	begin := time.Now()
	if err := w.claimSeeded(ctx); err != nil {
		return err
	}
	if err := w.createRooms(ctx); err != nil {
		return err
	}
	t := time.Now()
	if err := w.handOverPushes(ctx); err != nil {
		return err
	}
	w.timing.add(phaseHandover, t)
	t = time.Now()
	if err := w.startDaemon(ctx); err != nil {
		return err
	}
	if err := w.startPeerDaemon(ctx); err != nil {
		return err
	}
	w.timing.add(phaseDaemon, t)
	w.started = true
	w.log.Debug("scenario started", "took", time.Since(begin))
	return nil
}

// handOverPushes frees the appservice push address for the daemon, once the
// homeserver has pushed the seeded history to the placeholder listener (so the
// daemon does not take old messages for new ones).
func (w *world) handOverPushes(ctx context.Context) error {
	if w.lease.handOver == nil {
		return nil
	}
	var last id.EventID
	for _, rn := range w.roomSeq {
		if r := w.rooms[rn]; len(r.seeded) > 0 {
			last = r.seeded[len(r.seeded)-1].id
		}
	}
	hctx, cancel := context.WithTimeout(ctx, w.run.wait)
	defer cancel()
	return w.lease.handOver(hctx, last)
}

// stripMentions removes @name tokens, leaving what the prompt should carry.
func stripMentions(text string) string {
	var kept []string
	for _, f := range strings.Fields(text) {
		if strings.HasPrefix(f, "@") && len(f) > 1 {
			continue
		}
		kept = append(kept, f)
	}
	return strings.Join(kept, " ")
}
