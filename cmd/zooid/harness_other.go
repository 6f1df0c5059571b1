//go:build !unix

package main

import (
	"errors"
	"os"
	"os/exec"
)

// execHarness runs zooid-sim as a child with zooid's stdio and exits with its
// status: there is no exec(2) to replace the process with.
func execHarness(path string, args []string) error {
	cmd := exec.Command(path, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		os.Exit(exit.ExitCode())
	}
	if err != nil {
		return err
	}
	os.Exit(0)
	return nil
}
