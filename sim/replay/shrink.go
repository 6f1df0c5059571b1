package replay

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/zooid-dev/zooid/sim/report"
	"github.com/zooid-dev/zooid/sim/shrink"
	"github.com/zooid-dev/zooid/zooid/recording"
	"github.com/zooid-dev/zooid/zooid/trace"
)

// ErrReproduces is returned by Shrink for a recording today's daemon
// reproduces: there is no divergence to keep.
var ErrReproduces = errors.New("today's daemon reproduces the recording: nothing to shrink")

// ShrinkResult is a shrunk recording, the divergence it keeps, and what it took.
type ShrinkResult struct {
	*shrink.Result
	// Diff is how the input diverged; the shrunk recording diverges the
	// same way (shrink.SameWay).
	Diff trace.Diff
	// Failed counts candidates whose replay could not run (taken as not
	// diverging the same way).
	Failed int
}

// Shrink replays rec and, when today's daemon diverges from its trace,
// reduces it (sim/shrink: ddmin over members and events) to a
// smallest recording whose replay still diverges the same way: every
// difference of rec's replay, with run ids masked, is among the
// candidate's. progress, when set, hears of each candidate.
func Shrink(ctx context.Context, rec *recording.Recording, opts Options, progress func(string)) (*ShrinkResult, error) {
	began := time.Now()
	first, err := Run(ctx, rec, opts)
	if err != nil {
		return nil, err
	}
	// A candidate whose trace no longer matches what the daemon does can
	// stall at every barrier; it is given up on (as not diverging the same
	// way) after three times the input's replay and ten seconds.
	bound := 3*time.Since(began) + 10*time.Second
	if first.Reproduced() {
		return nil, ErrReproduces
	}
	opts.Dir = "" // each candidate in a directory of its own, removed after
	out := &ShrinkResult{Diff: first.Diff}
	n := 0
	res, err := shrink.Recording(ctx, rec, func(ctx context.Context, c *recording.Recording) (bool, error) {
		n++
		cctx, cancel := context.WithTimeout(ctx, bound)
		defer cancel()
		r, err := Run(cctx, c, opts)
		if err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			out.Failed++
			if progress != nil {
				progress(fmt.Sprintf("candidate %d (%d events, %d members): could not replay: %v", n, len(c.Events), len(c.Members), err))
			}
			return false, nil
		}
		same := shrink.SameWay(first.Diff, r.Diff)
		if progress != nil {
			progress(fmt.Sprintf("candidate %d (%d events, %d members): %d differences, same way: %v", n, len(c.Events), len(c.Members), len(r.Diff), same))
		}
		return same, nil
	})
	if err != nil {
		return nil, err
	}
	out.Result = res
	return out, nil
}

// shrinkMain is `zooid replay --shrink OUT.json FILE`: exit 1 with the
// shrunk recording written when it diverges, 0 when it reproduces.
func shrinkMain(ctx context.Context, rec *recording.Recording, opts Options, out, htmlOut string, stdout, stderr io.Writer) int {
	start := time.Now()
	res, err := Shrink(ctx, rec, opts, func(s string) { fmt.Fprintf(stderr, "zooid replay: %s\n", s) })
	if errors.Is(err, ErrReproduces) {
		fmt.Fprintf(stdout, "reproduced: nothing to shrink\n")
		return ExitReproduced
	}
	if err != nil {
		fmt.Fprintf(stderr, "zooid replay: shrinking: %v\n", err)
		return ExitFailed
	}
	var b bytes.Buffer
	if err := res.Recording.Write(&b); err != nil {
		fmt.Fprintf(stderr, "zooid replay: %v\n", err)
		return ExitFailed
	}
	if err := os.WriteFile(out, b.Bytes(), 0o644); err != nil {
		fmt.Fprintf(stderr, "zooid replay: writing the shrunk recording: %v\n", err)
		return ExitFailed
	}
	fmt.Fprintf(stdout, "diverged: %d differences; shrunk %d events and %d members to %d events and %d members in %d replays (%d answered from the cache, %d could not run), %s; wrote %s\n",
		len(res.Diff), len(rec.Events), len(rec.Members), len(res.Recording.Events), len(res.Recording.Members),
		res.Tests, res.Cached, res.Failed, time.Since(start).Round(time.Millisecond), out)
	fmt.Fprint(stdout, res.Diff.String())
	if htmlOut != "" {
		if err := WriteHTML(htmlOut, res.Recording, res.Diff, "shrunk; diverges"); err != nil {
			fmt.Fprintf(stderr, "zooid replay: %v\n", err)
			return ExitFailed
		}
	}
	return ExitDiverged
}

// WriteHTML renders rec, its trace and diff as one page (sim/report).
func WriteHTML(path string, rec *recording.Recording, diff trace.Diff, status string) error {
	run, err := report.FromRecording(rec, nil)
	if err != nil {
		return err
	}
	run.Diff, run.Status = diff, status
	var b bytes.Buffer
	if err := report.Write(&b, "zooid replay: "+run.Title, run); err != nil {
		return err
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	return nil
}
