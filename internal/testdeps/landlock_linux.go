//go:build linux

package testdeps

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// probeLandlock asks the kernel for its Landlock ABI version.
func probeLandlock() error {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	if errno != 0 {
		return fmt.Errorf("landlock_create_ruleset: %w", errno)
	}
	if int(v) < 1 {
		return fmt.Errorf("Landlock ABI %d", int(v))
	}
	return nil
}
