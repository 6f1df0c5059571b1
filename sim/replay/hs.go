package replay

import (
	"context"
	"fmt"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/internal/pushdrain"
)

// drain takes the pushes of the set-up (room creation, joins, history) so
// the daemon never sees them as live events. Unlike the steps' drain it
// does not check the hs_token.
type drain struct{ *pushdrain.Drain }

func startDrain(sock *pushdrain.Socket) (*drain, error) {
	d, err := pushdrain.StartOn(sock, "")
	if err != nil {
		return nil, err
	}
	return &drain{d}, nil
}

// waitFor blocks until every event was pushed to the drain.
func (d *drain) waitFor(ctx context.Context, evs []id.EventID, bound time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	missing, err := d.Wait(wctx, evs...)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("the homeserver did not push %s within %s before the daemon started", missing, bound)
}

func (d *drain) stop() { _ = d.Stop() }
