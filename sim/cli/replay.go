package cli

import (
	"fmt"
	"io"
	"os"

	"github.com/zooid-dev/zooid/sim/replay"
)

// cmdReplay plays a recording that carries the daemon's trace through
// today's daemon on a fresh fake homeserver and compares the traces: exit 0
// when they agree, 1 with the differences, 2 on bad input, 3 when the replay
// could not run. The replayed agents are this binary again
// (`zooid-sim fake-agent …`).
func cmdReplay(args []string, stdout, stderr io.Writer) int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "zooid replay: finding this executable for the replayed agents: %v\n", err)
		return replay.ExitFailed
	}
	return replay.MainWith(args, stdout, stderr, replay.Options{AgentCommand: []string{exe, "fake-agent"}})
}
