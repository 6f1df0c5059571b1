package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/zooid-dev/zooid/zooid/config"
)

// cmdCheck validates a config file without starting anything: every problem
// is printed as file:line: path: reason, one per line.
func cmdCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("zooid check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "zooid.yaml", "path to zooid.yaml")
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
	fmt.Fprintf(stdout, "ok: %d agents, %d transports\n", len(cfg.Agents), len(cfg.Transports))
	return 0
}
