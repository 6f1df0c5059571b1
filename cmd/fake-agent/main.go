// Command fake-agent is the scripted ACP agent (fakeagent) as a program
// of its own, small enough to build statically (CGO_ENABLED=0) and put alone
// in a scratch image: the container runtime's tests run it there.
package main

import (
	"os"

	"github.com/zooid-dev/zooid/fakeagent"
)

func main() {
	os.Exit(fakeagent.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
