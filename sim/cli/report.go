package cli

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/zooid-dev/zooid/sim/report"
	"github.com/zooid-dev/zooid/zooid/recording"
	"github.com/zooid-dev/zooid/zooid/trace"
)

// cmdReport renders a recording (and the trace it carries, or one given with
// --trace) as one self-contained HTML page. It exits 2 on bad input (flags,
// a recording or trace that cannot be read) and 1 when the page cannot be
// written.
func cmdReport(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("zooid report", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("html", "", "write the page to this file (required)")
	traceDir := fs.String("trace", "", "a trace directory (zooid run --trace DIR) to show instead of the recording's own trace")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: zooid report --html OUT.html [--trace DIR] RECORDING.json")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *out == "" || fs.NArg() != 1 {
		fs.Usage()
		return 2
	}
	// Like zooid replay: a recording or trace that cannot be read is bad
	// input (exit 2); 1 is left for a page that could not be written.
	rec, err := recording.Load(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "zooid report: %v\n", err)
		return 2
	}
	var tr *trace.Trace
	if *traceDir != "" {
		if tr, err = trace.Read(*traceDir); err != nil {
			fmt.Fprintf(stderr, "zooid report: %v\n", err)
			return 2
		}
	}
	if err := writeHTML(*out, rec, tr, nil, ""); err != nil {
		fmt.Fprintf(stderr, "zooid report: %v\n", err)
		if errors.Is(err, report.ErrBadTrace) {
			return 2
		}
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s\n", *out)
	return 0
}

// writeHTML renders rec (with tr, or its own trace) and diff to path.
func writeHTML(path string, rec *recording.Recording, tr *trace.Trace, diff trace.Diff, status string) error {
	run, err := report.FromRecording(rec, tr)
	if err != nil {
		return err
	}
	run.Diff, run.Status = diff, status
	var b bytes.Buffer
	if err := report.Write(&b, "zooid: "+run.Title, run); err != nil {
		return err
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	return nil
}
