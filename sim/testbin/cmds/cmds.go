// Package cmds runs the commands a test binary or cmd/zooid-child
// stands in for (fake-agent, mcp, demo-agent, echo, netjail). It imports no testing package, so
// the child stays light.
package cmds

import (
	"os"

	"github.com/zooid-dev/zooid/fakeagent"
	"github.com/zooid-dev/zooid/internal/echo"
	"github.com/zooid-dev/zooid/internal/netjail"
	"github.com/zooid-dev/zooid/zooid/bridge"
	"github.com/zooid-dev/zooid/zooid/demoagent"
)

// Run runs the command args[1] names with the rest of args and returns its
// exit code; ok is false when args name none of them.
func Run(args []string) (code int, ok bool) {
	if len(args) < 2 {
		return 0, false
	}
	switch args[1] {
	case "fake-agent":
		return fakeagent.Main(args[2:], os.Stdin, os.Stdout, os.Stderr), true
	case "mcp":
		return bridge.Main(args[2:], os.Stdin, os.Stdout, os.Stderr), true
	case "demo-agent":
		return demoagent.Main(args[2:], os.Stdin, os.Stdout, os.Stderr), true
	case "echo":
		return echo.Main(args[2:], os.Stderr), true
	case "netjail":
		return netjail.Main(args[2:], os.Stderr), true
	}
	return 0, false
}
