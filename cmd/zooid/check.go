package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/preflight"
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
	if *strict && len(findings) > 0 {
		fmt.Fprintf(stderr, "zooid check: %v\n", preflight.ErrWarnings)
		return 1
	}
	return 0
}
