package steps

import (
	"context"
	"fmt"
	"time"
)

// eventually polls check until it reports done, or fails after the run's wait
// bound with what was last seen. It never sleeps longer than the poll step,
// so a step costs as long as the behaviour takes and no more.
func (w *world) eventually(ctx context.Context, what string, check func() (done bool, seen string, err error)) error {
	ctx, cancel := w.waitCtx(ctx)
	defer cancel()
	delay := 5 * time.Millisecond
	var seen string
	for {
		done, s, err := check()
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if done {
			return nil
		}
		seen = s
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s: not within %s; saw %s", what, w.waitBound(), seen)
		case <-t.C:
		}
		delay = min(delay*2, 100*time.Millisecond)
	}
}
