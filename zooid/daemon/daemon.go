// Package daemon wires Zooid together: the Matrix transport feeds the router,
// the router wakes agents, each (agent, thread) gets an ACP session with the
// Zooid MCP server injected, and the agent's prose is posted back as notices.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/internal/faultpoint"
	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/container"
	"github.com/zooid-dev/zooid/zooid/httpapi"
	"github.com/zooid-dev/zooid/zooid/matrix"
	"github.com/zooid-dev/zooid/zooid/mcpserver"
	"github.com/zooid-dev/zooid/zooid/router"
	"github.com/zooid-dev/zooid/zooid/tasks"
	"github.com/zooid-dev/zooid/zooid/tools"
	"github.com/zooid-dev/zooid/zooid/trace"
)

// DefaultTurnTimeout bounds one agent turn; a turn that runs longer is treated
// as a hung agent: cancelled, its process ended, and an error notice posted.
const DefaultTurnTimeout = 30 * time.Minute

// DefaultIdleTimeout is how long a thread's agent process may wait for the
// next turn before it is stopped: a busy room must not keep one process per
// thread it ever spoke in.
const DefaultIdleTimeout = 30 * time.Minute

// Options configures a Daemon.
type Options struct {
	// Config is the validated zooid.yaml.
	Config *config.Config
	// Logger receives the daemon's logs; nil discards them.
	Logger *slog.Logger
	// BridgeCommand is the argv prefix agents run to reach Zooid MCP; default
	// is this executable with the "mcp" subcommand. Its program also serves
	// `sandbox`, which starts a sandboxed agent (zooid/sandbox).
	BridgeCommand []string
	// TurnTimeout bounds one agent turn; zero means the config's turn_timeout,
	// else DefaultTurnTimeout.
	TurnTimeout time.Duration
	// StartTimeout bounds an agent's start-up (process, ACP initialize,
	// session/new) before a turn; zero means TurnTimeout. A test harness
	// that times turns short keeps start-up apart, so a slow machine is not
	// taken for a hung agent.
	StartTimeout time.Duration
	// IdleTimeout stops a session's agent process after that long without a
	// turn; the thread's next message starts a fresh one. Zero means the
	// config's idle_timeout, else DefaultIdleTimeout.
	IdleTimeout time.Duration
	// QueueNoticeAfter is how long a turn waits for an agent process before
	// its thread is told it is queued; zero means the config's
	// queue_notice_after, else config.DefaultQueueNoticeAfter.
	QueueNoticeAfter time.Duration
	// PushListener, when set, is the Matrix transport's appservice push
	// listener, already bound at the config's listen address (a socket handed
	// down by a supervisor or a test harness); the daemon serves on it and
	// closes it instead of binding the address itself.
	PushListener net.Listener
	// TraceTap, when set and tracing is on, is handed every trace record
	// after the writer took it, so a harness (zooid replay) can wait on what
	// the daemon did instead of polling the trace files.
	TraceTap func(trace.Record)
	// Observer, when set, hears where the daemon's own part of an event's
	// way begins and ends, so a benchmark (zooid bench, item 6) or a metrics
	// exporter can time it without the trace.
	Observer Observer
}

// Observer hears the daemon's timings. Calls come on the daemon's own
// goroutines, so they must be quick.
type Observer interface {
	// PushReceived: a pushed transaction holding events arrived at at (it
	// is reported once recorded in the inbox).
	PushReceived(events []id.EventID, at time.Time)
	// PromptWritten: the session/prompt of a turn triggered by trigger is
	// being written to its agent, at at.
	PromptWritten(trigger id.EventID, at time.Time)
}

// Daemon is a running Zooid. Create it with New, then Start; Close stops it.
type Daemon struct {
	opts   Options
	log    *slog.Logger
	agents map[string]*agentRuntime
	byUser map[id.UserID]*agentRuntime

	transport  *matrix.Transport
	router     *router.Router
	routerInit sync.Once
	mcp        *mcpserver.Server
	// reads holds a session's tool calls until its turn's trigger is
	// readable (visible.go).
	reads    readGate
	sessions *sessions
	// docker starts and removes agent containers; nil when no agent has
	// runtime docker.
	docker *container.Docker
	// pool bounds live agent processes (max_processes per agent and in all).
	pool *procPool

	tasks *tasks.Manager
	// turns journals event-woken turns until they end (nil without Matrix).
	turns *turnJournal
	http  []*httpapi.Server
	// trace is the flight recorder (trace.Off unless the config turns it
	// on); traceW is the writer the daemon owns when it is on.
	trace      trace.Recorder
	traceW     *trace.Writer
	stopIntake context.CancelFunc

	// intakeOpen is closed once start-up has adopted the task roots a crash
	// left unjournaled and answered unfinished turns; events wait for it so a
	// redelivered trigger finds its turn's record, and a root its task.
	intakeOpen chan struct{}
	intakeOnce sync.Once

	// spareCtx ends at Close: the keepers of spare processes (prewarm.go)
	// stop theirs and spareWG waits for them; spareMu orders a new keeper
	// before Close's wait.
	spareCtx  context.Context
	spareStop context.CancelFunc
	spareMu   sync.Mutex
	spareWG   sync.WaitGroup

	// encMu guards what the daemon knows of encrypted rooms this run
	// (encrypted.go): the rooms it has logged, the notices it knows posted,
	// those whose post failed (logged as an error once).
	encMu      sync.Mutex
	encLogged  map[id.RoomID]bool
	encNoticed map[string]bool
	encFailed  map[string]bool
	// undecNoticed are the (room, megolm session) pairs whose first
	// undecryptable message got its notice this run (encrypted.go).
	undecNoticed map[string]bool

	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// agentRuntime is what the daemon knows of one configured agent.
type agentRuntime struct {
	cfg     config.Agent
	userID  id.UserID
	rooms   []id.RoomID
	socket  string
	workDir string
	// piDir is the pi agent directory of an agent on the pi preset.
	piDir string
	// tmpDir is a sandboxed agent's own temp dir (its TMPDIR).
	tmpDir string
	// noteOnce logs what its sandbox had to carve, once per daemon.
	noteOnce sync.Once
}

// New prepares a daemon for cfg, which config.Load has validated (the daemon
// judges no config itself, so check and run refuse the same ones); nothing is
// started until Start.
func New(opts Options) (*Daemon, error) {
	if opts.Config == nil {
		return nil, errors.New("daemon: no config")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.TurnTimeout <= 0 {
		opts.TurnTimeout = opts.Config.TurnTimeout
	}
	if opts.TurnTimeout <= 0 {
		opts.TurnTimeout = DefaultTurnTimeout
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = opts.TurnTimeout
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = opts.Config.IdleTimeout
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.QueueNoticeAfter <= 0 {
		opts.QueueNoticeAfter = opts.Config.QueueNoticeAfter
	}
	if opts.QueueNoticeAfter <= 0 {
		opts.QueueNoticeAfter = config.DefaultQueueNoticeAfter
	}
	d := &Daemon{
		opts:   opts,
		log:    opts.Logger,
		agents: make(map[string]*agentRuntime),
		byUser: make(map[id.UserID]*agentRuntime),

		intakeOpen:   make(chan struct{}),
		trace:        trace.Off,
		encLogged:    map[id.RoomID]bool{},
		encNoticed:   map[string]bool{},
		encFailed:    map[string]bool{},
		undecNoticed: map[string]bool{},
	}
	d.spareCtx, d.spareStop = context.WithCancel(context.Background())
	d.pool = newProcPool(orDefault(opts.Config.MaxProcesses, config.DefaultMaxProcesses))
	for _, a := range opts.Config.Agents {
		perProc, prewarm := a.SessionsPerProcess, a.Prewarm
		if a.HTTP != nil {
			// An HTTP session owns its process and ends it; it starts its
			// own, so no spare waits for it.
			perProc, prewarm = 1, false
		}
		d.pool.addAgent(a.Name, orDefault(a.MaxProcesses, config.DefaultAgentMaxProcesses), perProc, prewarm)
		rt := &agentRuntime{cfg: a}
		if a.Matrix != nil {
			rt.userID = a.Matrix.UserID
			d.byUser[rt.userID] = rt
		}
		d.agents[a.Name] = rt
	}
	return d, nil
}

// Start brings the daemon up: agent users registered, rooms joined, the MCP
// sockets listening and the event intake running. It returns once all of that
// is ready, or with the first error (after undoing what it started).
func (d *Daemon) Start(ctx context.Context) error {
	if err := os.MkdirAll(d.opts.Config.StateDir, 0o700); err != nil {
		return fmt.Errorf("creating state dir: %w", err)
	}
	if d.opts.Config.AgentUsers() {
		if err := d.openStateDirToAgentUsers(); err != nil {
			return err
		}
	}
	if err := d.openTrace(); err != nil {
		return err
	}
	d.logSandboxes()
	if faultpoint.Armable() {
		d.log.Warn("test fault points are armed: this daemon kills itself where the file names", "env", faultpoint.Env, "file", os.Getenv(faultpoint.Env))
	}
	if err := d.startDocker(ctx); err != nil {
		return err
	}
	d.sessions = newSessions(d.runTurn, d.endSession).withIdle(d.opts.IdleTimeout, d.idleSession).withDone(d.turnDone)
	if err := d.startHTTP(); err != nil {
		d.Close()
		return err
	}
	if mt := d.matrixTransport(); mt != nil {
		if err := d.startMatrix(ctx, mt); err != nil {
			d.Close()
			return err
		}
	}
	// Agents with prewarm get their first spare once they can be started:
	// the first mention does not wait for a process to start.
	for _, rt := range d.agents {
		d.prewarm(rt)
	}
	return nil
}

// Run starts the daemon and serves until ctx ends, then closes it.
func (d *Daemon) Run(ctx context.Context) error {
	if err := d.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	return d.Close()
}

// CloseIdleConnections closes the connections to the homeserver that the
// daemon keeps open for reuse and no request is using; the next request opens
// one again. For a caller that counts the process's descriptors: after a busy
// spell up to 64 stay open for 90 s (zooid/matrix, maxIdleConnsPerHost).
func (d *Daemon) CloseIdleConnections() {
	if d.transport != nil {
		d.transport.CloseIdleConnections()
	}
}

// Close stops intake, ends every session (and so every agent process), closes
// the MCP sockets and waits for all of it. It is safe to call more than once.
func (d *Daemon) Close() error {
	d.closeOnce.Do(func() {
		var errs []error
		d.openIntake() // unblock intake waiting on a start-up that will not finish
		if d.stopIntake != nil {
			d.stopIntake()
		}
		if d.transport != nil {
			errs = append(errs, d.transport.Close())
		}
		d.wg.Wait()
		if d.sessions != nil {
			d.sessions.close()
		}
		d.stopSpares()
		for _, h := range d.http {
			errs = append(errs, h.Close())
		}
		if d.mcp != nil {
			errs = append(errs, d.mcp.Close())
		}
		if d.tasks != nil {
			errs = append(errs, d.tasks.Close())
		}
		if d.turns != nil {
			errs = append(errs, d.turns.close())
		}
		if d.traceW != nil {
			errs = append(errs, d.traceW.Close())
		}
		d.closeErr = errors.Join(errs...)
	})
	return d.closeErr
}

// agentName says whether user is one of the configured agents, and its name.
func (d *Daemon) agentName(user id.UserID) (string, bool) {
	rt, ok := d.byUser[user]
	if !ok {
		return "", false
	}
	return rt.cfg.Name, true
}

// workDir is where the agent's process runs: its configured dir, else its
// own directory under the state dir (0700), so agents never share a cwd by
// accident and never start in the directory holding zooid.yaml.
func (d *Daemon) workDir(a config.Agent) (string, error) {
	dir := d.opts.Config.WorkDir(&a)
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("agent %s: working dir %q: %w", a.Name, dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return "", fmt.Errorf("agent %s: creating working dir: %w", a.Name, err)
	}
	if a.User != nil && a.Dir == "" {
		// The default directory is the daemon's to make and the agent's to
		// use: its user owns it, nobody else can enter it. A configured dir
		// is the operator's and is used as it is.
		if err := os.Lchown(abs, int(a.User.UID), int(a.User.GID)); err != nil {
			return "", fmt.Errorf("agent %s: handing its working dir %s to %s: %w", a.Name, abs, a.User, err)
		}
		if err := os.Chmod(abs, 0o700); err != nil {
			return "", fmt.Errorf("agent %s: working dir %s: %w", a.Name, abs, err)
		}
	}
	return abs, nil
}

// openStateDirToAgentUsers makes the state dir and its agents/ directory
// 0711 when agents run as users of their own: each can then reach its own
// working directory, agents/<name> (its own, 0700), by name, but list neither
// and open nothing else in them (everything else the daemon keeps there is
// 0700 or 0600; config.Load refuses a state dir where that does not hold).
func (d *Daemon) openStateDirToAgentUsers() error {
	dir := d.opts.Config.StateDir
	agents := filepath.Join(dir, "agents")
	if err := os.MkdirAll(agents, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", agents, err)
	}
	for _, p := range []string{dir, agents} {
		if err := os.Chmod(p, 0o711); err != nil {
			return fmt.Errorf("state dir: %w", err)
		}
	}
	return nil
}

// sendMessage posts content as user; it is the one sender everything shares so
// retries and txn ids behave the same everywhere.
func (d *Daemon) sendMessage(ctx context.Context, as id.UserID, room id.RoomID, content *event.MessageEventContent, txnID string) (id.EventID, error) {
	return d.transport.Send(ctx, as, room, event.EventMessage, content, txnID)
}

// callerFor is the tool caller of a session.
func (d *Daemon) callerFor(rt *agentRuntime, key sessionKey) tools.Caller {
	return tools.Caller{
		Agent:      rt.cfg.Name,
		UserID:     rt.userID,
		Transport:  "matrix",
		Room:       key.room,
		Rooms:      slices.Clone(rt.rooms),
		Thread:     key.thread,
		Kind:       d.kindFor(key),
		SessionKey: key.String(),
	}
}

// orDefault is n, or def when n is unset (a Config built without Load).
func orDefault(n, def int) int {
	if n > 0 {
		return n
	}
	return def
}

func (d *Daemon) openIntake() { d.intakeOnce.Do(func() { close(d.intakeOpen) }) }
