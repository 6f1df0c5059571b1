package steps

import (
	"testing"

	"github.com/zooid-dev/zooid/internal/testbin"
)

// TestMain lets the test binary stand in for the zooid command: the daemon
// starts agents as `<this binary> fake-agent …` and their MCP bridge as
// `<this binary> mcp …`, exactly as it would run the real binary.
func TestMain(m *testing.M) { testbin.Main(m) }
