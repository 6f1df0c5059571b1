// Command zooid-sim is Zooid's test harness: the feature runner (sim), the
// standalone fake homeserver (fakehs) and the scripted agent (fake-agent). It is
// a binary of its own so the daemon, cmd/zooid, links none of it; `zooid sim`
// and the other harness commands exec it.
package main

import (
	"os"

	"github.com/zooid-dev/zooid/sim/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
