package main

import (
	"fmt"
	"syscall"
)

// hardenProcess makes the daemon non-dumpable. Agents usually run as the same
// user, and could otherwise read the daemon's environment (and so the tokens it
// was started with) from /proc/<daemon pid>/environ. Children reset the flag
// on exec, so agents are unaffected.
func hardenProcess() error {
	const prSetDumpable = 4
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetDumpable, 0, 0); errno != 0 {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", errno)
	}
	return nil
}
