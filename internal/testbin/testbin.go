// Package testbin lets a test binary stand in for the commands the daemon
// starts, so a test runs them as real child processes without a build step:
// the daemon under test starts its agents as `<test binary> fake-agent …`
// and their MCP bridge as `<test binary> mcp …`, as it would run zooid-sim
// and zooid (and `zooid bench` its cross-process echo as `<test binary> echo …`). Test support: only _test.go files import it.
package testbin

import (
	"os"
	"testing"

	"github.com/zooid-dev/zooid/internal/echo"
	"github.com/zooid-dev/zooid/steps/fakeagent"
	"github.com/zooid-dev/zooid/zooid/bridge"
)

// Main is a TestMain: when the binary was started as `fake-agent …`,
// `mcp …` or `echo …` it runs that command and exits with its code; otherwise it runs the
// tests, then each of after, and exits with the tests' code.
func Main(m *testing.M, after ...func()) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "fake-agent":
			os.Exit(fakeagent.Main(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
		case "mcp":
			os.Exit(bridge.Main(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
		case "echo":
			os.Exit(echo.Main(os.Args[2:], os.Stderr))
		}
	}
	code := m.Run()
	for _, f := range after {
		f()
	}
	os.Exit(code)
}
