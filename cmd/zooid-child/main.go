// Command child runs the commands the harness starts as child processes
// (fake-agent, mcp, echo) without the weight of a test binary: a test binary
// runs every package init it links (godog, testcontainers, jsonschema) at
// each start, 141 ms of CPU against this binary's 52 ms (docs/performance.md),
// and a Synapse pass starts hundreds of them. sim/standin builds it once per
// test binary.
package main

import (
	"fmt"
	"os"

	"github.com/zooid-dev/zooid/sim/testbin/cmds"
)

func main() {
	if code, ok := cmds.Run(os.Args); ok {
		os.Exit(code)
	}
	fmt.Fprintln(os.Stderr, "usage: child fake-agent|mcp|sandbox|echo|netjail [flags]")
	os.Exit(2)
}
