package steps

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// childPackage is the stand-in the harness starts for agents (fake-agent)
// and their MCP bridge (mcp) in a test binary.
const childPackage = "github.com/zooid-dev/zooid/cmd/zooid-child"

var child struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// childExe is the program the harness runs agents and their bridge (and the
// sandbox wrapper and netjail) as. In a test binary it is cmd/zooid-child,
// built once per process into a temporary directory (RemoveChildExe removes
// it): re-executing the test binary itself ran all its package inits at every
// agent and bridge start, 141 ms of CPU each against 52 ms, on a 2-core
// machine where a Synapse pass starts hundreds of them. Elsewhere (zooid sim)
// it is this executable, which serves the same commands.
//
// It is built without the race detector, even for a test binary built with
// it: under the detector each start took 35 ms of CPU against 8, and the
// degraded pass (README's flake hunt, under the detector) took 165 s of CPU
// with a race-built stand-in against 112 (issue 38's goal 4,
// docs/performance.md). What the detector watches there is the daemon,
// in-process. The bridge and the sandbox wrapper are
// watched under it where they are tested: zooid/daemon's and zooid/sandbox's
// test binaries run them as themselves re-executed (bridge.Main,
// sandbox.Main), and the fake agent by its package's tests.
func childExe() (string, error) {
	if !testing.Testing() {
		return os.Executable()
	}
	child.once.Do(func() { child.dir, child.path, child.err = buildChild() })
	return child.path, child.err
}

// buildChild builds childPackage (without -race: see childExe).
func buildChild() (dir, path string, err error) {
	dir, err = os.MkdirTemp("", "zooid-child-")
	if err != nil {
		return "", "", fmt.Errorf("a directory for the agents' stand-in: %w", err)
	}
	path = filepath.Join(dir, "zooid-child")
	args := []string{"build", "-o", path, childPackage}
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		goTool = "go"
	}
	if out, err := exec.Command(goTool, args...).CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return "", "", fmt.Errorf("building the agents' stand-in (%s %v): %w\n%s", goTool, args, err, out)
	}
	return dir, path, nil
}

// RemoveChildExe removes the stand-in childExe built, if it built one; a
// test binary's TestMain calls it once its tests are done.
func RemoveChildExe() {
	if child.dir != "" {
		_ = os.RemoveAll(child.dir)
	}
}
