package synapse

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// Federate starts one Synapse per element of servers, each with its own
// options (its appservices, say), federating with one another through a test
// CA made for them (WithFederation): server names localhost:PORT, every
// listener on 127.0.0.1. The servers start at once; if one fails, none is
// left running.
//
// Host networking and loopback rather than a Docker network of their own:
// tests talk only to loopback, and the engine CI starts has no bridge network
// (see start).
func Federate(ctx context.Context, servers ...[]Option) ([]*Container, error) {
	if len(servers) < 2 {
		return nil, fmt.Errorf("synapse: federating %d servers: want at least 2", len(servers))
	}
	ca, err := NewTestCA()
	if err != nil {
		return nil, fmt.Errorf("synapse: %w", err)
	}
	ports := make([]int, len(servers))
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return nil, fmt.Errorf("synapse: federation port: %w", err)
		}
	}
	out := make([]*Container, len(servers))
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, opts := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = Run(ctx, append([]Option{WithFederation(ca, ports[i])}, opts...)...)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, c := range out {
			if c != nil {
				_ = c.Terminate(context.WithoutCancel(ctx))
			}
		}
		return nil, fmt.Errorf("synapse: federating %d servers: %w", len(servers), err)
	}
	return out, nil
}
