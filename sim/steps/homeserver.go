package steps

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/zooid-dev/zooid/internal/randid"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/appservice"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/docker/synapse"
	"github.com/zooid-dev/zooid/fakehs"
	"github.com/zooid-dev/zooid/internal/pushdrain"
)

// homeserver is what a scenario needs of the server it runs against.
type homeserver interface {
	// baseURL is the client-server API base URL.
	baseURL() string
	// registerHuman creates a human account and returns its access token.
	registerHuman(ctx context.Context, localpart, displayName string) (id.UserID, string, error)
	// importRoom creates a room with its history in one go; ok is false where the
	// server can't (a real server), and the world then seeds by sending.
	importRoom(seed roomSeed) (room id.RoomID, events []id.EventID, ok bool, err error)
	// injectFault programs a misbehaviour; only fakehs can, so scenarios that
	// use it are tagged @fake-only.
	injectFault(f fakehs.Fault) (*fakehs.FaultHandle, error)
	// degrade changes the server's fakehs.Profile; only fakehs can.
	degrade(change func(*fakehs.Profile)) error
	// requests counts the requests the server received (fakehs.Server.Requests), or
	// with as those the appservice made as one of those users
	// (fakehs.Server.RequestsAs); only fakehs can.
	requests(method, pattern string, as []id.UserID) (int, error)
}

// roomSeed is a room to create with a ready-made history.
type roomSeed struct {
	creator        id.UserID
	name           string
	aliasLocalpart string
	members        []id.UserID
	events         []seedEvent
}

// seedEvent is one message of a seeded history; threadRoot is the index of
// its thread root in the seed, or -1 for a top-level message.
type seedEvent struct {
	sender     id.UserID
	body       string
	ts         time.Time
	threadRoot int
	// A recorded event (scenarios.go) sets these instead of body: its
	// type, its content for an import (relations by index in threadRoot and
	// relation), and send, its content for sending given the ids of the
	// events before it.
	typ      string
	content  map[string]any
	relation *fakehs.SeedRelation
	send     func(earlier []id.EventID) map[string]any
}

// lease is one scenario's use of a homeserver: the server, the names that are
// the scenario's own on it, and the appservice registration the daemon must
// serve (its URL is where the daemon listens).
type lease struct {
	hs     homeserver
	names  names
	reg    *appservice.Registration
	listen string // host:port of the daemon's push listener
	// push is that port, bound before the homeserver learns of it and held
	// until the lease (shared backends: the run) ends; the daemon is handed a
	// listener on it instead of binding listen itself.
	push    *pushdrain.Socket
	release func()
	// handOver, when set, is called just before the daemon takes the push
	// socket: it waits until the homeserver has pushed last (if any) to the
	// drain and then stops the drain.
	handOver func(ctx context.Context, last id.EventID) error
	// hold, on fakehs, is the listener keeping the push port until hand-over.
	hold *drain
	// sharedAgents: the lease's agent users serve other scenarios too (a
	// snapshot copy's, sim/steps/snapshot.go), so at teardown they leave every
	// room the scenario put them in except keep, the copy's seeded room.
	sharedAgents bool
	keep         id.RoomID
	// peer is a second registration on the same fakehs, for a second daemon
	// (several.go); nil unless the run has features tagged SeveralDaemonsTag.
	// A shared server's second daemon leases a slot of its own instead.
	peer *lease
	// shared is the server a lease on a shared server (Synapse, a URL) is
	// on: a run may have several (spreadBackend), and a scenario's second
	// daemon and its seeded copy (world.claimSeeded) must come from its own.
	// nil on fakehs.
	shared *sharedBackend
}

// backend hands out leases; one backend serves a whole run.
type backend interface {
	lease(ctx context.Context) (*lease, error)
	close(ctx context.Context) error
	// kind is "fake", "synapse" or "url", for tag filtering and messages.
	kind() string
}

// wearing is a backend whose seeded rooms a pass uses up (Synapse started
// from a snapshot: a scenario that writes to a copy spends it). Without
// them a later pass would seed every busy room by sending, minutes a room
// on Synapse, so Run starts such a backend afresh before the next pass.
type wearing interface {
	worn() (spent, total int)
}

// newBackend selects the homeserver: "fake" (default), "fake-degraded",
// "synapse", or a URL,
// whose appservice registration comes from the environment (see urlEnv).
// say receives notes for the run's output (a snapshot built or reused).
// paths are the run's features: Synapse builds and starts from a snapshot
// only of the busy rooms they declare.
func newBackend(ctx context.Context, which string, slots int, paths []string, say func(string, ...any)) (backend, error) {
	switch which {
	case "", "fake":
		return fakeBackend{peers: hasTag(paths, SeveralDaemonsTag)}, nil
	case "fake-degraded":
		return fakeBackend{profile: fakehs.Degraded, degraded: true, peers: hasTag(paths, SeveralDaemonsTag)}, nil
	case "synapse":
		return startSynapse(ctx, slots, paths, say)
	case Federation:
		return startFederation(ctx, slots)
	default:
		if strings.HasPrefix(which, "http://") || strings.HasPrefix(which, "https://") {
			return startURL(ctx, which, os.Getenv)
		}
		return nil, fmt.Errorf("unknown homeserver %q (want fake, fake-degraded, synapse, synapse-federation or a URL)", which)
	}
}

// registration builds the appservice registration for a scenario's names.
func registration(n names, listen string) *appservice.Registration {
	rateLimited := false
	return &appservice.Registration{
		ID:              "zooid-" + strings.TrimSuffix(n.agentPrefix, "-"),
		URL:             "http://" + listen,
		AppToken:        "as-" + randid.Hex(16),
		ServerToken:     "hs-" + randid.Hex(16),
		SenderLocalpart: n.senderLocalpart(),
		RateLimited:     &rateLimited,
		Namespaces: appservice.Namespaces{
			UserIDs: appservice.NamespaceList{{Regex: n.agentNamespace(), Exclusive: true}},
		},
		// What the agents' devices need when a scenario's daemon reads
		// encrypted rooms (zooid registration asks for them with
		// encryption: true); a daemon without it ignores what they add to
		// its transactions.
		EphemeralEvents: true, SoruEphemeralEvents: true, MSC3202: true, MSC4190: true,
	}
}

// fakeBackend starts a fresh fakehs per scenario, so nothing is shared;
// degraded ones run fakehs.Degraded.
type fakeBackend struct {
	profile  fakehs.Profile
	degraded bool
	// peers registers a second appservice on each fakehs (lease.peer), for
	// scenarios with a second daemon.
	peers bool
}

func (fakeBackend) kind() string                { return "fake" }
func (fakeBackend) close(context.Context) error { return nil }
func (b fakeBackend) lease(context.Context) (*lease, error) {
	n := names{serverName: "localhost", agentPrefix: "zs-"}
	// The push port is bound before fakehs is told of it and stays bound
	// until the lease ends: the daemon is handed a listener on it.
	main, err := newFakeSlot(n)
	if err != nil {
		return nil, err
	}
	opts := []fakehs.Option{fakehs.WithServerName(n.serverName), fakehs.WithAppservice(main.reg), fakehs.WithProfile(b.profile)}
	var peer *lease
	if b.peers {
		// Its own namespace (@zt-…), as a second workstation's daemon has.
		if peer, err = newFakeSlot(names{serverName: n.serverName, agentPrefix: "zt-"}); err != nil {
			main.release()
			return nil, err
		}
		opts = append(opts, fakehs.WithAppservice(peer.reg))
	}
	srv, err := fakehs.Start(opts...)
	if err != nil {
		main.release()
		if peer != nil {
			peer.release()
		}
		return nil, fmt.Errorf("starting fakehs: %w", err)
	}
	main.hs = fakeHS{srv}
	main.peer = peer
	slot := main.release
	main.release = func() {
		slot()
		if peer != nil {
			peer.release()
		}
		_ = srv.Close()
	}
	if peer != nil {
		peer.hs = main.hs
	}
	return main, nil
}

// newFakeSlot is one registration of a fakehs lease: its push socket, held,
// with a drain swallowing pushes of history sent before its daemon starts.
func newFakeSlot(n names) (*lease, error) {
	sock, err := pushdrain.Bind("127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	reg := registration(n, sock.Addr)
	hold, err := startDrain(sock, reg.ServerToken)
	if err != nil {
		_ = sock.Close()
		return nil, err
	}
	return &lease{
		names: n, reg: reg, listen: sock.Addr, push: sock, hold: hold,
		// Imported history is not pushed, so there is nothing to wait for.
		handOver: func(context.Context, id.EventID) error { return hold.stop() },
		release: func() {
			_ = hold.stop()
			_ = sock.Close()
		},
	}, nil
}

// fakeHS adapts *fakehs.Server.
type fakeHS struct{ srv *fakehs.Server }

func (f fakeHS) baseURL() string { return f.srv.URL() }

func (f fakeHS) registerHuman(_ context.Context, localpart, displayName string) (id.UserID, string, error) {
	uid, tok, err := f.srv.RegisterUser(localpart, displayName)
	if err != nil {
		return "", "", fmt.Errorf("registering %s on fakehs: %w", localpart, err)
	}
	return uid, tok, nil
}

func (f fakeHS) degrade(change func(*fakehs.Profile)) error {
	p := f.srv.Profile()
	change(&p)
	f.srv.SetProfile(p)
	return nil
}

func (f fakeHS) requests(method, pattern string, as []id.UserID) (int, error) {
	if as != nil {
		return f.srv.RequestsAs(method, pattern, as...), nil
	}
	return f.srv.Requests(method, pattern), nil
}

func (f fakeHS) injectFault(fault fakehs.Fault) (*fakehs.FaultHandle, error) {
	return f.srv.InjectFault(fault), nil
}

func (f fakeHS) importRoom(seed roomSeed) (id.RoomID, []id.EventID, bool, error) {
	rs := fakehs.RoomSeed{
		Creator: seed.creator, Name: seed.name, AliasLocalpart: seed.aliasLocalpart,
		Preset: "public_chat", Members: seed.members,
	}
	for _, e := range seed.events {
		se := fakehs.SeedEvent{
			Sender: e.sender, Type: "m.room.message",
			Content:    map[string]any{"msgtype": "m.text", "body": e.body},
			Timestamp:  e.ts,
			ThreadRoot: e.threadRoot,
		}
		if e.content != nil {
			se.Type, se.Content, se.Relation = e.typ, e.content, e.relation
		}
		rs.Events = append(rs.Events, se)
	}
	r, err := f.srv.ImportRoom(rs)
	if err != nil {
		return "", nil, true, fmt.Errorf("importing %s into fakehs: %w", seed.aliasLocalpart, err)
	}
	return r.RoomID, r.EventIDs, true, nil
}

// sharedBackend serves a run from one long-lived homeserver (a Synapse
// container or a server given by URL) with a fixed set of appservice
// registrations, the slots; a scenario leases a slot for its agents, and
// humans and aliases carry per-scenario prefixes so scenarios never collide.
type sharedBackend struct {
	which     string // "synapse" or "url"
	hs        homeserver
	runPrefix string // humans and aliases of this run
	slots     chan *slot
	stop      func(ctx context.Context) error // ends the server, if the run owns it
	pool      *pool                           // seeded rooms ready to claim (Synapse from a snapshot); nil: none
	seq       int
	mu        sync.Mutex
}

// slot is one fixed appservice registration on the shared server.
type slot struct {
	names names
	reg   *appservice.Registration
	push  *pushdrain.Socket // bound for the whole run
	drain *drain            // answers pushes while no daemon holds the slot; nil while one does
}

// newSharedBackend takes over the slots (their bound push ports) and starts
// every slot's drain; on error it stops what it started, unbinds the ports and
// stops the server (stop).
func newSharedBackend(ctx context.Context, which string, hs homeserver, run string, all []*slot, stop func(context.Context) error) (*sharedBackend, error) {
	b := &sharedBackend{which: which, hs: hs, runPrefix: run, slots: make(chan *slot, len(all)), stop: stop}
	for _, s := range all {
		b.slots <- s
	}
	for _, s := range all {
		d, err := startDrain(s.push, s.reg.ServerToken)
		if err != nil {
			_ = b.close(ctx)
			return nil, err
		}
		s.drain = d
	}
	return b, nil
}

func (b *sharedBackend) kind() string { return b.which }

// capacity is how many scenarios can hold a slot at once.
func (b *sharedBackend) capacity() int { return cap(b.slots) }

func (b *sharedBackend) close(ctx context.Context) error {
	for {
		select {
		case s := <-b.slots:
			if s.drain != nil {
				_ = s.drain.stop()
			}
			_ = s.push.Close()
			continue
		default:
		}
		break
	}
	b.pool.close()
	if b.stop == nil {
		return nil
	}
	if err := b.stop(ctx); err != nil {
		return fmt.Errorf("stopping the %s homeserver: %w", b.which, err)
	}
	return nil
}

// worn says how many of the snapshot's seeded rooms the scenarios so far
// spent, of how many (0, 0 without a snapshot).
func (b *sharedBackend) worn() (spent, total int) { return b.pool.spent() }

func (b *sharedBackend) lease(ctx context.Context) (*lease, error) {
	var s *slot
	select {
	case s = <-b.slots:
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for a free %s appservice slot: %w", b.which, ctx.Err())
	}
	return b.leaseSlot(s)
}

// leaseSlot hands out s, taken from b.slots, for one scenario.
func (b *sharedBackend) leaseSlot(s *slot) (*lease, error) {
	if s.drain == nil {
		d, err := startDrain(s.push, s.reg.ServerToken)
		if err != nil {
			b.slots <- s
			return nil, fmt.Errorf("the %s appservice slot: %w", b.which, err)
		}
		s.drain = d
	}
	b.mu.Lock()
	b.seq++
	seq := b.seq
	b.mu.Unlock()
	n := s.names
	n.aliasSuffix = fmt.Sprintf("-%s%d", b.runPrefix, seq)
	// Humans are per scenario too: scenarios share the server, and each
	// registers its own "ori".
	n.humanPrefix = fmt.Sprintf("h%s%d-", b.runPrefix, seq)
	// And so are agents: users of the slot's namespace no scenario before
	// this one used.
	n.agentScope = fmt.Sprintf("%d-", seq)
	return &lease{
		hs: b.hs, names: n, reg: s.reg, listen: s.push.Addr, push: s.push, shared: b,
		handOver: func(ctx context.Context, last id.EventID) error {
			if last != "" {
				if err := s.drain.waitFor(ctx, last); err != nil {
					return err
				}
			}
			err := s.drain.stop()
			s.drain = nil
			return err
		},
		release: func() {
			if s.drain == nil {
				// On failure the next lease tries again and reports it.
				if d, err := startDrain(s.push, s.reg.ServerToken); err == nil {
					s.drain = d
				}
			}
			b.slots <- s
		},
	}, nil
}

// SnapshotsEnv, set to "off", makes a Synapse run seed every busy room by
// sending instead of starting from a snapshot that holds them (to measure
// the difference, or to rule the snapshot out).
const SnapshotsEnv = "ZOOID_TEST_SNAPSHOTS"

// synapseServers is how many Synapse containers a Synapse run starts, each
// from the same snapshot with slots of its own (spreadBackend). Synapse
// persists events in one Python process, which held CI's Synapse pass at
// 88-100% of one core while the other waited: 146 s alone on one container,
// 98 s on two (issue 38's goal 4, docs/performance.md).
const synapseServers = 2

// startSynapse runs the Synapse containers of a run (synapseServers, at
// once), each with k slots, started from the snapshot of poolRecipes (built
// first if the engine has none).
func startSynapse(ctx context.Context, k int, paths []string, say func(string, ...any)) (backend, error) {
	if k < 1 {
		k = 1
	}
	if hasTag(paths, SeveralDaemonsTag) {
		// Such a scenario leases a second slot for its second daemon: with
		// two per concurrent scenario none waits on another for its second.
		k *= 2
	}
	recipes, err := neededRecipes(paths, poolRecipes)
	if err != nil {
		return nil, err
	}
	var snap *synapseSnapshot
	if os.Getenv(SnapshotsEnv) != "off" && len(recipes) > 0 {
		base := os.Getenv(synapse.ImageEnv)
		if base == "" {
			base = synapse.DefaultImage
		}
		ref, entries, err := snapshot(ctx, base, recipes, say)
		if err != nil {
			return nil, err
		}
		snap = &synapseSnapshot{ref: ref, recipes: recipes, entries: entries}
	}
	parts := make([]*sharedBackend, synapseServers)
	errs := make([]error, synapseServers)
	var wg sync.WaitGroup
	for i := range parts {
		wg.Go(func() { parts[i], errs[i] = startSynapseServer(ctx, k, snap) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, b := range parts {
			if b != nil {
				_ = b.close(context.WithoutCancel(ctx))
			}
		}
		return nil, err
	}
	if len(parts) == 1 {
		return parts[0], nil
	}
	return &spreadBackend{parts: parts}, nil
}

// synapseSnapshot is the snapshot a run's containers start from.
type synapseSnapshot struct {
	ref     string
	recipes []poolRecipe
	entries []*poolEntry
}

// startSynapseServer runs one Synapse container with k slots, from snap
// when there is one (its seeded rooms then make the server's pool).
func startSynapseServer(ctx context.Context, k int, snap *synapseSnapshot) (*sharedBackend, error) {
	run := randid.Hex(3)
	// The registrations' namespaces name the server, so fix it up front.
	opts := []synapse.Option{synapse.WithServerName("localhost")}
	var pl *pool
	if snap != nil {
		opts = append(opts, synapse.FromSnapshot(snap.ref))
		pl = &pool{recipes: snap.recipes}
		for _, e := range snap.entries {
			// Bound now and held for the run, as the slots' ports.
			sock, err := pushdrain.Bind("127.0.0.1:0")
			if err != nil {
				pl.close()
				return nil, err
			}
			// Each server's copy: start fills in the events it reads.
			own := *e
			pl.entries = append(pl.entries, &pooled{poolEntry: &own, push: sock})
			opts = append(opts, synapse.WithAppservice(own.reg("localhost", sock.Addr)))
		}
	}
	var all []*slot
	for i := range k {
		n := names{serverName: "localhost", agentPrefix: fmt.Sprintf("zs%s%d-", run, i)}
		// Bound now and held for the run: Synapse's registration names it.
		sock, err := pushdrain.Bind("127.0.0.1:0")
		if err != nil {
			closeSlots(all)
			pl.close()
			return nil, err
		}
		s := &slot{names: n, reg: registration(n, sock.Addr), push: sock}
		all = append(all, s)
		opts = append(opts, synapse.WithAppservice(s.reg))
	}
	c, err := synapse.Run(ctx, opts...)
	if err != nil {
		closeSlots(all)
		pl.close()
		return nil, fmt.Errorf("starting synapse: %w", err)
	}
	for _, s := range all {
		s.names.serverName = c.ServerName()
	}
	if pl != nil {
		if err := pl.start(ctx, c); err != nil {
			closeSlots(all)
			pl.close()
			_ = c.Terminate(context.WithoutCancel(ctx))
			return nil, err
		}
	}
	b, err := newSharedBackend(ctx, "synapse", synapseHS{c}, run, all, c.Terminate)
	if err != nil {
		pl.close()
		return nil, err
	}
	b.pool = pl
	return b, nil
}

// closeSlots unbinds the push ports of slots no backend owns yet.
func closeSlots(all []*slot) {
	for _, s := range all {
		_ = s.push.Close()
	}
}

// synapseHS adapts the shared container.
type synapseHS struct{ c *synapse.Container }

func (s synapseHS) baseURL() string { return s.c.BaseURL() }

func (s synapseHS) registerHuman(ctx context.Context, localpart, displayName string) (id.UserID, string, error) {
	uid, tok, err := s.c.RegisterNamedUser(ctx, localpart, "pw-"+randid.Hex(8), displayName, false)
	if err != nil {
		return "", "", fmt.Errorf("registering %s on synapse: %w", localpart, err)
	}
	return uid, tok, nil
}

// setDisplayName gives a freshly registered human the name steps call it by.
func setDisplayName(ctx context.Context, baseURL string, uid id.UserID, tok, displayName string) error {
	cli, err := mautrix.NewClient(baseURL, uid, tok)
	if err != nil {
		return fmt.Errorf("client for %s: %w", uid, err)
	}
	if err := cli.SetDisplayName(ctx, displayName); err != nil {
		return fmt.Errorf("setting display name of %s: %w", uid, err)
	}
	return nil
}

func (synapseHS) importRoom(roomSeed) (id.RoomID, []id.EventID, bool, error) {
	return "", nil, false, nil
}

func (synapseHS) degrade(func(*fakehs.Profile)) error {
	return errors.New("only the fake homeserver changes its profile; tag the scenario " + FakeOnlyTag)
}

func (synapseHS) requests(string, string, []id.UserID) (int, error) {
	return 0, errors.New("only the fake homeserver counts requests; tag the scenario " + FakeOnlyTag)
}

func (synapseHS) injectFault(fakehs.Fault) (*fakehs.FaultHandle, error) {
	return nil, errors.New("only the fake homeserver injects faults; tag the scenario " + FakeOnlyTag)
}
