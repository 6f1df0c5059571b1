package main

import (
	"io"

	"github.com/zooid-dev/zooid/zooid/sandbox"
)

// cmdSandbox is `zooid sandbox -- COMMAND ARGS…`, which the daemon starts a
// local agent through: it applies the agent's Landlock policy (from
// $ZOOID_SANDBOX) to itself and execs the agent, which then cannot leave it.
func cmdSandbox(args []string, _, stderr io.Writer) int {
	return sandbox.Main(args, stderr)
}
