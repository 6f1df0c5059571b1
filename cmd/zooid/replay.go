package main

import (
	"fmt"
	"io"
	"os"

	"github.com/zooid-dev/zooid/replay"
	"github.com/zooid-dev/zooid/steps/fakeagent"
)

// cmdReplay plays a recording that carries the daemon's trace through
// today's daemon on a fresh fake homeserver and compares the traces: exit 0
// when they agree, 1 with the differences, 2 on bad input, 3 when the replay
// could not run. The replayed agents are this binary again
// (`zooid replay fake-agent …`), so a replay needs no zooid-sim.
func cmdReplay(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "fake-agent" {
		return fakeagent.Main(args[1:], os.Stdin, stdout, stderr)
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "zooid replay: finding this executable for the replayed agents: %v\n", err)
		return replay.ExitFailed
	}
	return replay.MainWith(args, stdout, stderr, replay.Options{AgentCommand: []string{exe, "replay"}})
}
