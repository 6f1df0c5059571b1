package daemon

import (
	"os"
	"testing"

	"github.com/zooid-dev/zooid/zooid/bridge"
	"github.com/zooid-dev/zooid/zooid/sandbox"
)

// TestMain makes the test binary its own bridge: re-executed as `<test> mcp
// --socket …` it runs the real `zooid mcp` code path, so the MCP server entry
// a test hands an adapter starts what the daemon's would; as `<test> sandbox
// -- …` it is the wrapper that starts a sandboxed agent.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "mcp" {
		os.Exit(bridge.Main(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == "sandbox" {
		os.Exit(sandbox.Main(os.Args[2:], os.Stderr))
	}
	os.Exit(m.Run())
}
