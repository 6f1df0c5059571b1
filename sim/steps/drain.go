package steps

import (
	"context"
	"fmt"

	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/internal/pushdrain"
)

// drain answers a shared homeserver's appservice pushes while no daemon
// holds a slot's push port. A real homeserver queues every event of the
// appservice's rooms and retries with growing backoff while nobody listens,
// so without it a scenario's daemon would be handed the generated history
// (and the previous scenario's leftovers) as if they were new, and
// would start late behind the backoff.
type drain struct{ *pushdrain.Drain }

// startDrain serves pushes on a listener of the held socket, refusing any
// without the registration's hs_token.
func startDrain(sock *pushdrain.Socket, hsToken string) (*drain, error) {
	d, err := pushdrain.StartOn(sock, hsToken)
	if err != nil {
		return nil, err
	}
	return &drain{d}, nil
}

// waitFor blocks until the homeserver has pushed the event here.
func (d *drain) waitFor(ctx context.Context, e id.EventID) error {
	if _, err := d.Wait(ctx, e); err != nil {
		return fmt.Errorf("waiting for the homeserver to push %s before the daemon starts: %w", e, err)
	}
	return nil
}

// stop stops serving; the socket stays bound for the daemon.
func (d *drain) stop() error {
	if err := d.Stop(); err != nil {
		return fmt.Errorf("stopping the push drain: %w", err)
	}
	return nil
}
