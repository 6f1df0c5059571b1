package cli

import (
	"bytes"
	"os"
	"syscall"
	"testing"
	"time"
)

// TestInterruptibleEndsOnTheFirstSignal: a SIGINT ends the context and says
// what the command does about it; a second one is no longer caught (not sent
// here: it would end the test binary).
func TestInterruptibleEndsOnTheFirstSignal(t *testing.T) {
	var stderr bytes.Buffer
	ctx, stop := interruptible(&stderr, "zooid sim", "stopping the running scenarios")
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the context did not end within 30 s of a SIGINT")
	}
	// The message is written before the context ends.
	if got, want := stderr.String(), "zooid sim: interrupt: stopping the running scenarios (again to quit at once)\n"; got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}
}

// TestInterruptibleStopWithoutASignal: stop ends the context without a word.
func TestInterruptibleStopWithoutASignal(t *testing.T) {
	var stderr bytes.Buffer
	ctx, stop := interruptible(&stderr, "zooid bench", "stopping the measurements")
	stop()
	if ctx.Err() == nil {
		t.Error("the context is still live after stop")
	}
	if stderr.Len() != 0 {
		t.Errorf("stop without a signal wrote %q", stderr.String())
	}
}
