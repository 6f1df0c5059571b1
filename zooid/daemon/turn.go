package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/internal/faultpoint"
	"github.com/zooid-dev/zooid/zooid/acpagent"
	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/mcpserver"
	"github.com/zooid-dev/zooid/zooid/tools"
	"github.com/zooid-dev/zooid/zooid/trace"
	"github.com/zooid-dev/zooid/zooid/zevent"
)

// agentSession is a session's live agent: its process, ACP session and the
// Zooid MCP binding it was given. It belongs to the session's turn loop.
type agentSession struct {
	proc    *proc // the process it runs on, shared when sessions_per_process > 1
	live    context.Context
	conn    *acpagent.Conn
	acp     *acpagent.Session
	binding string
	kind    tools.SessionKind

	// post is the running turn's poster: permission requests arrive on the
	// ACP connection's goroutine and their notices belong to the current turn.
	mu   sync.Mutex
	post *poster
}

func (st *agentSession) setPoster(p *poster) {
	st.mu.Lock()
	st.post = p
	st.mu.Unlock()
}

func (st *agentSession) poster() *poster {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.post
}

// runTurn prompts the session's agent with one message and posts what it says.
func (d *Daemon) runTurn(ctx context.Context, s *session, req turnRequest) {
	rt := d.agents[s.key.agent]
	post := &poster{d: d, as: rt.userID, room: s.key.room, thread: s.key.thread, trigger: req.trigger, turn: req.id, agent: rt.cfg.Name}
	defer func() {
		// As for tasks: a daemon shutting down returns nobody's handoff; the
		// restart returns it interrupted, once.
		if d.sessions.ctx.Err() == nil {
			d.handoffTurnEnded(s, post.last, post.err)
		}
	}()
	if tt, ok := d.taskTurnFor(s.key); ok {
		post.task = tt
		defer func() {
			// A daemon shutting down does not judge: the restart closes the task
			// as interrupted, exactly once.
			if d.sessions.ctx.Err() == nil {
				d.endTaskTurn(context.WithoutCancel(ctx), tt, s.key, string(post.stop), post.err, post.last, s.pending())
			}
		}()
	}

	st, _ := s.state.(*agentSession)
	if st != nil {
		switch {
		case !d.pool.use(st.proc):
			// Its process was stopped to make room for another thread: the
			// thread goes on in a fresh one, as after an idle stop.
			d.log.Info("agent process was stopped for another thread; starting afresh", "agent", rt.cfg.Name, "room", s.key.room, "thread", s.key.thread)
			d.retire(s, st)
			st = nil
		case st.proc.dead():
			// The process died between turns: start afresh rather than fail the turn.
			d.pool.done(st.proc)
			d.trace.Record(traceAgent(s.key, trace.AgentCrashed, st.conn.Err()))
			d.kill(s, st)
			st = nil
		}
	}
	fresh := st == nil
	if st == nil {
		// A thread without a live process waits its turn for one (the caps);
		// a long wait is said in the thread, once.
		g, err := d.pool.acquire(ctx, rt.cfg.Name, req.seq, d.opts.QueueNoticeAfter, func(r waitReason) {
			d.log.Info("turn queued for an agent process", "agent", rt.cfg.Name, "room", s.key.room, "thread", s.key.thread, "agent_cap", r.agentCap, "max", r.max)
			post.notice(ctx, queuedNotice(rt.cfg.Name, r))
		})
		if err != nil {
			return // the session was cleared or the daemon is stopping
		}
		// A fresh agent knows nothing of where it is. When the thread had an
		// earlier agent (idle, crash, timeout, a daemon restart) or anything
		// before this prompt, it is told to catch up. What the header and the
		// trigger's visibility need from the homeserver is read while the
		// agent starts; this turn waits for the reads whatever happens.
		catchUp := s.opened > 0 || req.trigger != s.key.thread
		readCtx, stopReads := context.WithCancel(ctx)
		header := make(chan sessionHeader, 1)
		go func() {
			d.triggerVisible(readCtx, rt, s.key.room, req)
			header <- d.header(readCtx, rt, s.key, req.from, catchUp)
		}()
		// An agent that never finishes starting (waiting on a login, a TTY)
		// must not hold the thread forever.
		openCtx, cancel := context.WithTimeout(ctx, d.opts.StartTimeout)
		began := time.Now()
		st, err = d.openAgent(openCtx, ctx, rt, s, g)
		cancel()
		// How long start-up takes is what a turn_timeout must leave room for.
		d.log.Debug("agent opened", "agent", rt.cfg.Name, "took", time.Since(began), "spare", g.spare, "err", err)
		if err != nil {
			stopReads()
			<-header
			if ctx.Err() != nil {
				return
			}
			d.log.Error("starting agent", "agent", rt.cfg.Name, "err", err)
			d.trace.Record(traceAgent(s.key, trace.AgentStartFailed, err))
			defer d.endTurn(s.key, req, "", err)
			post.err = err
			post.failure(ctx, "start_failed", fmt.Sprintf("%s could not be started: %v", rt.cfg.Name, err))
			return
		}
		s.state = st
		s.opened++
		req.text = (<-header).String() + "\n\n" + req.text
		stopReads()
		// The spare this turn took is replaced now that its own start is
		// done, so the two do not compete for the machine.
		d.prewarm(rt)
	}
	defer d.pool.done(st.proc)
	st.setPoster(post)
	defer st.setPoster(nil)
	// A session's role can change under it (its thread became a task thread after
	// it opened): the MCP server then tells the agent its tool list changed.
	if kind := d.kindFor(s.key); kind != st.kind {
		d.mcp.SetKind(st.binding, kind)
		st.kind = kind
	}

	if !fresh {
		// The prompt goes out now; what the agent reads waits for its trigger
		// to be readable (readGate), which the check started at queueing
		// mostly has seen by the time the agent's first tool call comes.
		if visible := d.visibleCheck(s.key, req); visible != nil {
			d.reads.hold(s.key, visible)
			defer d.reads.release(s.key, visible)
		}
	}
	turnCtx, cancel := context.WithTimeout(ctx, d.opts.TurnTimeout)
	defer cancel()
	began := time.Now()
	var buf strings.Builder
	budget := newProseBudget()
	d.trace.Record(tracePrompt(s.key, req, fresh))
	if o := d.opts.Observer; o != nil {
		o.PromptWritten(req.trigger, time.Now())
	}
	adapter := adapterOf(rt.cfg.ACP)
	stop, err := st.acp.Prompt(turnCtx, req.text, func(u acpagent.Update) {
		switch {
		case u.Text != "" && adapterStatus(adapter, u.Raw):
			d.log.Info("agent adapter status, not posted", "agent", rt.cfg.Name, "text", u.Text)
		case u.Text != "":
			buf.WriteString(budget.take(u.Text))
		case u.ToolCall != nil || u.ToolCallUpdate != nil || u.Raw.Plan != nil:
			// The agent turns to work: what it said so far is a whole message.
			// Other updates (thoughts, usage, commands) don't split prose.
			post.prose(ctx, buf.String())
			buf.Reset()
		}
	})
	if err == nil && post.task == nil {
		// The agent is done: only posting its last words is left. Journal them
		// first, so a crash while they are posted is finished by the next start
		// rather than reported as an interrupted turn. (Task threads are left to
		// the task journal, and their prose may hand off.)
		d.closingTurn(s.key, req, post, buf.String())
		faultpoint.Reach(faultpoint.TurnClosingJournaled)
	}
	post.prose(ctx, buf.String())
	if n := budget.notice(rt.cfg.Name); n != "" {
		d.log.Warn("agent output over the turn's limit dropped", "agent", rt.cfg.Name, "limit", MaxTurnProse, "dropped", budget.dropped)
		post.notice(ctx, n)
	}
	faultpoint.Reach(faultpoint.TurnReplyPosted)
	post.stop, post.err = stop, err
	if err != nil && ctx.Err() != nil {
		post.stop, post.err = acp.StopReasonCancelled, nil
	}
	defer d.endTurn(s.key, req, string(post.stop), post.err)

	switch {
	case err == nil:
		d.log.Info("turn ended", "agent", rt.cfg.Name, "room", s.key.room, "thread", s.key.thread, "stop", stop, "took", time.Since(began))
	case ctx.Err() != nil:
		// The session was cleared or the daemon is stopping: no one to tell.
		d.retire(s, st)
	case errors.Is(err, acpagent.ErrCrashed):
		d.log.Warn("agent crashed mid-turn", "agent", rt.cfg.Name, "err", err)
		d.trace.Record(traceAgent(s.key, trace.AgentCrashed, st.conn.Err()))
		post.failure(ctx, "agent_crashed", fmt.Sprintf("%s stopped unexpectedly (%v). The next message starts a fresh session.", rt.cfg.Name, st.conn.Err()))
		d.kill(s, st)
	case errors.Is(turnCtx.Err(), context.DeadlineExceeded):
		d.log.Warn("agent turn timed out", "agent", rt.cfg.Name, "timeout", d.opts.TurnTimeout)
		d.trace.Record(traceAgent(s.key, trace.AgentTimedOut, err))
		post.failure(ctx, "agent_timeout", fmt.Sprintf("%s did not finish its turn within %s and was stopped. The next message starts a fresh session.", rt.cfg.Name, d.opts.TurnTimeout))
		d.kill(s, st)
	default:
		d.log.Warn("agent turn failed", "agent", rt.cfg.Name, "err", err)
		d.trace.Record(traceAgent(s.key, trace.AgentFailed, err))
		post.failure(ctx, "agent_error", fmt.Sprintf("%s failed: %v. The next message starts a fresh session.", rt.cfg.Name, err))
		d.kill(s, st)
	}
}

// sessionHeader opens the first prompt of every new agent session: where it is
// and who spoke, so it can read more without hunting for its own thread.
type sessionHeader struct {
	room     id.RoomID
	alias    id.RoomAlias // "" when the room has none the daemon knows
	thread   id.EventID
	from     id.UserID // "" when the daemon itself queued the turn
	fromName string
	// catchUp says the thread holds messages from before this session.
	catchUp bool
}

// String renders the header in its one stable shape.
func (h sessionHeader) String() string {
	room := string(h.room)
	if h.alias != "" {
		room = fmt.Sprintf("%s (%s)", h.alias, h.room)
	}
	from := "zooid"
	if h.from != "" {
		from = fmt.Sprintf("%s (%s)", h.fromName, h.from)
	}
	read := fmt.Sprintf("zooid_get_thread_history {\"thread_id\": %q}", h.thread)
	next := "[zooid] Read more of this thread with " + read + "."
	if h.catchUp {
		next = "[zooid] This thread has messages from before this session: catch up with " + read + "."
	}
	return fmt.Sprintf("[zooid] room: %s · thread: %s · from: %s\n%s", room, h.thread, from, next)
}

// headerReadWait bounds the homeserver reads of a new session's header: the
// first prompt waits for them, and a homeserver that stalls on a read must
// not hold it longer than a name is worth.
const headerReadWait = 5 * time.Second

// header gathers a new session's header. Names are best effort: a room
// without a known alias is named by its id, a person without a display name
// by their localpart, also when the reads take longer than headerReadWait.
func (d *Daemon) header(ctx context.Context, rt *agentRuntime, key sessionKey, from id.UserID, catchUp bool) sessionHeader {
	h := sessionHeader{room: key.room, thread: key.thread, from: from, catchUp: catchUp}
	ctx, cancel := context.WithTimeout(ctx, headerReadWait)
	defer cancel()
	defer func() {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			d.log.Warn("reading a new session's header took too long; names left as ids", "agent", rt.cfg.Name, "room", key.room, "thread", key.thread, "waited", headerReadWait)
		}
	}()
	cli := d.transport.Client(rt.userID)
	var refs []config.RoomRef
	if rt.cfg.Matrix != nil {
		refs = rt.cfg.Matrix.Rooms
	}
	for _, ref := range refs {
		if alias, ok := ref.Alias(); ok {
			if rid, ok := d.transport.RoomID(ref); ok && rid == key.room {
				h.alias = alias
				break
			}
		}
	}
	if h.alias == "" {
		var c event.CanonicalAliasEventContent
		if err := cli.StateEvent(ctx, key.room, event.StateCanonicalAlias, "", &c); err == nil {
			h.alias = c.Alias
		}
	}
	switch other, isAgent := d.byUser[from]; {
	case from == "":
	case isAgent:
		h.fromName = other.cfg.Name
	default:
		h.fromName = from.Localpart()
		var m event.MemberEventContent
		if err := cli.StateEvent(ctx, key.room, event.StateMember, string(from), &m); err == nil && m.Displayname != "" {
			h.fromName = m.Displayname
		}
	}
	return h
}

// idleSession lets the agent of a session that waited too long for a turn go.
func (d *Daemon) idleSession(s *session) {
	if st, ok := s.state.(*agentSession); ok {
		d.log.Info("agent idle; process stopped until the thread speaks again", "agent", s.key.agent, "room", s.key.room, "thread", s.key.thread)
		d.retire(s, st)
	}
}

// retire lets a session's agent go: the session stays, and its next turn
// starts a fresh agent. Its process stops with its last session.
func (d *Daemon) retire(s *session, st *agentSession) {
	st.proc.forget(st.acp.ID())
	d.mcp.Unbind(st.binding)
	switch {
	case d.pool.detach(st.proc, st.binding):
		d.stopProc(st.proc)
	case st.proc.conn != nil && st.proc.conn.Capabilities().SessionCapabilities.Close != nil && d.pool.stays(st.proc):
		// The process goes on with other threads: an agent that can close a
		// session frees what this one held now, not when the process stops.
		ctx, cancel := context.WithTimeout(context.Background(), sessionCloseTimeout)
		if err := st.acp.Close(ctx); err != nil {
			d.log.Warn("closing a retired session in its agent", "agent", s.key.agent, "session", st.acp.ID(), "err", err)
		}
		cancel()
	}
	s.state = nil
}

// sessionCloseTimeout bounds session/close of a retired session: an agent
// slow to answer it must not hold the thread's loop.
const sessionCloseTimeout = 5 * time.Second

// kill retires a session whose agent can no longer be trusted (hung, failing)
// and stops its process now, whichever other threads it serves: they find it
// gone at their next turn and start afresh, told to catch up.
func (d *Daemon) kill(s *session, st *agentSession) {
	stop := d.pool.evict(st.proc)
	d.retire(s, st)
	if stop {
		d.stopProc(st.proc)
	}
}

// stopProc stops a process its caller was told to stop and gives back its place.
func (d *Daemon) stopProc(p *proc) {
	d.closeProc(p)
	d.pool.gone(p)
}

// closeProc unbinds every session of p and ends its process.
func (d *Daemon) closeProc(p *proc) {
	for _, b := range d.pool.takeBindings(p) {
		d.mcp.Unbind(b)
	}
	if p.conn != nil {
		if err := p.conn.Close(); err != nil {
			d.log.Debug("closing agent process", "agent", p.agent, "err", err)
		}
	}
	if p.container != nil {
		d.removeContainer(p.container)
	}
}

// queuedNotice is what a thread is told when its turn waits long for an agent
// process: which cap holds it, and that it will be answered in turn.
func queuedNotice(agent string, r waitReason) string {
	if r.agentCap {
		return fmt.Sprintf("%s is busy in other threads (max_processes: %d). This message is queued and will be answered in turn.", agent, r.max)
	}
	return fmt.Sprintf("%s is waiting for an agent process: all %d this daemon runs are busy (max_processes: %d). This message is queued and will be answered in turn.", agent, r.max, r.max)
}

// openAgent gives a session an agent: on a fresh grant it first stops the
// evicted process (if any) and starts a new one; then it opens an ACP
// session with Zooid MCP injected. ctx bounds start-up; live is the session's
// lifetime, for notices. On failure the grant's place is given back.
func (d *Daemon) openAgent(ctx, live context.Context, rt *agentRuntime, s *session, g procGrant) (*agentSession, error) {
	if g.fresh {
		if g.victim != nil {
			d.log.Info("stopping the least recently used idle agent process to make room", "agent", g.victim.agent, "for", rt.cfg.Name)
			d.closeProc(g.victim)
		}
		conn, err := d.startProcess(ctx, rt, g.p)
		if err != nil {
			d.pool.failed(g.p, err)
			return nil, err
		}
		if !d.pool.started(g.p, conn, conn.Capabilities()) {
			// Not while this turn holds it; should it happen, the process
			// is stopped rather than leaked.
			d.stopProc(g.p)
			return nil, fmt.Errorf("%s's process was stopped as it started", rt.cfg.Name)
		}
	}
	p := g.p
	select {
	case <-p.up:
	case <-ctx.Done():
		d.pool.done(p)
		if d.pool.detachWaiting(p) {
			d.stopProc(p)
		}
		return nil, fmt.Errorf("waiting for %s's process to start: %w", rt.cfg.Name, ctx.Err())
	}
	if p.startErr != nil {
		d.pool.done(p)
		d.pool.detach(p, "")
		return nil, p.startErr
	}
	st, err := d.openSession(ctx, rt, s, p)
	if err != nil {
		d.pool.done(p)
		if d.pool.detach(p, "") {
			d.stopProc(p)
		}
		return nil, err
	}
	d.pool.bind(p, st.binding)
	return st, nil
}

// startProcess starts one agent process (in its own container with runtime
// docker) and records on p where its sessions run and whom their bindings
// serve; its permission notices go to the turn running in the session that
// asked.
func (d *Daemon) startProcess(ctx context.Context, rt *agentRuntime, p *proc) (*acpagent.Conn, error) {
	command, args := d.agentCommand(rt.cfg.ACP, false)
	spec := acpagent.Spec{
		Command:    command,
		Args:       args,
		Env:        append(agentEnvFor(d.secrets(), rt.cfg, rt.workDir), piEnv(rt)...),
		Dir:        rt.workDir,
		Credential: credential(rt.cfg),
	}
	opts := acpagent.Options{
		Logger: d.log.With("agent", rt.cfg.Name),
		OnPermission: func(req acp.RequestPermissionRequest, granted bool) {
			st := p.session(req.SessionId)
			if st == nil || granted {
				return
			}
			if post := st.poster(); post != nil {
				post.notice(st.live, fmt.Sprintf("%s asked for permission to run %q; denied by policy.", rt.cfg.Name, toolTitle(req)))
			}
		},
	}
	opts.Permission = permissionPolicy(&rt.cfg)
	p.cwd = rt.workDir
	var err error
	if spec, err = d.sandboxSpec(rt, spec); err != nil {
		return nil, err
	}
	if rt.cfg.Runtime == config.RuntimeDocker {
		if spec, p.container, err = d.containerSpec(rt); err != nil {
			return nil, err
		}
		p.cwd = rt.cfg.Container.Workdir
	}
	conn, err := acpagent.Start(ctx, spec, opts)
	if err != nil {
		if p.container != nil {
			d.removeContainer(p.container)
		}
		return nil, fmt.Errorf("starting %s: %w", command, err)
	}
	// The binding serves only this agent process and its descendants (the
	// bridge it starts), whoever else learns the id. In a container the
	// agent is the container's first process, not the docker CLI the daemon
	// started: the binding is tied to that process.
	p.agentPid = conn.Pid()
	if p.container != nil {
		if p.agentPid, err = d.docker.InitPid(ctx, p.container); err != nil {
			_ = conn.Close()
			d.removeContainer(p.container)
			return nil, fmt.Errorf("finding %s's process in its container: %w", rt.cfg.Name, err)
		}
	}
	return conn, nil
}

// openSession opens the session's ACP session on p's process; a session
// the process opened as a spare (prewarm) is given to it instead.
func (d *Daemon) openSession(ctx context.Context, rt *agentRuntime, s *session, p *proc) (*agentSession, error) {
	caller := d.callerFor(rt, s.key)
	if ss := p.takeSpareSession(); ss != nil {
		// The spare was opened with a conversation's tools. A task thread's
		// session opens its own with its kind's tools from the start rather
		// than count on the agent to refetch its list on list_changed.
		if caller.Kind == tools.Conversation && d.mcp.Assign(ss.binding, caller) {
			return d.sessionOn(rt, s, p, caller.Kind, ss.binding, ss.sess), nil
		}
		d.dropSpareSession(rt, p, ss)
	}
	binding, sess, err := d.newACPSession(ctx, rt, p, p.conn, func(owner mcpserver.Process) string { return d.mcp.Bind(caller, owner) })
	if err != nil {
		return nil, err
	}
	return d.sessionOn(rt, s, p, caller.Kind, binding, sess), nil
}

// newACPSession binds Zooid's tools (bind makes the binding for the agent's
// process) and opens an ACP session with them on conn, p's connection.
func (d *Daemon) newACPSession(ctx context.Context, rt *agentRuntime, p *proc, conn *acpagent.Conn, bind func(mcpserver.Process) string) (string, *acpagent.Session, error) {
	owner, err := mcpserver.ProcessOf(p.agentPid)
	if err != nil {
		return "", nil, fmt.Errorf("binding %s's tools to its process: %w", rt.cfg.Name, err)
	}
	// Exactly the configured user: the peer check then accepts only
	// processes of that uid. (On failure openAgent stops the process.)
	if u := rt.cfg.User; u != nil && owner.UID() != u.UID {
		return "", nil, fmt.Errorf("binding %s's tools: its process runs as uid %d, not as %s", rt.cfg.Name, owner.UID(), u)
	}
	binding := bind(owner)
	entry := d.mcp.StdioEntry(binding)
	if p.container != nil {
		// Paths as the container sees them.
		entry = d.mcp.StdioEntryAt(binding, []string{config.ContainerBridge, "mcp"}, config.ContainerSocketDir+"/"+mcpserver.SocketName)
	}
	sess, err := conn.NewSession(ctx, p.cwd, []acp.McpServer{entry})
	if err != nil {
		d.mcp.Unbind(binding)
		return "", nil, fmt.Errorf("opening ACP session: %w", err)
	}
	return binding, sess, nil
}

// sessionOn makes the daemon's session of an ACP session open on p.
func (d *Daemon) sessionOn(rt *agentRuntime, s *session, p *proc, kind tools.SessionKind, binding string, sess *acpagent.Session) *agentSession {
	// The pi extension names its session by this id (pi-acp's ACP session id
	// is pi's own session id), never by the binding. Other agents get the
	// binding in their bridge's argv, so only pi sessions are mapped.
	if rt.piDir != "" {
		d.mcp.BindACPSession(binding, string(sess.ID()))
	}
	st := &agentSession{proc: p, conn: p.conn, acp: sess, binding: binding, kind: kind, live: s.ctx}
	p.remember(sess.ID(), st)
	return st
}

// endSession runs when a session's loop ends: its agent goes with it.
func (d *Daemon) endSession(s *session) {
	if st, ok := s.state.(*agentSession); ok {
		d.retire(s, st)
	}
}

func toolTitle(req acp.RequestPermissionRequest) string {
	if req.ToolCall.Title != nil && *req.ToolCall.Title != "" {
		return *req.ToolCall.Title
	}
	return string(req.ToolCall.ToolCallId)
}

// poster posts one turn's messages into its thread as the agent. Message n of
// a turn gets a txn id derived from the trigger, so a retried post can't double.
type poster struct {
	d       *Daemon
	as      id.UserID
	agent   string
	room    id.RoomID
	thread  id.EventID
	trigger id.EventID
	turn    string // the turn's id; txn ids derive from it

	mu sync.Mutex // n is shared with permission notices from the ACP goroutine
	n  int

	task *taskTurn      // set in a task thread: prose may hand off
	last string         // the last prose posted this turn
	stop acp.StopReason // how the turn ended
	err  error          // why the turn failed, if it did

	sendErr error // the last post that failed, under mu
}

// failedSend records a post the homeserver did not take.
func (p *poster) failedSend(err error) {
	p.mu.Lock()
	p.sendErr = err
	p.mu.Unlock()
}

// sendFailed says whether any post of this poster failed.
func (p *poster) sendFailed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sendErr != nil
}

// posted is how many messages the poster has sent or tried so far.
func (p *poster) posted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

func (p *poster) txnID(kind string) string {
	p.mu.Lock()
	p.n++
	n := p.n
	p.mu.Unlock()
	h := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%s\x00%s\x00%d", p.agent, p.turn, kind, n)))
	return "zooid." + hex.EncodeToString(h[:12])
}

// relation puts a message in the session's thread, replying to the trigger so
// clients without thread support still show context.
func (p *poster) relation() *event.RelatesTo {
	return zevent.ThreadReply(p.thread, p.trigger)
}

// prose posts the agent's own words as an m.notice in the thread; blank text
// is skipped. In a task thread, prose that mentions another agent hands off to it.
func (p *poster) prose(ctx context.Context, text string) {
	text = strings.TrimSpace(text)
	if text == "" {
		return
	}
	var mentions []id.UserID
	if p.task != nil {
		mentions = p.d.handoffs(ctx, p.task, p, text)
	} else {
		mentions = p.d.mentionHandoffs(p, text)
	}
	p.last = text
	p.send(ctx, text, mentions)
}

// notice posts the daemon's own words about the agent (errors, denials) in the
// thread. It is never the agent's result and never hands off.
func (p *poster) notice(ctx context.Context, text string) {
	p.send(ctx, text, nil)
}

// send posts text as one notice, or, when it is longer than a homeserver takes
// in one event, as consecutive notices cut at paragraph, line or word breaks
// (zevent.SplitBody). Each part is a reply in the thread with its own txn id;
// mentions ride on the first part, so they notify once.
func (p *poster) send(ctx context.Context, text string, mentions []id.UserID) {
	for i, part := range zevent.SplitBody(text, zevent.MaxBodyBytes) {
		content := &event.MessageEventContent{MsgType: event.MsgNotice, Body: part, RelatesTo: p.relation()}
		if i == 0 && len(mentions) > 0 {
			content.Mentions = &event.Mentions{UserIDs: mentions}
		}
		if _, err := p.d.sendMessage(ctx, p.as, p.room, content, p.txnID("notice")); err != nil {
			// A later part alone would read out of context: stop at the first loss.
			p.failedSend(err)
			p.d.log.Error("posting to thread", "agent", p.agent, "room", p.room, "part", i+1, "err", err)
			return
		}
	}
}

// failure posts a machine-readable dev.zooid.error event and a readable notice.
func (p *poster) failure(ctx context.Context, code, text string) {
	content := &zevent.ErrorEventContent{
		Agent: p.agent, Code: code, Error: text, ThreadID: p.thread, RelatesTo: zevent.InThread(p.thread),
	}
	if _, err := p.d.transport.Send(ctx, p.as, p.room, zevent.EventError, content, p.txnID("error")); err != nil {
		p.failedSend(err)
		p.d.log.Error("posting error event", "agent", p.agent, "err", err)
	}
	p.notice(ctx, "⚠ "+text)
}
