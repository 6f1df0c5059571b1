package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// harnessBinary is the test harness's binary (cmd/zooid-sim). It is separate so
// the daemon links none of godog, testcontainers or the Docker client; a test
// holds the daemon's dependency list to that.
const harnessBinary = "zooid-sim"

// harnessCommands are the `zooid` commands zooid-sim serves; zooid execs it with
// the same arguments, as git runs its external subcommands.
var harnessCommands = []string{"sim", "fakehs", "modeldouble", "fake-agent", "bench", "replay", "report"}

// findHarness returns zooid-sim next to the executable self, else the one on
// PATH (found by lookPath). Next to self comes first so a build directory holding
// both binaries uses its own pair.
func findHarness(self string, lookPath func(string) (string, error)) (string, error) {
	if self != "" {
		p := filepath.Join(filepath.Dir(self), harnessBinary)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := lookPath(harnessBinary); err == nil {
		return p, nil
	}
	where := "on PATH"
	build := "go build -tags goolm -o zooid-sim ./cmd/zooid-sim"
	if self != "" {
		where = "next to " + self + " or on PATH"
		build = "go build -tags goolm -o " + filepath.Join(filepath.Dir(self), harnessBinary) + " ./cmd/zooid-sim"
	}
	return "", errors.New("the test harness is the separate " + harnessBinary + " binary, found neither " + where +
		"; build it from the Zooid repository with `" + build + "`, or run ./scripts/sim.sh there")
}

// runHarness replaces this process with `zooid-sim args...`; it returns only
// when that fails.
func runHarness(args []string, stderr io.Writer) int {
	self, err := os.Executable()
	if err != nil {
		self = ""
	}
	path, err := findHarness(self, exec.LookPath)
	if err != nil {
		fmt.Fprintf(stderr, "zooid %s: %v\n", args[0], err)
		return 1
	}
	if err := execHarness(path, args); err != nil {
		fmt.Fprintf(stderr, "zooid %s: running %s: %v\n", args[0], path, err)
		return 1
	}
	return 0
}
