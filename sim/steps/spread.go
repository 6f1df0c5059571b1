package steps

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
)

// spreadBackend serves a run from several shared servers of one kind (the
// Synapse containers of startSynapse, each from the same snapshot), so that
// the scenarios' load on the servers is spread over the machine's cores. A
// scenario's lease is a slot on the server with the most free slots; what
// else the scenario leases (a second daemon's slot, a seeded copy) comes
// from that server (lease.shared).
type spreadBackend struct {
	parts []*sharedBackend
}

func (b *spreadBackend) kind() string { return b.parts[0].kind() }

// capacity is how many scenarios can hold a slot at once, on all servers.
func (b *spreadBackend) capacity() int {
	n := 0
	for _, p := range b.parts {
		n += p.capacity()
	}
	return n
}

// worn sums what the scenarios spent of every server's seeded rooms.
func (b *spreadBackend) worn() (spent, total int) {
	for _, p := range b.parts {
		s, t := p.worn()
		spent, total = spent+s, total+t
	}
	return spent, total
}

func (b *spreadBackend) lease(ctx context.Context) (*lease, error) {
	// The server with the most free slots, so that the servers' loads stay
	// even; with none free, the first slot any server gives back.
	best := b.parts[0]
	for _, p := range b.parts[1:] {
		if len(p.slots) > len(best.slots) {
			best = p
		}
	}
	select {
	case s := <-best.slots:
		return best.leaseSlot(s)
	default:
	}
	cases := make([]reflect.SelectCase, 0, len(b.parts)+1)
	for _, p := range b.parts {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(p.slots)})
	}
	cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())})
	i, v, _ := reflect.Select(cases)
	if i == len(b.parts) {
		return nil, fmt.Errorf("waiting for a free %s appservice slot: %w", b.kind(), ctx.Err())
	}
	return b.parts[i].leaseSlot(v.Interface().(*slot))
}

// close stops every server, at once.
func (b *spreadBackend) close(ctx context.Context) error {
	errs := make([]error, len(b.parts))
	var wg sync.WaitGroup
	for i, p := range b.parts {
		wg.Go(func() { errs[i] = p.close(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
