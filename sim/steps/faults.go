package steps

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/zooid-dev/zooid/fakehs"
)

// Faults a scenario injects: the fake homeserver's programmed answers, each
// checked to have fired when the scenario passes, and the file that arms the
// daemon process's fault points.

// killFile is the file that arms the daemon process's fault points.
func (w *world) killFile() string { return filepath.Join(w.dir, "kill-at") }

// programFault injects f for count ("every" or "the next N") requests of
// method on path, from who when not empty; what names it in failures.
func (w *world) programFault(ctx context.Context, count, method, path, who string, f fakehs.Fault, what string) error {
	if err := w.ensureHomeserver(ctx); err != nil {
		return err
	}
	f.Method, f.PathPattern = method, path
	if count != "every" {
		f.Count, _ = strconv.Atoi(strings.TrimPrefix(count, "the next "))
	}
	if who != "" {
		if _, ok := w.agents[who]; ok {
			f.User = w.agentUser(who)
		} else if h, ok := w.humans[who]; ok {
			f.User = h.id
		} else {
			return fmt.Errorf("fault for %q: declare the user or agent first", who)
		}
	}
	h, err := w.lease.hs.injectFault(f)
	if err != nil {
		return err
	}
	w.faults = append(w.faults, &programmedFault{what: fmt.Sprintf("%s %s %s %s", count, method, path, what), handle: h})
	return nil
}

// programmedFault is a fault a step injected, kept so the scenario can show
// it fired: see stepFaultFired and faultsUsed.
type programmedFault struct {
	what   string
	handle *fakehs.FaultHandle
}

// faultsUsed is checked when a scenario has passed: a "the next N" fault must
// have fired N times and an "every" fault at least once, or the scenario
// passed without the misbehaviour it was written to survive.
func (w *world) faultsUsed() error {
	var errs []error
	for _, f := range w.faults {
		got, want := f.handle.Hits(), f.handle.Fault().Count
		switch {
		case want > 0 && got != want:
			errs = append(errs, fmt.Errorf("the fault (%s) fired %d times, want %d", f.what, got, want))
		case want == 0 && got == 0:
			errs = append(errs, fmt.Errorf("the fault (%s) never fired", f.what))
		}
	}
	for _, n := range w.agentSeq {
		if w.agents[n].real == nil {
			continue
		}
		for _, st := range w.model.Script(n).Unfired() {
			errs = append(errs, fmt.Errorf("%s's model fault (%s) never fired", n, st))
		}
	}
	return errors.Join(errs...)
}
