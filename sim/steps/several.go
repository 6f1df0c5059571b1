package steps

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/fakeagent"
	"github.com/zooid-dev/zooid/sim/dut"
	"github.com/zooid-dev/zooid/sim/standin"
	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/zevent"
)

// Several daemons in one room (behaviour.md §9): the daemon under test and a
// second daemon, each a workstation with its own appservice registration on
// the same homeserver, its agents users of its own namespace.

// SeveralDaemonsTag marks features whose scenarios start a second daemon: on
// fakehs the run then registers a second appservice on each scenario's
// server (lease.peer); a shared server's second daemon leases a slot of its
// own.
const SeveralDaemonsTag = "@several-daemons"

// several is the scenario's workstations: the daemon under test's name, and
// the second daemon once a step declares it.
type several struct {
	workstation string // the daemon under test's zooid.yaml workstation; "" none
	peer        *peerDaemon
	// markable are the rooms (step names) whose members may send
	// dev.zooid.agent state: set by the room's creator after creating it.
	markable map[string]bool
}

// peerDaemon is the second daemon: in-process, on its own registration,
// state dir and run dir, its agents scripted by the scenario's controller
// like the first daemon's (agent step names are unique across both).
type peerDaemon struct {
	workstation string
	lease       *lease
	d           *dut.InProcess
	cfg         *config.Config
}

func severalSteps(w *world) []stepDef {
	return []stepDef{
		{area: "daemons", pattern: `^the daemon under test is workstation "([a-z][a-z0-9-]*)"$`,
			example: `the daemon under test is workstation "laptop"`,
			doc:     "Sets zooid.yaml `workstation:` of the daemon under test; its agents' users become @workstation.name (in the scenario's namespace).",
			fn:      w.stepWorkstation},
		{area: "daemons", pattern: `^a second daemon, workstation "([a-z][a-z0-9-]*)", serves ` + quotedList + ` in "(#[a-z0-9-]+)"$`,
			example: `a second daemon, workstation "ci", serves "builder" in "#ops"`,
			doc:     "Declares a second daemon with its own appservice registration on the same homeserver and the agents it serves; it starts with the daemon under test (the feature must carry @several-daemons).",
			fn:      w.stepSecondDaemon},
		{area: "daemons", pattern: `^([a-z0-9-]+) is named "([a-z][a-z0-9-]*)" in its daemon's zooid.yaml$`,
			example: `ci-architect is named "architect" in its daemon's zooid.yaml`,
			doc:     "Gives an agent a zooid.yaml name other than its step name, so two daemons can each have an agent of one name.",
			fn:      w.stepConfigName},
		{area: "daemons", pattern: `^"(#[a-z0-9-]+)" lets its members mark themselves as Zooid agents$`,
			example: `"#ops" lets its members mark themselves as Zooid agents`,
			doc:     "The room's creator (its admin) gives dev.zooid.agent state the level of any member, as the operator of a room someone else made does for agents of several daemons (docs/deployment.md).",
			fn:      w.stepMarkable},
		{area: "daemons", pattern: `^the second daemon is on a second homeserver, federating with the first$`,
			example: `the second daemon is on a second homeserver, federating with the first`,
			doc:     "Checks that the second daemon's registration is on another homeserver than the daemon under test's, federating with it (the synapse-federation backend; the feature must carry @federation).",
			fn:      w.stepFederated},
		{area: "daemons", pattern: `^the second daemon is stopped and started again$`,
			example: `the second daemon is stopped and started again`,
			doc:     "Closes the second daemon (its agents stop) and starts it again on the same state dir and push port, waiting until it is ready.",
			fn:      w.stepRestartPeer},
		{area: "daemons", pattern: `^the second daemon is stopped for good$`,
			example: `the second daemon is stopped for good`,
			doc:     "Closes the second daemon (its agents stop) and does not start it again in the scenario: a workstation that never comes back.",
			fn:      w.stepStopPeer},
	}
}

// configName is the agent's zooid.yaml name.
func (a *agentDecl) configName() string {
	if a.cfgName != "" {
		return a.cfgName
	}
	return a.name
}

// agentUser is the Matrix user of an agent by step name: in its daemon's
// namespace, @workstation.name when that daemon has a workstation (as
// zooid.yaml's default user id is), else its name.
func (w *world) agentUser(name string) id.UserID {
	a := w.agents[name]
	if a == nil && strings.Contains(name, ".") {
		// An address, workstation.name, as a tool call names an agent.
		if n, ok := w.agentAt(name); ok {
			return w.agentUser(n)
		}
	}
	switch {
	case a == nil:
		return w.names().agent(name)
	case a.peer && w.peer != nil && w.peer.lease != nil:
		return w.peer.lease.names.agent(w.peer.workstation + "." + a.configName())
	case a.peer:
		return "" // not leased yet: the peer's names are unknown
	case w.workstation != "":
		return w.names().agent(w.workstation + "." + a.configName())
	default:
		return w.names().agent(a.configName())
	}
}

// agentAt is the step name of the agent an address (workstation.name) names.
func (w *world) agentAt(addr string) (string, bool) {
	for _, n := range w.agentSeq {
		a := w.agents[n]
		ws := w.workstation
		if a.peer && w.peer != nil {
			ws = w.peer.workstation
		}
		if ws != "" && ws+"."+a.configName() == addr {
			return n, true
		}
	}
	return "", false
}

func (w *world) stepWorkstation(ws string) error {
	if err := w.beforeStart("the workstation"); err != nil {
		return err
	}
	w.workstation = ws
	return nil
}

func (w *world) stepSecondDaemon(ctx context.Context, ws, list, roomName string) error {
	if err := w.beforeStart("a second daemon"); err != nil {
		return err
	}
	if err := w.ensureHomeserver(ctx); err != nil {
		return err
	}
	if w.peer != nil && w.peer.workstation != ws {
		return fmt.Errorf("the second daemon is workstation %q already", w.peer.workstation)
	}
	if w.peer == nil {
		l, err := w.peerLease(ctx)
		if err != nil {
			return err
		}
		w.peer = &peerDaemon{workstation: ws, lease: l}
	}
	if _, err := w.room(ctx, roomName); err != nil {
		return err
	}
	for _, n := range listOf(list) {
		if err := checkName(n); err != nil {
			return err
		}
		if _, ok := w.humans[n]; ok {
			return fmt.Errorf("%q is already a human", n)
		}
		if a, ok := w.agents[n]; ok && !a.peer {
			return fmt.Errorf("%q is already an agent of the daemon under test", n)
		}
		a, ok := w.agents[n]
		if !ok {
			a = &agentDecl{name: n, peer: true, trigger: "mention"}
			w.agents[n] = a
			w.agentSeq = append(w.agentSeq, n)
		}
		a.rooms = append(a.rooms, roomName)
	}
	return nil
}

// peerLease is the second daemon's registration: on fakehs the second one
// the run registered (SeveralDaemonsTag); on a shared server a slot of its
// own on the scenario's server.
func (w *world) peerLease(ctx context.Context) (*lease, error) {
	if w.lease.peer != nil {
		return w.lease.peer, nil
	}
	if w.lease.shared == nil {
		return nil, fmt.Errorf("this fakehs has one appservice: tag the feature %s so the run registers a second", SeveralDaemonsTag)
	}
	l, err := w.lease.shared.lease(ctx)
	if err != nil {
		return nil, fmt.Errorf("leasing the second daemon's registration: %w", err)
	}
	w.closers = append(w.closers, func() error { l.release(); return nil })
	return l, nil
}

func (w *world) stepConfigName(agent, name string) error {
	if err := w.beforeStart("an agent's zooid.yaml name"); err != nil {
		return err
	}
	a, err := w.agent(agent)
	if err != nil {
		return err
	}
	a.cfgName = name
	return nil
}

func (w *world) stepMarkable(ctx context.Context, roomName string) error {
	if err := w.beforeStart("who may mark Zooid agents"); err != nil {
		return err
	}
	if _, err := w.room(ctx, roomName); err != nil {
		return err
	}
	if w.markable == nil {
		w.markable = map[string]bool{}
	}
	w.markable[roomName] = true
	return nil
}

// openMarking is what the admin of a room does so agents of several daemons
// can mark themselves (docs/deployment.md): dev.zooid.agent at the level of
// any member.
func (w *world) openMarking(ctx context.Context, r *room) error {
	if !w.markable[r.name] {
		return nil
	}
	admin := w.humans[w.humanSeq[0]]
	var pl event.PowerLevelsEventContent
	if err := admin.cli.StateEvent(ctx, r.id, event.StatePowerLevels, "", &pl); err != nil {
		return fmt.Errorf("reading the power levels of %s: %w", r.name, err)
	}
	pl.SetEventLevel(zevent.StateAgent, pl.UsersDefault)
	if _, err := admin.cli.SendStateEvent(ctx, r.id, event.StatePowerLevels, "", &pl); err != nil {
		return fmt.Errorf("%s letting members of %s mark themselves: %w", admin.name, r.name, err)
	}
	return nil
}

// peerConfig is the second daemon's zooid.yaml, built as the first's is
// (daemon.go config) from its own registration and the peer agents.
func (w *world) peerConfig(exe string) *config.Config {
	p := w.peer
	reg := p.lease.reg
	dir := filepath.Join(w.dir, "peer")
	cfg := &config.Config{
		Transports: []config.Transport{{
			Name: "matrix", Type: "matrix",
			Matrix: &config.MatrixTransport{
				Homeserver: p.lease.hs.baseURL(), ServerName: p.lease.names.serverName,
				ASToken: reg.AppToken, HSToken: reg.ServerToken,
				Listen: p.lease.listen, ID: reg.ID, SenderLocalpart: reg.SenderLocalpart,
			},
		}},
		Workstation: p.workstation,
		StateDir:    filepath.Join(dir, "state"),
		RunDir:      filepath.Join(dir, "run"),
	}
	n := w.names()
	for _, an := range w.agentSeq {
		a := w.agents[an]
		if !a.peer {
			continue
		}
		rooms := make([]config.RoomRef, 0, len(a.rooms))
		for _, r := range a.rooms {
			// The room's alias is the scenario's (the first human made it).
			rooms = append(rooms, config.RoomRef(n.alias(r)))
		}
		cfg.Agents = append(cfg.Agents, config.Agent{
			Name: a.configName(),
			ACP: config.ACP{Command: exe, Args: w.ctl.Args(a.name),
				Env: map[string]string{fakeagent.ExecEnv: "fake-agent"}},
			Dir: filepath.Join(dir, "agents", a.name),
			Matrix: &config.AgentMatrix{
				Transport: "matrix", UserID: w.agentUser(a.name), DisplayName: a.configName(),
				Rooms: rooms, Trigger: a.trigger,
			},
			Sandbox: w.sandboxOf(a),
		})
	}
	return cfg
}

// startPeer writes the second daemon's zooid.yaml, loads it as `zooid run`
// would and starts the daemon in-process on its registration's push port.
func (w *world) startPeer(ctx context.Context, exe string) error {
	p := w.peer
	if p == nil {
		return nil
	}
	if p.cfg == nil {
		cfg := w.peerConfig(exe)
		for _, a := range cfg.Agents {
			if err := os.MkdirAll(a.Dir, 0o700); err != nil {
				return fmt.Errorf("agent dir: %w", err)
			}
		}
		v := newSecretVars()
		path := filepath.Join(w.dir, "peer", "zooid.yaml")
		if err := os.WriteFile(path, []byte(zooidYAML(cfg, v)), 0o600); err != nil {
			return fmt.Errorf("writing the second daemon's zooid.yaml: %w", err)
		}
		env := v.values(cfg)
		for k, val := range env {
			if err := os.Setenv(k, val); err != nil {
				return fmt.Errorf("setting %s: %w", k, err)
			}
		}
		w.closers = append(w.closers, func() error {
			for k := range env {
				_ = os.Unsetenv(k)
			}
			return nil
		})
		loaded, err := config.Load(path)
		if err != nil {
			return fmt.Errorf("loading the second daemon's zooid.yaml: %w", err)
		}
		p.cfg = loaded
		if p.lease.handOver != nil {
			hctx, cancel := context.WithTimeout(ctx, w.run.wait)
			err := p.lease.handOver(hctx, "")
			cancel()
			if err != nil {
				return err
			}
		}
	}
	ln, err := p.lease.push.Listener()
	if err != nil {
		return err
	}
	d, err := dut.Start(ctx, p.cfg, ln, dut.Options{
		Logger: w.log.With("component", "daemon", "workstation", p.workstation),
		Bridge: []string{exe, "mcp"}, TurnTimeout: w.run.turnTimeout,
		StartTimeout: w.run.wait,
	})
	if err != nil {
		return fmt.Errorf("starting the second daemon: %w", err)
	}
	p.d = d
	return nil
}

// closePeer stops the second daemon, once.
func (w *world) closePeer() error {
	if w.peer == nil || w.peer.d == nil {
		return nil
	}
	d := w.peer.d
	w.peer.d = nil
	return d.Close()
}

func (w *world) stepRestartPeer(ctx context.Context) error {
	if err := w.stepStopPeer(ctx); err != nil {
		return err
	}
	exe, err := standin.Path()
	if err != nil {
		return err
	}
	return w.startPeer(ctx, exe)
}

// stepStopPeer stops the second daemon once everything sent so far is handled.
func (w *world) stepStopPeer(ctx context.Context) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	if w.peer == nil {
		return errors.New("there is no second daemon; declare one with: a second daemon, workstation \"ci\", serves \"builder\" in \"#ops\"")
	}
	if err := w.settleBarriers(ctx); err != nil {
		return err
	}
	if err := w.closePeer(); err != nil {
		return fmt.Errorf("stopping the second daemon: %w", err)
	}
	return nil
}

// createRooms creates the declared rooms, each opened to agents' marks when
// a step asked for it.
func (w *world) createRooms(ctx context.Context) error {
	for _, rn := range w.roomSeq {
		r := w.rooms[rn]
		if err := w.createRoom(ctx, r); err != nil {
			return err
		}
		if err := w.openMarking(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

// startPeerDaemon starts the second daemon, when the scenario has one, after
// the daemon under test (both serve the rooms at once from then on); it is
// stopped before the scenario's other closers run.
func (w *world) startPeerDaemon(ctx context.Context) error {
	if w.peer == nil {
		return nil
	}
	exe, err := standin.Path()
	if err != nil {
		return fmt.Errorf("the program agents run as: %w", err)
	}
	if err := w.startPeer(ctx, exe); err != nil {
		return err
	}
	w.closers = append(w.closers, w.closePeer)
	return nil
}
