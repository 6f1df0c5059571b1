package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/zooid-dev/zooid/sim/bench"
)

// cmdBench runs sim/bench and prints its table; with --check it fails
// when a checked ratio is more than twice its baseline.
func cmdBench(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: zooid bench [--short] [--items 2,3] [--suite] [--synapse [--runs N] [--synapse-sizes 1000,10000,100000]] [--agents N --sessions N] [--check BASELINE.json] [--write-baseline BASELINE.json] [--json]")
		fs.PrintDefaults()
	}
	short := fs.Bool("short", false, "the CI version: seconds, rooms up to 10k events, 10 agents × 2 sessions")
	suite := fs.Bool("suite", false, "also time the whole fake feature suite")
	synapse := fs.Bool("synapse", false, "also measure on Synapse (needs docker; long): history pages in rooms of --synapse-sizes events, and each feature file on fakehs and on Synapse")
	runs := fs.Int("runs", 3, "with --synapse: runs of each feature file per homeserver (the median counts)")
	synSizes := fs.String("synapse-sizes", "", "with --synapse: the sizes, in events, ascending, of the Synapse rooms whose pages are measured (the first is the one the others are divided by; default 1000,10000,100000, with --short 1000,10000); the rooms come from snapshot images built once (docs/performance.md)")
	itemList := fs.String("items", "", "measure only these items of docs/performance.md, comma-separated (1–7; default all, 1 only with --synapse)")
	agents := fs.Int("agents", 0, "agents of the idle-sessions measure (default 200, 10 with --short)")
	sessions := fs.Int("sessions", 0, "sessions per agent of the idle-sessions measure (default 5, 2 with --short)")
	check := fs.String("check", "", "fail when a checked value is more than --factor times its value in this baseline file")
	factor := fs.Float64("factor", 2, "with --check: how far a checked value may grow over its baseline")
	write := fs.String("write-baseline", "", "write the checked values of this run to this file")
	asJSON := fs.Bool("json", false, "print the table as JSON instead of markdown")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "zooid bench: unexpected arguments: %v\n", fs.Args())
		return 2
	}
	items, err := intList(*itemList, 1, 7)
	if err != nil {
		fmt.Fprintf(stderr, "zooid bench: --items: %v\n", err)
		return 2
	}
	var sizes []int
	if *synSizes != "" {
		sizes, err = intList(*synSizes, 1000, 1_000_000)
		if err == nil && (len(sizes) < 2 || !slices.IsSorted(sizes) || len(slices.Compact(slices.Clone(sizes))) != len(sizes)) {
			err = fmt.Errorf("%v", sizes)
		}
		if err != nil {
			fmt.Fprintf(stderr, "zooid bench: --synapse-sizes: want two sizes or more, ascending, each 1000–1000000: %v\n", err)
			return 2
		}
	}
	if (*agents == 0) != (*sessions == 0) {
		fmt.Fprintln(stderr, "zooid bench: give --agents and --sessions together")
		return 2
	}
	var base bench.Baseline
	if *check != "" {
		if base, err = bench.ReadBaseline(*check); err != nil {
			fmt.Fprintf(stderr, "zooid bench: %v\n", err)
			return 2
		}
	}
	ctx, stop := interruptible(stderr, "zooid bench", "stopping the measurements")
	defer stop()
	t, err := bench.Run(ctx, bench.Options{Short: *short, Suite: *suite, Synapse: *synapse, Runs: *runs, SynapseSizes: sizes,
		Items: items, Agents: *agents, Sessions: *sessions, Log: stderr})
	t.Command = "zooid bench " + strings.Join(args, " ")
	if *asJSON {
		data, _ := json.MarshalIndent(t, "", "  ")
		fmt.Fprintln(stdout, string(data))
	} else {
		t.Markdown(stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "zooid bench: %v\n", err)
		return 1
	}
	if *write != "" {
		if err := t.WriteBaseline(*write); err != nil {
			fmt.Fprintf(stderr, "zooid bench: %v\n", err)
			return 1
		}
	}
	if base != nil {
		if regs := t.Regressions(base, *factor); len(regs) > 0 {
			fmt.Fprintf(stderr, "zooid bench: %d values regressed against %s:\n  %s\n", len(regs), *check, strings.Join(regs, "\n  "))
			return 1
		}
		fmt.Fprintf(stderr, "zooid bench: every checked value is within %g× of %s\n", *factor, *check)
	}
	return 0
}

// intList parses "1,2,3" into numbers each within lo..hi; "" is none.
func intList(s string, lo, hi int) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < lo || n > hi {
			return nil, fmt.Errorf("%q is not a number from %d to %d", f, lo, hi)
		}
		out = append(out, n)
	}
	return out, nil
}
