package steps

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/zooid-dev/zooid/fakeagent"
	"github.com/zooid-dev/zooid/sim/dut"
	"github.com/zooid-dev/zooid/sim/standin"
	"github.com/zooid-dev/zooid/zooid/config"
)

// config builds the zooid.yaml equivalent of the scenario: one Matrix
// transport holding the lease's appservice tokens, and each agent a fake
// agent process (this executable) scripted by the controller.
func (w *world) config(exe string) *config.Config {
	n := w.names()
	reg := w.lease.reg
	cfg := &config.Config{
		Transports: []config.Transport{{
			Name: "matrix", Type: "matrix",
			Matrix: &config.MatrixTransport{
				Homeserver: w.lease.hs.baseURL(), ServerName: n.serverName,
				ASToken: reg.AppToken, HSToken: reg.ServerToken,
				Listen: w.lease.listen, ID: reg.ID, SenderLocalpart: reg.SenderLocalpart,
			},
		}},
		StateDir:         w.stateDir(),
		RunDir:           filepath.Join(w.dir, "run"),
		IdleTimeout:      w.idleTimeout,
		MaxProcesses:     w.maxProcs,
		QueueNoticeAfter: w.queueNotice,
		ToolTimeout:      w.toolTimeout,
		PostTimeout:      w.postTimeout,
		TaskTimeout:      w.taskTimeout,
		Encryption:       w.encryption,
	}
	if w.encryption {
		cfg.RoomKeyWait = w.lateKeyWait()
	}
	if w.traceDir != "" {
		cfg.Trace = &config.Trace{Dir: w.traceDir}
	}
	cfg.Workstation = w.workstation
	for _, an := range w.agentSeq {
		a := w.agents[an]
		if a.peer {
			continue // the second daemon's (several.go)
		}
		if a.http {
			cfg.Agents = append(cfg.Agents, w.httpAgentConfig(cfg, exe, a))
			continue
		}
		rooms := make([]config.RoomRef, 0, len(a.rooms))
		for _, r := range a.rooms {
			rooms = append(rooms, config.RoomRef(n.alias(r)))
		}
		args := w.ctl.Args(a.name)
		if a.closeSessions {
			args = append(args, "--close-sessions")
		}
		acpCfg := config.ACP{Command: exe, Args: args,
			// A test binary runs the agent only when asked to (see fakeagent.ExecIfRequested).
			Env: map[string]string{fakeagent.ExecEnv: "fake-agent"}}
		if a.real != nil {
			acpCfg = a.real.acp()
		}
		cfg.Agents = append(cfg.Agents, config.Agent{
			Name:               a.configName(),
			ACP:                acpCfg,
			Dir:                filepath.Join(w.dir, "agents", a.name),
			MaxProcesses:       a.maxProcs,
			SessionsPerProcess: a.perProc,
			Prewarm:            a.prewarm,
			Matrix: &config.AgentMatrix{
				Transport: "matrix", UserID: w.agentUser(a.name), DisplayName: a.name,
				Rooms: rooms, Trigger: a.trigger,
			},
			Sandbox: w.sandboxOf(a),
		})
	}
	return cfg
}

// httpAgentConfig configures an HTTP-bound agent, adding the HTTP transport
// (on a free loopback port) the first time.
func (w *world) httpAgentConfig(cfg *config.Config, exe string, a *agentDecl) config.Agent {
	if _, ok := cfg.Transport("hooks"); !ok {
		cfg.Transports = append(cfg.Transports, config.Transport{
			Name: "hooks", Type: "http",
			HTTP: &config.HTTPTransport{Listen: "127.0.0.1:0", Token: httpToken},
		})
	}
	return config.Agent{
		Name: a.name,
		ACP: config.ACP{Command: exe, Args: w.ctl.Args(a.name),
			Env: map[string]string{fakeagent.ExecEnv: "fake-agent"}},
		Dir:          filepath.Join(w.dir, "agents", a.name),
		MaxProcesses: a.maxProcs,
		HTTP:         &config.AgentHTTP{Transport: "hooks"},
		Sandbox:      w.sandboxOf(a),
	}
}

// prepareAgents starts the fake-agent controller and the agents' working
// directories, and returns the executable that runs both agents and bridge.
func (w *world) prepareAgents() (string, error) {
	ctl, err := fakeagent.StartController("")
	if err != nil {
		return "", fmt.Errorf("starting the fake-agent controller: %w", err)
	}
	ctl.Unscripted(barrierMarker)
	var scripts []*recordedScript
	for _, rn := range w.roomSeq {
		if r := w.rooms[rn]; r.replay != nil && r.replay.script != nil {
			scripts = append(scripts, r.replay.script)
		}
	}
	if len(scripts) > 0 {
		ctl.Respond(w.respondRecorded(scripts))
	}
	w.ctl = ctl
	w.closers = append(w.closers, ctl.Close)
	exe, err := standin.Path()
	if err != nil {
		return "", fmt.Errorf("the program agents run as: %w", err)
	}
	for _, an := range w.agentSeq {
		if err := os.MkdirAll(filepath.Join(w.dir, "agents", an), 0o700); err != nil {
			return "", fmt.Errorf("agent dir: %w", err)
		}
	}
	return exe, nil
}

// startDaemon starts the agent controller and the daemon in-process.
func (w *world) startDaemon(ctx context.Context) error {
	exe, err := w.prepareAgents()
	if err != nil {
		return err
	}
	// The config is a zooid.yaml whose tokens are ${VAR}s set in this
	// process's environment, the daemon's own: so an agent that inherited the
	// daemon's environment unscrubbed would carry them.
	path, env, err := w.writeConfig(exe)
	if err != nil {
		return err
	}
	for k, v := range env {
		if err := os.Setenv(k, v); err != nil {
			return fmt.Errorf("setting %s: %w", k, err)
		}
	}
	w.closers = append(w.closers, func() error {
		for k := range env {
			_ = os.Unsetenv(k)
		}
		return nil
	})
	cfg, err := config.Load(path)
	if err != nil {
		return fmt.Errorf("loading the scenario's zooid.yaml: %w", err)
	}
	// Runs after the daemon has closed (closers run in reverse).
	w.closers = append(w.closers, func() error { return checkStateDir(cfg.StateDir) })
	// The daemon serves on the lease's held push socket (dut).
	ln, err := w.lease.push.Listener()
	if err != nil {
		return err
	}
	turnTimeout := w.run.turnTimeout
	if w.turnTimeout > 0 {
		turnTimeout = w.turnTimeout
	}
	startTimeout := w.run.wait
	if w.hasRealAgents() {
		startTimeout = max(startTimeout, realWait)
	}
	d, err := dut.Start(ctx, cfg, ln, dut.Options{
		Logger: w.log.With("component", "daemon"),
		Bridge: []string{exe, "mcp"}, TurnTimeout: turnTimeout,
		// Start-up is bounded by the wait: only turns are meant to time out.
		StartTimeout: startTimeout,
		Observer:     w.observer,
	})
	if err != nil {
		return err
	}
	w.d = d.Daemon
	w.closers = append(w.closers, d.Close)
	return nil
}

// stateDir is the scenario daemon's state dir.
func (w *world) stateDir() string { return filepath.Join(w.dir, "state") }
