package synapse

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
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
func (r *recordingTB) Fatal(args ...any) {
	r.ended = "failed: " + fmt.Sprint(args...)
	runtime.Goexit()
}
func (r *recordingTB) Skip(args ...any) {
	r.ended = "skipped: " + fmt.Sprint(args...)
	runtime.Goexit()
}

// Asking for Synapse, or for an engine (CI=true, ZOOID_TEST_DOCKER=1), and
// not getting it is a failure; not asking, a skip with the way to get one.
func TestNoEngineFailsOnlyWhenSynapseWasAskedFor(t *testing.T) {
	real := engineHealth
	engineHealth = func() error { return errors.New("no engine here") }
	defer func() { engineHealth = real }()
	cases := []struct{ homeserver, ci, docker, want string }{
		{"synapse", "", "", "failed: ZOOID_TEST_HOMESERVER=synapse, but no Docker engine answers"},
		{"", "true", "", "failed: CI=true asks for a Docker engine"},
		{"", "", "1", "failed: ZOOID_TEST_DOCKER=1 asks for a Docker engine"},
		{"", "", "", "skipped: left out: needs a Docker engine, which is missing here: no engine here (as root: docker/engine.sh start;"},
	}
	for _, c := range cases {
		t.Setenv(RequestEnv, c.homeserver)
		t.Setenv("CI", c.ci)
		t.Setenv("ZOOID_TEST_DOCKER", c.docker)
		r := &recordingTB{TB: t}
		done := make(chan struct{})
		go func() {
			defer close(done)
			requireEngine(r)
		}()
		<-done
		if !strings.HasPrefix(r.ended, c.want) {
			t.Errorf("%+v without an engine: %q, want it to start %q", c, r.ended, c.want)
		}
	}
}
