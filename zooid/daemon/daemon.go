// Package daemon wires Zooid together: the Matrix transport feeds the router,
// the router wakes agents, each (agent, thread) gets an ACP session with the
// Zooid MCP server injected, and the agent's prose is posted back as notices.
package daemon

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"maunium.net/go/mautrix/appservice"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/acpagent"
	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/history"
	"github.com/zooid-dev/zooid/zooid/httpapi"
	"github.com/zooid-dev/zooid/zooid/matrix"
	"github.com/zooid-dev/zooid/zooid/mcpserver"
	"github.com/zooid-dev/zooid/zooid/router"
	"github.com/zooid-dev/zooid/zooid/tasks"
	"github.com/zooid-dev/zooid/zooid/tools"
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
	// is this executable with the "mcp" subcommand.
	BridgeCommand []string
	// TurnTimeout bounds one agent turn; zero means the config's turn_timeout,
	// else DefaultTurnTimeout.
	TurnTimeout time.Duration
	// IdleTimeout stops a session's agent process after that long without a
	// turn; the thread's next message starts a fresh one. Zero means the
	// config's idle_timeout, else DefaultIdleTimeout.
	IdleTimeout time.Duration
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
	sessions   *sessions

	tasks      *tasks.Manager
	http       []*httpapi.Server
	stopIntake context.CancelFunc

	// replayed is closed once thread memory is rebuilt from history; events
	// wait for it so replayed history never overwrites newer routing state.
	replayed   chan struct{}
	replayOnce sync.Once

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
}

// New validates the wiring of cfg; nothing is started until Start.
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
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = opts.Config.IdleTimeout
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	var matrixNames []string
	for _, t := range opts.Config.Transports {
		if t.Type == "matrix" {
			matrixNames = append(matrixNames, t.Name)
		}
	}
	if len(matrixNames) > 1 {
		// Silently serving only one would leave the other's agents deaf.
		return nil, fmt.Errorf("daemon: one matrix transport per daemon is supported, the config has %d (%s): run one daemon per homeserver", len(matrixNames), strings.Join(matrixNames, ", "))
	}
	d := &Daemon{
		opts:   opts,
		log:    opts.Logger,
		agents: make(map[string]*agentRuntime),
		byUser: make(map[id.UserID]*agentRuntime),

		replayed: make(chan struct{}),
	}
	if err := refuseSecretsInArgv(opts.Config); err != nil {
		return nil, err
	}
	for _, a := range opts.Config.Agents {
		rt := &agentRuntime{cfg: a}
		if a.Matrix != nil {
			rt.userID = a.Matrix.UserID
			d.byUser[rt.userID] = rt
		}
		d.agents[a.Name] = rt
	}
	return d, nil
}

// matrixTransport returns the Matrix transport of the config, if any.
func (d *Daemon) matrixTransport() *config.MatrixTransport {
	return matrixTransportOf(d.opts.Config)
}

func matrixTransportOf(cfg *config.Config) *config.MatrixTransport {
	for _, t := range cfg.Transports {
		if t.Type == "matrix" && t.Matrix != nil {
			return t.Matrix
		}
	}
	return nil
}

// matrixOptions maps zooid.yaml onto the Matrix transport's options.
func matrixOptions(cfg *config.Config, mt *config.MatrixTransport) matrix.Options {
	opts := matrix.Options{
		Homeserver: mt.Homeserver,
		ServerName: mt.ServerName,
		ASToken:    mt.ASToken,
		HSToken:    mt.HSToken,
		Listen:     mt.Listen,
		StateDir:   filepath.Join(cfg.StateDir, "matrix"),
	}
	for _, a := range cfg.Agents {
		if a.Matrix == nil {
			continue
		}
		opts.Agents = append(opts.Agents, matrix.Agent{
			Name:        a.Name,
			UserID:      a.Matrix.UserID,
			DisplayName: a.Matrix.DisplayName,
			Rooms:       a.Matrix.Rooms,
		})
	}
	return opts
}

// Registration is the appservice registration the homeserver needs for cfg,
// pushing to url (the daemon's matrix listen address as the homeserver reaches it).
func Registration(cfg *config.Config, url string) (*appservice.Registration, error) {
	mt := matrixTransportOf(cfg)
	if mt == nil {
		return nil, errors.New("the config has no matrix transport")
	}
	reg := matrix.Registration(matrixOptions(cfg, mt), url)
	if mt.ID != "" {
		reg.ID = mt.ID
	}
	if mt.SenderLocalpart != "" {
		reg.SenderLocalpart = mt.SenderLocalpart
	}
	return reg, nil
}

// Start brings the daemon up: agent users registered, rooms joined, the MCP
// sockets listening and the event intake running. It returns once all of that
// is ready, or with the first error (after undoing what it started).
func (d *Daemon) Start(ctx context.Context) error {
	if err := os.MkdirAll(d.opts.Config.StateDir, 0o700); err != nil {
		return fmt.Errorf("creating state dir: %w", err)
	}
	d.sessions = newSessions(d.runTurn, d.endSession).withIdle(d.opts.IdleTimeout, d.idleSession)
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
	return nil
}

// startMatrix brings up the Matrix side: transport, task journal, MCP sockets.
func (d *Daemon) startMatrix(ctx context.Context, mt *config.MatrixTransport) error {
	cfg := d.opts.Config
	mopts := matrixOptions(cfg, mt)
	mopts.Logger = d.log.With("component", "matrix")
	tr, err := matrix.New(mopts)
	if err != nil {
		return fmt.Errorf("creating matrix transport: %w", err)
	}
	d.transport = tr

	key, err := cursorKey(cfg.StateDir)
	if err != nil {
		return err
	}
	rooms := history.New(history.Options{
		Client:    tr.Client,
		Agents:    d.agentName,
		CursorKey: key,
		Transport: "matrix",
		Send:      d.sendMessage,
	})
	tm, err := tasks.Open(tasks.Options{
		StateDir: filepath.Join(cfg.StateDir, "tasks"),
		Send:     tr.Send,
		Agents:   d.taskAgents,
		Wake:     d.wakeCaller,
		Logger:   d.log.With("component", "tasks"),
	})
	if err != nil {
		return fmt.Errorf("opening task journal: %w", err)
	}
	d.tasks = tm
	srv, err := mcpserver.New(mcpserver.Options{
		RunDir:        cfg.RunDir,
		Rooms:         rooms,
		Tasks:         tm,
		Logger:        d.log.With("component", "mcp"),
		BridgeCommand: d.opts.BridgeCommand,
	})
	if err != nil {
		return fmt.Errorf("starting mcp server: %w", err)
	}
	d.mcp = srv
	for _, rt := range d.agents {
		if rt.cfg.Matrix == nil {
			continue
		}
		if rt.socket, err = srv.ListenAgent(rt.cfg.Name); err != nil {
			return fmt.Errorf("listening for agent %s: %w", rt.cfg.Name, err)
		}
		if rt.workDir, err = d.workDir(rt.cfg); err != nil {
			return err
		}
	}

	// The transport serves until the daemon closes, not until the caller's
	// start-up context ends; Start waits only for it to be ready.
	runCtx, cancel := context.WithCancel(context.Background())
	d.stopIntake = cancel
	errc := make(chan error, 1)
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		errc <- tr.Start(runCtx, d.handleEvent)
	}()
	select {
	case <-tr.Ready():
		d.replayThreadMemory(ctx)
		d.replayDone()
		// Tasks a previous run left open are closed and reported now that the
		// daemon can post and wake.
		if err := d.tasks.Recover(ctx); err != nil {
			d.log.Error("recovering tasks", "err", err)
		}
		return nil
	case err := <-errc:
		if err == nil {
			err = errors.New("transport stopped during start-up")
		}
		return fmt.Errorf("starting matrix transport: %w", err)
	case <-ctx.Done():
		return fmt.Errorf("starting matrix transport: %w", ctx.Err())
	}
}

// buildRouter builds the router from the resolved room ids. It runs once the
// transport is up; rooms that failed to resolve are logged and skipped.
func (d *Daemon) buildRouter() *router.Router {
	var ras []router.Agent
	for _, rt := range d.agents {
		if rt.cfg.Matrix == nil {
			continue
		}
		rt.rooms = rt.rooms[:0]
		for _, r := range rt.cfg.Matrix.Rooms {
			rid, ok := d.transport.RoomID(r)
			if !ok {
				d.log.Warn("room not resolved; agent not bound there", "agent", rt.cfg.Name, "room", r)
				continue
			}
			rt.rooms = append(rt.rooms, rid)
		}
		trigger := router.Mention
		if rt.cfg.Matrix.Trigger == "any" {
			trigger = router.Any
		}
		ras = append(ras, router.Agent{
			Name:        rt.cfg.Name,
			UserID:      rt.userID,
			DisplayName: rt.cfg.Matrix.DisplayName,
			Rooms:       rt.rooms,
			Trigger:     trigger,
		})
	}
	return router.New(ras)
}

// Run starts the daemon and serves until ctx ends, then closes it.
func (d *Daemon) Run(ctx context.Context) error {
	if err := d.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	return d.Close()
}

// Close stops intake, ends every session (and so every agent process), closes
// the MCP sockets and waits for all of it. It is safe to call more than once.
func (d *Daemon) Close() error {
	d.closeOnce.Do(func() {
		var errs []error
		d.replayDone() // unblock intake waiting on a replay that will not come
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
		for _, h := range d.http {
			errs = append(errs, h.Close())
		}
		if d.mcp != nil {
			errs = append(errs, d.mcp.Close())
		}
		if d.tasks != nil {
			errs = append(errs, d.tasks.Close())
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

// workDir is where the agent's process runs: its configured dir, else a
// private directory under the state dir so agents never share a cwd by accident.
func (d *Daemon) workDir(a config.Agent) (string, error) {
	dir := a.Dir
	if dir == "" {
		dir = filepath.Join(d.opts.Config.StateDir, "agents", a.Name)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("agent %s: working dir %q: %w", a.Name, dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return "", fmt.Errorf("agent %s: creating working dir: %w", a.Name, err)
	}
	return abs, nil
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
		Thread:     key.thread,
		Kind:       d.kindFor(key),
		SessionKey: key.String(),
	}
}

// startHTTP serves every HTTP transport that has agents. HTTP sessions own no
// durable conversation, so their agents get no Zooid MCP server.
func (d *Daemon) startHTTP() error {
	for _, t := range d.opts.Config.Transports {
		if t.Type != "http" || t.HTTP == nil {
			continue
		}
		agents := map[string]httpapi.Agent{}
		for _, rt := range d.agents {
			a := rt.cfg
			if a.HTTP == nil || (a.HTTP.Transport != "" && a.HTTP.Transport != t.Name) {
				continue
			}
			dir, err := d.workDir(a)
			if err != nil {
				return err
			}
			command, args := a.ACP.Resolve()
			agents[a.Name] = httpapi.Agent{
				Name: a.Name,
				Spec: acpagent.Spec{Command: command, Args: args, Env: agentEnv(d.secrets(), a.ACP.Env), Dir: dir},
			}
		}
		if len(agents) == 0 {
			continue
		}
		srv, err := httpapi.Start(httpapi.Options{
			Listen:      t.HTTP.Listen,
			Token:       t.HTTP.Token,
			Agents:      agents,
			TurnTimeout: d.opts.TurnTimeout,
			Logger:      d.log.With("component", "http", "transport", t.Name),
		})
		if err != nil {
			return fmt.Errorf("starting http transport %s: %w", t.Name, err)
		}
		d.http = append(d.http, srv)
	}
	return nil
}

// HTTPURLs lists the base URLs of the HTTP transports the daemon serves.
func (d *Daemon) HTTPURLs() []string {
	var out []string
	for _, h := range d.http {
		out = append(out, h.URL())
	}
	return out
}

func (d *Daemon) replayDone() { d.replayOnce.Do(func() { close(d.replayed) }) }

// cursorKey is the key that signs history cursors, kept in the state dir so a
// cursor an agent holds stays good across a daemon restart.
func cursorKey(stateDir string) ([]byte, error) {
	path := filepath.Join(stateDir, "cursor.key")
	key, err := os.ReadFile(path)
	if err == nil && len(key) == 32 {
		return key, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading cursor key: %w", err)
	}
	key = make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("making cursor key: %w", err)
	}
	if err := os.WriteFile(path, key, 0o600); err != nil {
		return nil, fmt.Errorf("saving cursor key: %w", err)
	}
	return key, nil
}

// refuseSecretsInArgv refuses a config that would put a token on an agent's
// command line or in its working directory path, where the agent can read it.
func refuseSecretsInArgv(cfg *config.Config) error {
	secrets := configSecrets(cfg)
	for _, a := range cfg.Agents {
		command, args := a.ACP.Resolve()
		for _, part := range append([]string{command, a.Dir}, args...) {
			if carriesSecret("="+part, secrets) {
				return fmt.Errorf("daemon: agent %s: a transport token appears in its command, args or dir; agents must never see tokens", a.Name)
			}
		}
	}
	return nil
}
