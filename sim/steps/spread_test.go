package steps

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/zooid-dev/zooid/internal/pushdrain"
)

// sharedOf is a shared backend of n slots on a server nobody answers at
// (nothing here talks to it), named name in its slots' namespaces.
func sharedOf(t *testing.T, name string, n int) *sharedBackend {
	t.Helper()
	var all []*slot
	for i := range n {
		sock, err := pushdrain.Bind("127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		sn := names{serverName: "localhost", agentPrefix: fmt.Sprintf("z%s%d-", name, i)}
		all = append(all, &slot{names: sn, reg: registration(sn, sock.Addr), push: sock})
	}
	b, err := newSharedBackend(context.Background(), "url", urlHS{base: "http://127.0.0.1:1"}, name, all, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.close(context.Background()) })
	return b
}

// TestSpreadLeasesEvenlyAndKeepsAScenarioOnItsServer: four leases of two
// servers of three slots each are two on each, each lease names the server it is
// on (where a second daemon's slot and a seeded copy come from); with every
// slot held a lease waits until its context ends, and the slot given back
// next is the one it gets.
func TestSpreadLeasesEvenlyAndKeepsAScenarioOnItsServer(t *testing.T) {
	a, b := sharedOf(t, "a", 3), sharedOf(t, "b", 3)
	sp := &spreadBackend{parts: []*sharedBackend{a, b}}
	if got := sp.capacity(); got != 6 {
		t.Fatalf("capacity %d, want 6", got)
	}
	on := map[*sharedBackend]int{}
	var held []*lease
	for range 4 {
		l, err := sp.lease(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if l.shared != a && l.shared != b {
			t.Fatalf("lease on %p, which is neither server", l.shared)
		}
		if l.hs != l.shared.hs || l.listen != l.push.Addr {
			t.Fatalf("lease's server %v is not the one it names", l.hs)
		}
		on[l.shared]++
		held = append(held, l)
	}
	if on[a] != 2 || on[b] != 2 {
		t.Fatalf("leases on the servers: %d and %d, want 2 and 2", on[a], on[b])
	}
	for range 2 {
		l, err := sp.lease(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := sp.lease(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("a lease with every slot held and its context ended: %v, want context.Canceled", err)
	}
	for _, l := range held {
		if l.shared == b {
			l.release()
			break
		}
	}
	l, err := sp.lease(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if l.shared != b {
		t.Fatalf("the free slot was b's, the lease is on %p", l.shared)
	}
}
