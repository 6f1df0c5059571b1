// Command zooid is the Zooid daemon and its companions: the config check, the
// appservice registration, the MCP bridge agents start and the room recorder.
// The test harness (sim, fakehs, modeldouble, fake-agent, bench, replay,
// report) is the separate zooid-sim binary, which `zooid <that command>`
// execs (harness.go).
package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
)

// subcommand is one `zooid <name>` entry point. It receives the arguments after
// its name and returns the process exit code.
type subcommand struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

// subcommands lists every entry point; each lives in a file of its own name.
var subcommands = map[string]subcommand{
	"run":          {"run the daemon: zooid run --config zooid.yaml", cmdRun},
	"check":        {"validate a config file: zooid check --config zooid.yaml", cmdCheck},
	"registration": {"print the appservice registration for a config: zooid registration --config zooid.yaml --url http://127.0.0.1:9000", cmdRegistration},
	"mcp":          {"the Zooid MCP stdio bridge agents start (internal; put into session/new by the daemon)", cmdMCP},
	"demo-agent":   {"the demo agent, an ACP agent without a model (preset: demo starts it; try it before giving an agent a model key)", cmdDemoAgent},
	"record":       {"record a room as a replayable scenario: ZOOID_RECORD_TOKEN=... zooid record --homeserver URL --room '#ops:server' > scenarios/x.json", cmdRecord},
	"sandbox":      {"start an agent held by its sandbox (internal; the daemon runs it)", cmdSandbox},
}

// hidden are the commands the usage leaves out: the daemon runs them, nobody else.
var hidden = map[string]bool{"sandbox": true}

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	if slices.Contains(harnessCommands, args[0]) {
		return runHarness(args, stderr)
	}
	sc, ok := subcommands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "zooid: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	return sc.run(args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: zooid <command> [flags]\n\ncommands:")
	names := make([]string, 0, len(subcommands))
	for n := range subcommands {
		if !hidden[n] {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-13s %s\n", n, subcommands[n].summary)
	}
	fmt.Fprintf(w, "\ntest harness (the separate %s binary):\n", harnessBinary)
	for _, n := range harnessCommands {
		fmt.Fprintf(w, "  %s\n", n)
	}
}
