// Package standin is the program the harness runs the daemon's children as:
// scripted agents (fake-agent), their MCP bridge (mcp), the sandbox wrapper
// (sandbox) and netjail, the commands of sim/testbin/cmds. Under `zooid sim`
// and `zooid replay` it is the running executable, which serves them. In a
// test binary it is cmd/zooid-child, built once per process into a
// temporary directory (Remove removes it): re-executing the test binary
// itself ran all its package inits at every agent and bridge start (141 ms
// of CPU each against 52 ms for sim/steps' binary), on a 2-core machine
// where a Synapse pass starts hundreds of them.
//
// It is built without the race detector, even for a test binary built with
// it: under the detector each start took 35 ms of CPU against 8, and the
// feature pass on the degraded profile (README's flake hunt, under the
// detector) took 165 s of CPU with a race-built stand-in against 112,
// sim/replay's tests 53 s with their own binary against 40 (issue 38's goal
// 4, docs/performance.md). What the detector watches in those tests is the
// daemon, in-process. The bridge and the sandbox wrapper are watched under
// it where they are tested: zooid/daemon's and zooid/sandbox's test binaries
// run them as themselves re-executed (bridge.Main, sandbox.Main), and the
// fake agent by fakeagent's tests.
package standin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

// Package is the stand-in's import path.
const Package = "github.com/zooid-dev/zooid/cmd/zooid-child"

var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Path is the program to run the daemon's children as: the stand-in in a
// test binary (built on first use), this executable elsewhere.
func Path() (string, error) {
	if !testing.Testing() {
		return os.Executable()
	}
	built.once.Do(func() { built.dir, built.path, built.err = build() })
	return built.path, built.err
}

// build builds Package, without -race (see the package comment).
func build() (dir, path string, err error) {
	dir, err = os.MkdirTemp("", "zooid-child-")
	if err != nil {
		return "", "", fmt.Errorf("a directory for the agents' stand-in: %w", err)
	}
	path = filepath.Join(dir, "zooid-child")
	args := []string{"build", "-o", path, Package}
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

// Remove removes the stand-in Path built, if it built one; sim/testbin.Main
// calls it once a test binary's tests are done.
func Remove() {
	if built.dir != "" {
		_ = os.RemoveAll(built.dir)
	}
}
