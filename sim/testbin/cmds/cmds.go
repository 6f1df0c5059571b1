// Package cmds runs the commands a test binary or cmd/zooid-child
// stands in for (fake-agent, mcp, demo-agent, sandbox, echo, netjail). It imports no testing package, so
// the child stays light.
package cmds

import (
	"fmt"
	"os"

	"github.com/zooid-dev/zooid/fakeagent"
	"github.com/zooid-dev/zooid/internal/echo"
	"github.com/zooid-dev/zooid/internal/netjail"
	"github.com/zooid-dev/zooid/zooid/bridge"
	"github.com/zooid-dev/zooid/zooid/demoagent"
	"github.com/zooid-dev/zooid/zooid/sandbox"
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
	case "sandbox":
		// The daemon under test starts its agents through the bridge's
		// program: `<binary> sandbox -- AGENT…`, as `zooid sandbox`. When
		// the agent is this binary too (the scripted agent), it goes on
		// in-process once the whole process is sandboxed: an exec of this
		// binary costs a scenario as much as the agent's own start.
		if rest, ok := sandbox.Itself(args[2:]); ok {
			if err := sandbox.Enter(); err != nil {
				fmt.Fprintf(os.Stderr, "sandbox: %v\n", err)
				return 126, true
			}
			return Run(append([]string{args[0]}, rest...))
		}
		return sandbox.Main(args[2:], os.Stderr), true
	case "echo":
		return echo.Main(args[2:], os.Stderr), true
	case "netjail":
		return netjail.Main(args[2:], os.Stderr), true
	}
	return 0, false
}
