// Package cli is the zooid-sim command: the test harness's entry points
// (the feature runner, the fake homeserver, the model doubles, the scripted
// agent, the benchmarks, replay and its report), kept out of the daemon's
// binary so production links none of the harness, the test doubles, godog,
// testcontainers or the Docker client. `zooid sim|fakehs|replay|…` execs
// zooid-sim with the same arguments. It is a package rather than
// cmd/zooid-sim's main so the daemon's end-to-end test can play both
// binaries from one test executable.
package cli

import (
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/zooid-dev/zooid/internal/echo"
	"github.com/zooid-dev/zooid/internal/netjail"
	"github.com/zooid-dev/zooid/zooid/bridge"
	"github.com/zooid-dev/zooid/zooid/demoagent"
	"github.com/zooid-dev/zooid/zooid/sandbox"
)

type subcommand struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

var subcommands = map[string]subcommand{
	"sim":         {"run the Gherkin feature suite against a homeserver", cmdSim},
	"fakehs":      {"run the fake Matrix homeserver standalone", cmdFakehs},
	"modeldouble": {"run scripted model APIs (Anthropic, OpenAI, Gemini) standalone, for real agents", cmdModelDouble},
	"fake-agent":  {"a scripted ACP agent driven by a test controller", cmdFakeAgent},
	"bench":       {"measure the ratios of docs/performance.md (go test benchmarks, side by side)", cmdBench},
	"replay":      {"replay a recording with its trace through today's daemon and diff: zooid replay scenarios/x.json (exit 0 reproduced, 1 diverged)", cmdReplay},
	"report":      {"render a recording and its trace as one HTML page: zooid report --html OUT.html scenarios/x.json", cmdReport},
	// The harness starts its agents' bridge as `<this binary> mcp`, as the daemon
	// would start `zooid mcp`.
	"mcp": {"the Zooid MCP stdio bridge of the harness's agents (internal)", cmdMCP},
	// and an agent on the demo preset as `<this binary> demo-agent`.
	"demo-agent": {"the demo agent of the harness's agents on preset demo (internal)", cmdDemoAgent},
	// bench's cross-process floor: a unix-socket line echo in a process of its own.
	"echo": {"echo lines on a unix socket: the far end of bench's cross-process floor (internal)", cmdEcho},
	// Real agents of the harness run in a network namespace with only a loopback
	// and their model double's port (internal/netjail).
	"netjail": {"run a command in a network namespace with only loopback and the forwarded ports (internal; root)", cmdNetjail},
}

func init() {
	// The daemon under test starts its sandboxed agents through the bridge's
	// program, as `zooid sandbox` (here, not in the literal: it runs Main).
	subcommands["sandbox"] = subcommand{"start an agent held by its sandbox (internal)", cmdSandbox}
}

// Commands lists zooid-sim's commands, sorted.
func Commands() []string {
	names := make([]string, 0, len(subcommands))
	for n := range subcommands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Main runs `zooid-sim <command> args...` and returns the exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	sc, ok := subcommands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "zooid-sim: unknown command %q\n\n", args[0])
		usage(stderr)
		return 2
	}
	return sc.run(args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: zooid-sim <command> [flags]   (also reached as `zooid <command>`)\n\ncommands:")
	for _, n := range Commands() {
		fmt.Fprintf(w, "  %-11s %s\n", n, subcommands[n].summary)
	}
}

func cmdEcho(args []string, _, stderr io.Writer) int { return echo.Main(args, stderr) }

func cmdNetjail(args []string, _, stderr io.Writer) int { return netjail.Main(args, stderr) }

// cmdSandbox starts a sandboxed agent. The scripted agent is this binary
// too: it goes on in-process once the whole process is sandboxed, sparing
// an exec that costs as much as the agent's own start.
func cmdSandbox(args []string, stdout, stderr io.Writer) int {
	if rest, ok := sandbox.Itself(args); ok {
		if err := sandbox.Enter(); err != nil {
			fmt.Fprintf(stderr, "zooid-sim sandbox: %v\n", err)
			return 126
		}
		return Main(rest, stdout, stderr)
	}
	return sandbox.Main(args, stderr)
}

func cmdMCP(args []string, stdout, stderr io.Writer) int {
	return bridge.Main(args, os.Stdin, stdout, stderr)
}

func cmdDemoAgent(args []string, stdout, stderr io.Writer) int {
	return demoagent.Main(args, os.Stdin, stdout, stderr)
}
