package replay

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"time"

	"github.com/zooid-dev/zooid/zooid/recording"
)

// Exit codes of `zooid replay`.
const (
	ExitReproduced = 0 // the daemon did what the trace says
	ExitDiverged   = 1 // it did not; the diff was printed
	ExitBadInput   = 2 // bad flags, or a recording that can't be read or has no trace
	ExitFailed     = 3 // the replay could not run (a part failed to start)
)

// Main is `zooid replay FILE`: it plays the recording through today's
// daemon and compares the new trace with the recorded one. It returns the
// exit code (ExitReproduced, ExitDiverged, ExitBadInput, ExitFailed).
func Main(args []string, stdout, stderr io.Writer) int {
	return MainWith(args, stdout, stderr, Options{})
}

// MainWith is Main with base options (the agent and bridge commands of the
// binary it runs in); the flags fill in the rest.
func MainWith(args []string, stdout, stderr io.Writer, base Options) int {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: zooid replay FILE [--feature OUT.feature] [--html OUT.html] [--shrink OUT.json] [--wait D] [--keep DIR] [-v]")
		fmt.Fprintln(stderr, "exit 0: today's daemon reproduces the recording's trace; 1: it diverges (the diff is printed); 2: bad input; 3: the replay could not run")
		fs.PrintDefaults()
	}
	wait := fs.Duration("wait", DefaultWait, "bound of each wait for the daemon to catch up with the recorded trace")
	keep := fs.String("keep", "", "keep the run's state and new trace in this directory (DIR/trace)")
	feature := fs.String("feature", "", "also write a regression scenario for the recording to this .feature file")
	htmlOut := fs.String("html", "", "also write the recording, its trace and the differences as one HTML page to this file")
	shrinkOut := fs.String("shrink", "", "when it diverges, reduce the recording to a smallest one whose replay shows exactly its differences (tasks and interrupted turns kept whole) and write it to this file")
	verbose := fs.Bool("v", false, "log the homeserver, the daemon and the replay to stderr")
	var paths []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return ExitBadInput
		}
		if fs.NArg() == 0 {
			break
		}
		paths = append(paths, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(paths) != 1 {
		fs.Usage()
		return ExitBadInput
	}
	rec, err := recording.Load(paths[0])
	if err != nil {
		fmt.Fprintf(stderr, "zooid replay: %v\n", err)
		return ExitBadInput
	}
	if _, err := RecordedTrace(rec); err != nil {
		fmt.Fprintf(stderr, "zooid replay: %v\n", err)
		return ExitBadInput
	}
	if *feature != "" {
		if err := WriteFeatureFile(*feature, rec, FeatureRef(paths[0])); err != nil {
			fmt.Fprintf(stderr, "zooid replay: %v\n", err)
			return ExitBadInput
		}
		fmt.Fprintf(stderr, "zooid replay: wrote %s\n", *feature)
	}
	opts := base
	opts.Wait, opts.Dir = *wait, *keep
	if *verbose {
		opts.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if *shrinkOut != "" {
		return shrinkMain(ctx, rec, opts, *shrinkOut, *htmlOut, stdout, stderr)
	}
	start := time.Now()
	res, err := Run(ctx, rec, opts)
	if err != nil {
		fmt.Fprintf(stderr, "zooid replay: %v\n", err)
		if errors.Is(err, ErrNoTrace) {
			return ExitBadInput
		}
		return ExitFailed
	}
	took := time.Since(start).Round(time.Millisecond)
	if *htmlOut != "" {
		status := "reproduced"
		if !res.Reproduced() {
			status = fmt.Sprintf("diverged: %d differences", len(res.Diff))
		}
		if err := WriteHTML(*htmlOut, rec, res.Diff, status); err != nil {
			fmt.Fprintf(stderr, "zooid replay: %v\n", err)
			return ExitFailed
		}
		fmt.Fprintf(stderr, "zooid replay: wrote %s\n", *htmlOut)
	}
	if res.Reproduced() {
		fmt.Fprintf(stdout, "reproduced: %d events pushed (%d as history), %d trace records compared, in %s\n",
			res.Pushed, res.Seeded, len(res.Want.Rooms[0].Records), took)
		return ExitReproduced
	}
	fmt.Fprintf(stdout, "diverged: %d differences between the recorded trace and today's daemon (%d events pushed, in %s)\n", len(res.Diff), res.Pushed, took)
	fmt.Fprint(stdout, res.Diff.String())
	for _, s := range res.Stalls {
		fmt.Fprintf(stdout, "note: %s\n", s)
	}
	return ExitDiverged
}
