package cli

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/zooid-dev/zooid/sim/steps"
)

// cmdSim runs the Gherkin features against a homeserver with the daemon
// in-process and this binary as the scripted agents and MCP bridge (hence the
// fake-agent and mcp commands beside it).
func cmdSim(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: zooid sim [paths] [--homeserver fake|fake-degraded|synapse|URL] [--tags EXPR] [--format pretty|progress|junit|cucumber] [--concurrency N] [--repeat N] [--random SEED] [--report OUT.html] [--timings] [--prepare-snapshot]")
		fs.PrintDefaults()
	}
	hs := fs.String("homeserver", "", "fake (default, or $"+steps.HomeserverEnv+"), fake-degraded (fakehs with the degraded profile), synapse, or the URL of a running homeserver (appservice settings from the ZOOID_TEST_AS_* variables; see features/README.md)")
	tags := fs.String("tags", "", "godog tag expression, e.g. '@routing && ~@slow'")
	format := fs.String("format", "progress", "pretty, progress, junit or cucumber")
	conc := fs.Int("concurrency", 4, "scenarios run at once")
	repeat := fs.Int("repeat", 1, "run every selected scenario N times (in N passes); one that fails in some and passes in others is reported as flaky and fails the run")
	random := fs.Int64("random", 0, "shuffle the scenario order with this seed (pass k uses SEED+k-1; -1 picks one); the seed is printed so an order can be replayed")
	wait := fs.Duration("wait", 0, "bound of every wait in a step (default 10s, 30s on synapse)")
	reportPath := fs.String("report", "", "write one HTML page of the run to this file: each scenario's rooms, with the daemon's trace where a scenario turned it on")
	timingsOut := fs.Bool("timings", false, "at the end, print where the time went: the homeserver's start, and per feature and for the slowest scenarios the wall time split into phases (lease, humans, rooms, seed, handover, daemon, steps, teardown)")
	verbose := fs.Bool("v", false, "log the daemon and harness to stderr")
	prepare := fs.Bool("prepare-snapshot", false, "find or build the Synapse snapshot the features' busy rooms start from (as a Synapse run would) and run no scenario; CI builds it while other stages run")
	// Flags may come before or after the paths.
	var paths []string
	for {
		if err := fs.Parse(args); err != nil {
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		paths = append(paths, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if *prepare {
		ctx, stop := interruptible(stderr, "zooid sim", "stopping the snapshot's build")
		defer stop()
		start := time.Now()
		if err := steps.PrepareSnapshot(ctx, paths, stdout); err != nil {
			fmt.Fprintf(stderr, "zooid sim: preparing the Synapse snapshot: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "zooid sim: Synapse snapshot ready after %s\n", time.Since(start).Round(time.Second))
		return 0
	}
	opts := steps.Options{
		Paths: paths, Homeserver: *hs, Tags: *tags, Format: *format,
		Concurrency: *conc, Output: stdout, Wait: *wait,
		Repeat: *repeat, Random: *random, Report: *reportPath,
	}
	if *timingsOut {
		opts.Timings = stdout
	}
	if *verbose {
		opts.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx, stop := interruptible(stderr, "zooid sim", "stopping the running scenarios and the homeserver")
	defer stop()
	opts.Context = ctx
	start := time.Now()
	status := steps.Run(opts)
	if status != 0 {
		fmt.Fprintf(stderr, "zooid sim: failed (status %d) after %s\n", status, time.Since(start).Round(time.Millisecond))
		return 1
	}
	return 0
}
