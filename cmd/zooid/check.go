package main

import (
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/preflight"
	"github.com/zooid-dev/zooid/zooid/sandbox"
)

// cmdCheck validates a config file without starting anything: every problem
// is printed as file:line: path: reason, one per line. A config that passes
// may still meet trouble at start (an agent's program missing, a registration
// that does not match): those are printed as warnings with the fix, the same
// ones `zooid run` logs, and fail the check only with --strict.
func cmdCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("zooid check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "zooid.yaml", "path to zooid.yaml")
	reg := fs.String("registration", "", "the appservice registration the homeserver holds, to compare with the config (default: "+preflight.DefaultRegistration+" beside zooid.yaml, if there is one)")
	strict := fs.Bool("strict", false, "exit 1 when there are warnings too")
	var others []string
	fs.Func("other-registration", "another appservice's registration on the same homeserver (another daemon's, a bridge's; repeatable): refused when its namespaces overlap this daemon's", func(v string) error {
		others = append(others, v)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "zooid check: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	cfg, err := config.Load(*path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	opts := preflight.Options{Registration: *reg}
	if err := preflight.Overlaps(cfg, preflight.RegistrationFile(cfg, opts), others); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cfg.File, err)
		return 1
	}
	findings := preflight.Check(cfg, opts)
	for _, f := range findings {
		fmt.Fprintf(stderr, "%s: warning: %s\n", cfg.File, f)
	}
	fmt.Fprintf(stdout, "ok: %d agents, %d transports", len(cfg.Agents), len(cfg.Transports))
	switch n := len(findings); {
	case n == 1:
		fmt.Fprint(stdout, " (1 warning)")
	case n > 1:
		fmt.Fprintf(stdout, " (%d warnings)", n)
	}
	if file := preflight.RegistrationFile(cfg, opts); file != "" {
		fmt.Fprintf(stdout, "; compared with the registration %s", file)
	}
	fmt.Fprintln(stdout)
	for _, line := range sandboxReport(cfg, sandbox.ABI()) {
		fmt.Fprintln(stdout, line)
	}
	if *strict && len(findings) > 0 {
		fmt.Fprintf(stderr, "zooid check: %v\n", preflight.ErrWarnings)
		return 1
	}
	return 0
}

// sandboxReport says, for a kernel with Landlock ABI abi, what each agent
// will and will not be held to on this machine.
func sandboxReport(cfg *config.Config, abi int) []string {
	head := fmt.Sprintf("sandbox: this kernel has Landlock ABI %d (ABI %d holds agents to all of it)", abi, sandbox.ABIWanted)
	if abi == 0 {
		head = "sandbox: this kernel has no Landlock: agents with sandbox landlock run unsandboxed"
	}
	lines := []string{head}
	for _, a := range cfg.Agents {
		switch {
		case a.Runtime == config.RuntimeDocker:
			lines = append(lines, fmt.Sprintf("  %s: runtime docker: its container is its sandbox", a.Name))
		case a.Sandbox == nil || a.Sandbox.Mode == sandbox.None:
			lines = append(lines, fmt.Sprintf("  %s: sandbox none: it can read and write everything its user can, zooid.yaml and the state dir included, and ptrace and signal the daemon", a.Name))
		default:
			held, missing := sandbox.Enforcement(abi, a.Sandbox.Connect != nil || a.Sandbox.Bind != nil)
			line := fmt.Sprintf("  %s: landlock: held to %s", a.Name, strings.Join(held, "; "))
			if len(held) == 0 {
				line = fmt.Sprintf("  %s: landlock, but held to nothing here", a.Name)
			}
			if len(missing) > 0 {
				line += "; not held to, on this kernel: " + strings.Join(missing, "; ")
			}
			lines = append(lines, line)
		}
	}
	return lines
}
