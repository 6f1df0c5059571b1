package synapse

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
)

// recordingTB notes how a test would have ended, without ending the real one.
type recordingTB struct {
	testing.TB
	ended string
}

func (r *recordingTB) Helper() {}
func (r *recordingTB) Fatalf(format string, args ...any) {
	r.ended = "failed: " + fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r *recordingTB) Skipf(format string, args ...any) {
	r.ended = "skipped: " + fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// Asking for Synapse and not getting it is a failure; not asking, a skip.
func TestNoEngineFailsOnlyWhenSynapseWasAskedFor(t *testing.T) {
	real := engineHealth
	engineHealth = func() error { return errors.New("no engine here") }
	defer func() { engineHealth = real }()
	for asked, want := range map[string]string{"synapse": "failed: ", "": "skipped: "} {
		t.Setenv(RequestEnv, asked)
		r := &recordingTB{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			requireEngine(r)
		}()
		<-done
		if len(r.ended) < len(want) || r.ended[:len(want)] != want {
			t.Errorf("%s=%q without an engine: %q, want it %s…", RequestEnv, asked, r.ended, want)
		}
	}
}
