package steps

import (
	"os"
	"testing"

	"github.com/zooid-dev/zooid/steps/fakeagent"
	"github.com/zooid-dev/zooid/zooid/bridge"
)

// TestMain lets the test binary stand in for the zooid command: the daemon
// starts agents as `<this binary> fake-agent …` and their MCP bridge as
// `<this binary> mcp …`, exactly as it would run the real binary.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "fake-agent":
			os.Exit(fakeagent.Main(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
		case "mcp":
			os.Exit(bridge.Main(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
		}
	}
	os.Exit(m.Run())
}
