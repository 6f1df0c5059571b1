package daemon

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"maunium.net/go/mautrix/appservice"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/e2ee"
	"github.com/zooid-dev/zooid/zooid/history"
	"github.com/zooid-dev/zooid/zooid/matrix"
	"github.com/zooid-dev/zooid/zooid/mcpserver"
	"github.com/zooid-dev/zooid/zooid/router"
	"github.com/zooid-dev/zooid/zooid/tasks"
	"github.com/zooid-dev/zooid/zooid/zevent"
)

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

// Registration is the appservice registration the homeserver needs for cfg,
// pushing to url (the daemon's matrix listen address as the homeserver reaches it).
func Registration(cfg *config.Config, url string) (*appservice.Registration, error) {
	mt := matrixTransportOf(cfg)
	if mt == nil {
		return nil, errors.New("the config has no matrix transport")
	}
	return matrix.Registration(matrix.OptionsFromConfig(cfg, mt), url), nil
}

// openDevices gives each Matrix agent its end-to-end encryption device
// (zooid/e2ee), its keys under <state_dir>/e2ee.
func (d *Daemon) openDevices(ctx context.Context, t *matrix.Transport) (matrix.Crypto, error) {
	var agents []e2ee.Agent
	for _, a := range d.opts.Config.Agents {
		if rt := d.agents[a.Name]; rt != nil && rt.cfg.Matrix != nil {
			agents = append(agents, e2ee.Agent{Name: a.Name, UserID: rt.userID})
		}
	}
	return e2ee.Open(ctx, e2ee.Options{
		Dir:         filepath.Join(d.opts.Config.StateDir, "e2ee"),
		Agents:      agents,
		Client:      t.Client,
		Rooms:       t.RoomState(),
		BoundRooms:  t.BoundRooms,
		Logger:      d.log,
		LateKeyWait: d.opts.Config.RoomKeyWait,
	})
}

// startMatrix brings up the Matrix side: transport, task journal, MCP sockets.
func (d *Daemon) startMatrix(ctx context.Context, mt *config.MatrixTransport) error {
	cfg := d.opts.Config
	mopts := matrix.OptionsFromConfig(cfg, mt)
	mopts.Logger = d.log // the transport names itself (component=matrix)
	mopts.Trace = d.trace
	mopts.Listener = d.opts.PushListener
	if o := d.opts.Observer; o != nil {
		mopts.Received = o.PushReceived
	}
	if cfg.Encryption {
		mopts.OpenCrypto = d.openDevices
	}
	tr, err := matrix.New(mopts)
	if err != nil {
		if mopts.Listener != nil {
			_ = mopts.Listener.Close()
		}
		return fmt.Errorf("creating matrix transport: %w", err)
	}
	d.transport = tr

	key, err := cursorKey(cfg.StateDir)
	if err != nil {
		return err
	}
	rooms := history.New(history.Options{
		// The router is built once the transport is up, before any tool
		// call can come (agents start after intake opens).
		OtherAgent: func(room id.RoomID, u id.UserID) (zevent.AgentContent, bool) {
			return d.routerOnce().OtherAgent(room, u)
		},
		Workstation: cfg.Workstation,

		Client:    tr.Client,
		Decrypt:   tr.Decrypted,
		Agents:    d.agentName,
		CursorKey: key,
		Transport: "matrix",
		Send:      d.sendMessage,
		State:     tr.RoomState(),
	})
	tm, err := tasks.Open(tasks.Options{
		StateDir: filepath.Join(cfg.StateDir, "tasks"),
		Send:     tr.Send,
		Agents:   d.taskAgents,
		Wake:     d.wakeCaller,
		// A handoff's callee runs in its own session of the caller's thread.
		StartCallee: d.startCallee,
		Logger:      d.log, // the manager names itself (component=tasks)
		Trace:       d.trace,
		Timeout:     cfg.TaskTimeout,

		Workstation: cfg.Workstation,
		// Read when an agent calls the tool, after the router is built.
		OtherAgent: func(room id.RoomID, addr string) (id.UserID, string, bool) {
			return d.routerOnce().OtherAgentAt(room, addr)
		},
	})
	if err != nil {
		return fmt.Errorf("opening task journal: %w", err)
	}
	d.tasks = tm
	if d.turns, err = openTurnJournal(filepath.Join(cfg.StateDir, "turns")); err != nil {
		return err
	}
	srv, err := mcpserver.New(mcpserver.Options{
		RunDir:        cfg.RunDir,
		Rooms:         rooms,
		Tasks:         tm,
		Logger:        d.log.With("component", "mcp"),
		BridgeCommand: d.opts.BridgeCommand,
		Trace:         d.trace,
		AgentUsers:    cfg.AgentUsers(),
		CallTimeout:   cfg.ToolTimeout,
		BeforeCall:    d.reads.await,
	})
	if err != nil {
		return fmt.Errorf("starting mcp server: %w", err)
	}
	d.mcp = srv
	for _, rt := range d.agents {
		if rt.cfg.Matrix == nil {
			continue
		}
		var owner *mcpserver.Owner
		if u := rt.cfg.User; u != nil {
			owner = &mcpserver.Owner{UID: int(u.UID), GID: int(u.GID)}
		}
		if rt.socket, err = srv.ListenAgentAs(rt.cfg.Name, owner); err != nil {
			return fmt.Errorf("listening for agent %s: %w", rt.cfg.Name, err)
		}
		if rt.workDir, err = d.workDir(rt.cfg); err != nil {
			return err
		}
		if usesPi(rt.cfg) {
			if rt.piDir, err = d.installPi(rt.cfg); err != nil {
				return err
			}
		}
		if sandboxed(rt.cfg) {
			if rt.tmpDir, err = d.tmpDir(rt.cfg); err != nil {
				return err
			}
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
		d.adoptTaskRoots(ctx)
		d.traceStarts()
		d.learnOtherAgents(ctx)
		// Before intake: a redelivered trigger of an unfinished turn must find
		// its record already answered.
		d.recoverTurns(ctx)
		// Returns of handoffs a previous run owes are queued before intake,
		// so none lands behind a message that arrives after the restart.
		if err := d.tasks.RecoverHandoffs(ctx); err != nil {
			d.log.Error("recovering handoffs", "err", err)
		}
		// Tasks a previous run left open are closed in the journal before
		// intake, so a root redelivered from the inbox finds its task closed
		// and wakes nobody; they are reported by Recover below.
		if err := d.tasks.CloseStale(); err != nil {
			d.log.Error("closing tasks interrupted by restart", "err", err)
		}
		d.openIntake()
		// Tasks a previous run left open are closed and reported now that the
		// daemon can post and wake.
		if err := d.tasks.Recover(ctx); err != nil {
			d.log.Error("recovering tasks", "err", err)
		}
		// From now on open tasks close at task_timeout; the watch ends with
		// the intake (Close cancels runCtx) and Close waits for it.
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.tasks.Watch(runCtx)
		}()
		// Beside the intake, not before it: one read per bound room, which
		// a slow homeserver must not add to the start.
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.warnEncryptedRooms(runCtx)
		}()
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
	return router.New(d.routerAgents(d.transport.AgentRoomID))
}

// routerAgents is the routing view of the Matrix agents, in zooid.yaml order
// (the order of wakes), with each agent's rooms resolved by resolve.
func (d *Daemon) routerAgents(resolve func(agent id.UserID, room config.RoomRef) (id.RoomID, bool)) []router.Agent {
	var ras []router.Agent
	for _, a := range d.opts.Config.Agents {
		rt := d.agents[a.Name]
		if rt.cfg.Matrix == nil {
			continue
		}
		rt.rooms = rt.rooms[:0]
		for _, r := range rt.cfg.Matrix.Rooms {
			rid, ok := resolve(rt.userID, r)
			if !ok {
				d.log.Warn("room not served for this agent (see the start-up error above); agent not bound there", "agent", rt.cfg.Name, "room", r)
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
			Workstation: d.opts.Config.Workstation,
		})
	}
	return ras
}
