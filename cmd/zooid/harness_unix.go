//go:build unix

package main

import (
	"os"
	"syscall"
)

// execHarness replaces the process image, so zooid-sim gets zooid's stdio,
// signals and exit status as if it had been started directly.
func execHarness(path string, args []string) error {
	return syscall.Exec(path, append([]string{path}, args...), os.Environ())
}
