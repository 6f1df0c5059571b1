// Package testbin lets a test binary stand in for the commands the daemon
// starts, so a test runs them as real child processes without a build step:
// the daemon under test starts its agents as `<test binary> fake-agent …`
// and their MCP bridge as `<test binary> mcp …`, as it would run zooid-sim
// and zooid (and `zooid bench` its cross-process echo as `<test binary> echo …`). Test support: only _test.go files import it.
package testbin

import (
	"os"
	"testing"

	"github.com/zooid-dev/zooid/sim/standin"
	"github.com/zooid-dev/zooid/sim/testbin/cmds"
)

// Main is a TestMain: when the binary was started as `fake-agent …`,
// `mcp …` or `echo …` it runs that command and exits with its code; otherwise it runs the
// tests, removes the stand-in they ran children as (sim/standin), if one was
// built, and exits with the tests' code.
func Main(m *testing.M) {
	if code, ok := cmds.Run(os.Args); ok {
		os.Exit(code)
	}
	code := m.Run()
	standin.Remove()
	os.Exit(code)
}
