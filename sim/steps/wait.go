package steps

import (
	"context"
	"fmt"
	"time"
)

// eventually polls check until it reports done, or fails after the run's wait
// bound with what was last seen, or at once when the run is interrupted. It
// never sleeps longer than the poll step, so a step costs as long as the
// behaviour takes and no more.
func (w *world) eventually(ctx context.Context, what string, check func() (done bool, seen string, err error)) error {
	return w.eventuallyWithin(ctx, w.waitBound(), what, check)
}

// eventuallyWithin is eventually with a bound of its own, for the few waits
// that are heavier than a step's ordinary one (each says why where it calls).
func (w *world) eventuallyWithin(ctx context.Context, bound time.Duration, what string, check func() (done bool, seen string, err error)) error {
	ctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	delay := 5 * time.Millisecond
	var seen string
	for {
		done, s, err := check()
		switch {
		case err == nil && done:
			return nil
		case w.run.interrupted():
			// Whatever check saw, it saw it with a cancelled context.
			return fmt.Errorf("%s: %w; saw %s", what, errInterrupted, seen)
		case err != nil:
			return fmt.Errorf("%s: %w", what, err)
		}
		seen = s
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			if w.run.interrupted() {
				return fmt.Errorf("%s: %w; saw %s", what, errInterrupted, seen)
			}
			return fmt.Errorf("%s: not within %s; saw %s", what, bound, seen)
		case <-t.C:
		}
		delay = min(delay*2, 100*time.Millisecond)
	}
}
