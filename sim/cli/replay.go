package cli

import (
	"io"

	"github.com/zooid-dev/zooid/sim/replay"
)

// cmdReplay plays a recording that carries the daemon's trace through
// today's daemon on a fresh fake homeserver and compares the traces: exit 0
// when they agree, 1 with the differences, 2 on bad input, 3 when the replay
// could not run. The replayed agents and their bridges are this binary again
// (`zooid-sim fake-agent …`, `zooid-sim mcp …`): replay's default outside a
// test (sim/standin).
func cmdReplay(args []string, stdout, stderr io.Writer) int {
	return replay.Main(args, stdout, stderr)
}
