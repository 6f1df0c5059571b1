package steps

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/zooid-dev/zooid/docker/synapse"
	"github.com/zooid-dev/zooid/internal/freeport"
	"github.com/zooid-dev/zooid/internal/pushdrain"
	"github.com/zooid-dev/zooid/internal/randid"
)

// FederationTag marks features whose scenarios need two homeservers federating
// (behaviour.md §9): they run only on the "synapse-federation" backend, and
// that backend runs only them. fakehs is one server, so they never run on it.
const FederationTag = "@federation"

// Federation is the backend name of two Synapses federating.
const Federation = "synapse-federation"

// federationBackend is two Synapses federating through the harness's test CA
// (synapse.WithFederation), each with its own appservice slots. A scenario's
// lease is a slot on the first server — its humans, rooms and the daemon under
// test — with, as its peer, a slot on the second for the second daemon
// (several.go), whose agents reach the first server's rooms over federation.
type federationBackend struct {
	first, second *sharedBackend
}

func (b *federationBackend) kind() string { return Federation }

func (b *federationBackend) lease(ctx context.Context) (*lease, error) {
	l, err := b.first.lease(ctx)
	if err != nil {
		return nil, err
	}
	p, err := b.second.lease(ctx)
	if err != nil {
		l.release()
		return nil, fmt.Errorf("the second homeserver: %w", err)
	}
	l.peer = p
	release := l.release
	l.release = func() {
		p.release()
		release()
	}
	return l, nil
}

func (b *federationBackend) close(ctx context.Context) error {
	return errors.Join(b.first.close(ctx), b.second.close(ctx))
}

// startFederation starts the two servers, k slots on each, at once. Neither
// starts from a snapshot: federation scenarios make their own small rooms.
func startFederation(ctx context.Context, k int) (*federationBackend, error) {
	if k < 1 {
		k = 1
	}
	ca, err := synapse.NewTestCA()
	if err != nil {
		return nil, err
	}
	run := randid.Hex(3)
	type server struct {
		name  string
		opts  []synapse.Option
		slots []*slot
		c     *synapse.Container
		err   error
	}
	var servers [2]*server
	closeAll := func() {
		for _, s := range servers {
			if s == nil {
				continue
			}
			closeSlots(s.slots)
			if s.c != nil {
				_ = s.c.Terminate(context.WithoutCancel(ctx))
			}
		}
	}
	for i := range servers {
		port, err := freeport.Port()
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("a federation port: %w", err)
		}
		s := &server{opts: []synapse.Option{synapse.WithFederation(ca, port)}}
		s.name = fmt.Sprintf("localhost:%d", port)
		servers[i] = s
		for j := range k {
			// Namespaces tell the servers' slots apart in messages and logs.
			n := names{serverName: s.name, agentPrefix: fmt.Sprintf("zf%s%c%d-", run, 'a'+i, j)}
			sock, err := pushdrain.Bind("127.0.0.1:0")
			if err != nil {
				closeAll()
				return nil, err
			}
			sl := &slot{names: n, reg: registration(n, sock.Addr), push: sock}
			s.slots = append(s.slots, sl)
			s.opts = append(s.opts, synapse.WithAppservice(sl.reg))
		}
	}
	var wg sync.WaitGroup
	for _, s := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.c, s.err = synapse.Run(ctx, s.opts...)
		}()
	}
	wg.Wait()
	if err := errors.Join(servers[0].err, servers[1].err); err != nil {
		closeAll()
		return nil, fmt.Errorf("starting two federating synapses: %w", err)
	}
	var shared [2]*sharedBackend
	for i, s := range servers {
		b, err := newSharedBackend(ctx, "synapse", synapseHS{s.c}, run+string(rune('a'+i)), s.slots, s.c.Terminate)
		if err != nil {
			for _, sb := range shared[:i] {
				_ = sb.close(context.WithoutCancel(ctx))
			}
			for _, rest := range servers[i+1:] {
				closeSlots(rest.slots)
				_ = rest.c.Terminate(context.WithoutCancel(ctx))
			}
			return nil, err
		}
		shared[i] = b
	}
	return &federationBackend{first: shared[0], second: shared[1]}, nil
}

// capacity is how many scenarios can hold a lease at once: one slot on each
// server per scenario.
func (b *federationBackend) capacity() int {
	return min(b.first.capacity(), b.second.capacity())
}

// stepFederated states what the backend arranged: the second daemon's users
// live on another server than the first daemon's, so everything between them
// crosses the federation.
func (w *world) stepFederated(ctx context.Context) error {
	if err := w.ensureHomeserver(ctx); err != nil {
		return err
	}
	if w.peer == nil {
		return errors.New("no second daemon yet: declare it first (a second daemon, workstation …, serves …)")
	}
	first, second := w.names().serverName, w.peer.lease.names.serverName
	if first == second {
		return fmt.Errorf("both daemons are on %s: run the feature with --homeserver %s (and tag it %s)", first, Federation, FederationTag)
	}
	if w.peer.lease.hs.baseURL() == w.lease.hs.baseURL() {
		return fmt.Errorf("the second daemon's homeserver is the first's (%s)", w.lease.hs.baseURL())
	}
	return nil
}
