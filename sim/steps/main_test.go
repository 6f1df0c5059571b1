package steps

import (
	"testing"

	"github.com/zooid-dev/zooid/sim/testbin"
)

// TestMain lets the test binary stand in for the zooid command where a test
// starts it (the daemon run as its own process); agents and their MCP bridge
// run as the lighter stand-in sim/standin builds, which it removes at the end.
func TestMain(m *testing.M) { testbin.Main(m) }
