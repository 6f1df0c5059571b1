package steps

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/zooid-dev/zooid/fakehs"
)

// faultSteps program the fake homeserver's misbehaviour beyond a plain error
// answer (see the fault step in setupSteps) and check how the daemon retried.
func faultSteps(w *world) []stepDef {
	return []stepDef{
		{area: "setup", pattern: `^the homeserver answers (every|the next \d+) (GET|PUT|POST) (/\S+?)(?: from ([a-z0-9-]+))? with 429 M_LIMIT_EXCEEDED, retry after (\d+) ms$`,
			example: `the homeserver answers the next 3 GET /_matrix/client/v3/rooms/*/messages from agent-a with 429 M_LIMIT_EXCEEDED, retry after 300 ms`,
			doc:     "Programs a rate limit on the fake homeserver whose answers carry that retry_after_ms (the plain 429 step asks for 20 ms); @fake-only.",
			fn:      w.stepRateLimit},
		{area: "setup", pattern: `^the homeserver drops (every|the next \d+) (GET|PUT|POST) (/\S+?)(?: from ([a-z0-9-]+))? (before|after) handling (?:it|them)$`,
			example: `the homeserver drops the next 2 PUT /_matrix/client/v3/rooms/*/send/*/* from agent-a after handling them`,
			doc:     "Programs dropped connections on the fake homeserver: before handling, the request is lost; after handling, its change is made and only the answer is lost (the client can't tell which); @fake-only.",
			fn:      w.stepDrop},
		{area: "setup", pattern: `^the homeserver answers normally again$`,
			example: `the homeserver answers normally again`,
			doc:     "Removes every fault programmed so far; their hits stay counted for the checks.",
			fn:      w.stepFaultsCleared},
		{area: "setup", pattern: `^every request the homeserver refused was asked again (\d+) ms or more later$`,
			example: `every request the homeserver refused was asked again 300 ms or more later`,
			doc:     "Waits until every request a programmed fault applied to has been asked again (the same method and path), and checks each retry came at least that long after the refusal, by the fake homeserver's clock.",
			fn:      w.stepRetriedAfter},
	}
}

func (w *world) stepRateLimit(ctx context.Context, count, method, path, who, ms string) error {
	n, err := strconv.Atoi(ms)
	if err != nil {
		return fmt.Errorf("retry after %q ms: %w", ms, err)
	}
	f := fakehs.Fault{Status: 429, Errcode: "M_LIMIT_EXCEEDED", RetryAfter: time.Duration(n) * time.Millisecond}
	return w.programFault(ctx, count, method, path, who, f, "429 retry after "+ms+" ms")
}

func (w *world) stepDrop(ctx context.Context, count, method, path, who, when string) error {
	f := fakehs.Fault{Drop: when == "before", DropResponse: when == "after"}
	return w.programFault(ctx, count, method, path, who, f, "dropped "+when+" handling")
}

func (w *world) stepFaultsCleared() error {
	if len(w.faults) == 0 {
		return errors.New("no fault has been programmed")
	}
	for _, f := range w.faults {
		f.handle.Clear()
	}
	return nil
}

func (w *world) stepRetriedAfter(ctx context.Context, ms string) error {
	n, err := strconv.Atoi(ms)
	if err != nil {
		return fmt.Errorf("%q ms: %w", ms, err)
	}
	least := time.Duration(n) * time.Millisecond
	if len(w.faults) == 0 {
		return errors.New("no fault has been programmed")
	}
	err = w.eventually(ctx, "every refused request is asked again", func() (bool, string, error) {
		for _, f := range w.faults {
			for _, h := range f.handle.Log() {
				if h.RetriedAt.IsZero() {
					return false, fmt.Sprintf("%s %s (fault %s) not asked again", h.Method, h.Path, f.what), nil
				}
			}
		}
		return true, "", nil
	})
	if err != nil {
		return err
	}
	var errs []error
	hits := 0
	for _, f := range w.faults {
		for _, h := range f.handle.Log() {
			hits++
			if waited := h.RetriedAt.Sub(h.At); waited < least {
				errs = append(errs, fmt.Errorf("%s %s (fault %s) was asked again %v after the refusal, want %v or more", h.Method, h.Path, f.what, waited.Round(time.Millisecond), least))
			}
		}
	}
	if hits == 0 {
		return errors.New("no programmed fault has fired yet")
	}
	return errors.Join(errs...)
}
