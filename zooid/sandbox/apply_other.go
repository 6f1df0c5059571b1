//go:build !linux

package sandbox

import (
	"fmt"
	"syscall"
)

// ABI is 0 off Linux: there is no Landlock.
func ABI() int { return 0 }

// restrictAndExec can restrict nothing off Linux (Enforcement(0) says so,
// and the daemon logs it at start); it execs the agent as it is.
func restrictAndExec(_ Policy, argv, env []string) error {
	return fmt.Errorf("executing %s: %w", argv[0], syscall.Exec(argv[0], argv, env))
}

// restrict can restrict nothing off Linux.
func restrict(Policy) error { return nil }
