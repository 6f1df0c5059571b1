//go:build linux

package fakeagent

import (
	"fmt"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// ptraceAttach attaches to pid as a debugger would (PTRACE_SEIZE, which
// does not stop it) and, once attached, stops it for a moment to detach
// cleanly. All on one OS thread: a tracee belongs to the thread that
// seized it.
func ptraceAttach(pid int) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.PtraceSeize(pid); err != nil {
		return fmt.Errorf("ptrace(PTRACE_SEIZE, %d): %w", pid, err)
	}
	if err := unix.PtraceInterrupt(pid); err != nil {
		return fmt.Errorf("attached to %d, then ptrace(PTRACE_INTERRUPT): %w", pid, err)
	}
	// The interrupted thread reports its stop to its tracer; detaching
	// needs it stopped.
	deadline := time.Now().Add(5 * time.Second)
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(pid, &ws, unix.WALL|unix.WNOHANG, nil)
		if err != nil {
			return fmt.Errorf("attached to %d, then waiting for its stop: %w", pid, err)
		}
		if got == pid {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("attached to %d, which did not stop to be detached", pid)
		}
		time.Sleep(time.Millisecond)
	}
	if err := unix.PtraceDetach(pid); err != nil {
		return fmt.Errorf("attached to %d, then ptrace(PTRACE_DETACH): %w", pid, err)
	}
	return nil
}
