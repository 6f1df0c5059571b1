package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/zooid-dev/zooid/sim/cli"
)

// harnessModules are the test harness's dependencies the daemon must not
// link: the harness itself, the test doubles, the libraries only they use,
// and package testing.
var harnessModules = []string{
	"github.com/cucumber/godog",
	"github.com/testcontainers/",
	"github.com/moby/",
	"github.com/docker/",
	"github.com/zooid-dev/zooid/sim",
	"github.com/zooid-dev/zooid/fakehs",
	"github.com/zooid-dev/zooid/fakeagent",
	"github.com/zooid-dev/zooid/modeldouble",
	"github.com/zooid-dev/zooid/busyroom",
	"github.com/zooid-dev/zooid/docker",
	"testing",
}

// goList runs `go list -deps` on a package of this module.
func goList(t *testing.T, pkg string) []string {
	t.Helper()
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		if goTool, err = exec.LookPath("go"); err != nil {
			t.Fatalf("no go tool to list dependencies with: %v", err)
		}
	}
	var stderr bytes.Buffer
	cmd := exec.Command(goTool, "list", "-tags", "goolm", "-deps", pkg)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr.String())
	}
	return strings.Fields(string(out))
}

func harnessDeps(deps []string) []string {
	var bad []string
	for _, d := range deps {
		for _, m := range harnessModules {
			// A module prefix ends in "/"; a package matches itself and
			// what lies under it.
			if d == m || strings.HasPrefix(d, m) && (strings.HasSuffix(m, "/") || d[len(m)] == '/') {
				bad = append(bad, d)
			}
		}
	}
	return bad
}

// TestDaemonLinksNoHarness holds the production binary to its own code: the
// harness lives in zooid-sim, which does link it (the check can fail).
func TestDaemonLinksNoHarness(t *testing.T) {
	if bad := harnessDeps(goList(t, ".")); len(bad) > 0 {
		t.Errorf("cmd/zooid links %d harness packages, e.g. %s", len(bad), strings.Join(bad[:min(5, len(bad))], ", "))
	}
	sim := harnessDeps(goList(t, "../zooid-sim"))
	for _, want := range []string{"github.com/cucumber/godog", "github.com/zooid-dev/zooid/fakehs", "github.com/zooid-dev/zooid/sim/replay", "github.com/zooid-dev/zooid/fakeagent", "testing"} {
		if !slices.Contains(sim, want) {
			t.Errorf("cmd/zooid-sim does not link %s (%v): the check above proves nothing for it", want, sim)
		}
	}
}

// Every command zooid hands to zooid-sim is one zooid-sim has.
func TestHarnessCommandsAreZooidSims(t *testing.T) {
	for _, c := range harnessCommands {
		if !slices.Contains(cli.Commands(), c) {
			t.Errorf("zooid forwards %q, which zooid-sim (%v) does not have", c, cli.Commands())
		}
		if _, own := subcommands[c]; own {
			t.Errorf("%q is both a daemon command and forwarded to zooid-sim", c)
		}
	}
}

func TestFindHarness(t *testing.T) {
	bin, onPath := t.TempDir(), t.TempDir()
	self := filepath.Join(bin, "zooid")
	next := filepath.Join(bin, harnessBinary)
	pathSim := filepath.Join(onPath, harnessBinary)
	lookPath := func(name string) (string, error) {
		if _, err := os.Stat(pathSim); err == nil && name == harnessBinary {
			return pathSim, nil
		}
		return "", errors.New("not found")
	}

	_, err := findHarness(self, lookPath)
	if err == nil || !strings.Contains(err.Error(), "go build -tags goolm -o "+next+" ./cmd/zooid-sim") || !strings.Contains(err.Error(), "./scripts/sim.sh") {
		t.Fatalf("no zooid-sim anywhere: err %v, want it to say how to build it", err)
	}
	writeExecutable(t, pathSim)
	if got, err := findHarness(self, lookPath); err != nil || got != pathSim {
		t.Fatalf("only on PATH: %q, %v; want %s", got, err, pathSim)
	}
	// A non-executable file next to zooid is not the harness.
	if err := os.WriteFile(next, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _ := findHarness(self, lookPath); got != pathSim {
		t.Fatalf("non-executable next to zooid: found %q, want %s", got, pathSim)
	}
	writeExecutable(t, next)
	if got, err := findHarness(self, lookPath); err != nil || got != next {
		t.Fatalf("next to zooid and on PATH: %q, %v; want the one next to zooid, %s", got, err, next)
	}
}

func writeExecutable(t *testing.T, path string) {
	t.Helper()
	if err := os.WriteFile(path, []byte("#!/bin/sh\nexit 0\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o700); err != nil {
		t.Fatal(err)
	}
}

// runAsZooid runs this test binary as zooid alone (no zooid-sim beside it) with
// PATH set to path, and returns exit code, stdout and stderr.
func runAsZooid(t *testing.T, path string, args ...string) (int, string, string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), execEnv+"=alone", "PATH="+path)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, stdout.String(), stderr.String()
}

// `zooid sim …` is `zooid-sim sim …`: same arguments, same stdio, its exit status.
func TestSimExecsZooidSim(t *testing.T) {
	dir := t.TempDir()
	script := "#!/bin/sh\necho \"zooid-sim $*\"\necho to-stderr >&2\nexit 3\n"
	if err := os.WriteFile(filepath.Join(dir, harnessBinary), []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runAsZooid(t, dir, "sim", "features/tasks.feature", "--tags", "@x && ~@slow")
	if code != 3 || out != "zooid-sim sim features/tasks.feature --tags @x && ~@slow\n" || errOut != "to-stderr\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q; want 3, the arguments as given, to-stderr", code, out, errOut)
	}
}

func TestSimWithoutZooidSimSaysHowToBuildIt(t *testing.T) {
	code, out, errOut := runAsZooid(t, t.TempDir(), "fakehs", "--addr", "127.0.0.1:0")
	if code != 1 || out != "" || !strings.HasPrefix(errOut, "zooid fakehs: the test harness is the separate zooid-sim binary") ||
		!strings.Contains(errOut, " ./cmd/zooid-sim`") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}
