// Command child runs the commands the harness starts as child processes
// (fake-agent, mcp, echo) without the weight of a test binary: a test binary
// runs every package init it links (godog, testcontainers, jsonschema) at
// each start, 141 ms of CPU against this binary's 52 ms (docs/performance.md),
// and a Synapse pass starts hundreds of them. steps builds it once per test
// process (steps/childexe.go).
package main

import (
	"fmt"
	"os"

	"github.com/zooid-dev/zooid/internal/echo"
	"github.com/zooid-dev/zooid/steps/fakeagent"
	"github.com/zooid-dev/zooid/zooid/bridge"
)

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "fake-agent":
			os.Exit(fakeagent.Main(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
		case "mcp":
			os.Exit(bridge.Main(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
		case "echo":
			os.Exit(echo.Main(os.Args[2:], os.Stderr))
		}
	}
	fmt.Fprintln(os.Stderr, "usage: child fake-agent|mcp|echo [flags]")
	os.Exit(2)
}
