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
	// same way (shrink.SameWay: the same differences, no more).
	Diff trace.Diff
	// Final is the diff of one more replay of the shrunk recording, made to
	// show it: SameWay(Diff, Final) unless that replay answered otherwise
	// (FinalSame false; the output then says so).
	Final     trace.Diff
	FinalSame bool
	// Took is the whole shrink's time; Replaying the part of it spent in
	// candidate replays (the input's and the final one not counted).
	Took, Replaying time.Duration
}

// Shrink replays rec and, when today's daemon diverges from its trace,
// reduces it (sim/shrink: ddmin over members and units of events, then a
// check of each single removal) to a smallest recording whose replay
// diverges exactly the same way: the same differences as rec's replay, with
// run ids masked, and no others. It replays the result once more to show
// that. progress, when set, hears of each candidate and how long its replay
// took.
//
// A candidate's barriers give up once nothing is in flight in its daemon
// for a quiet time (Options.Quiet: the input's longest barrier wait, at
// least 500 ms; a daemon that has nothing in flight was never idle longer
// than that before its next record in the input's replay, on this machine
// under this load) instead of waiting the full Wait: a candidate whose
// trace waits for a turn nothing in it causes stops there.
func Shrink(ctx context.Context, rec *recording.Recording, opts Options, progress func(string)) (*ShrinkResult, error) {
	began := time.Now()
	first, err := Run(ctx, rec, opts)
	if err != nil {
		return nil, err
	}
	if first.Reproduced() {
		return nil, ErrReproduces
	}
	// A candidate that is never quiet (a turn that never ends) is still
	// given up on after three times the input's replay and ten seconds.
	bound := 3*time.Since(began) + 10*time.Second
	opts.Dir = "" // each candidate in a directory of its own, removed after
	if opts.Quiet == 0 {
		opts.Quiet = max(first.LongestWait, 500*time.Millisecond)
	}
	out := &ShrinkResult{Diff: first.Diff}
	n := 0
	say := func(format string, args ...any) {
		if progress != nil {
			progress(fmt.Sprintf(format, args...))
		}
	}
	say("the input: %d differences, replayed in %s (longest wait %s); a candidate's wait ends after %s with nothing in flight, its replay after %s",
		len(first.Diff), ms(time.Since(began)), ms(first.LongestWait), ms(opts.Quiet), ms(bound))
	res, err := shrink.Recording(ctx, rec, func(ctx context.Context, c *recording.Recording) (bool, error) {
		n++
		cctx, cancel := context.WithTimeout(ctx, bound)
		defer cancel()
		t0 := time.Now()
		r, err := Run(cctx, c, opts)
		took := time.Since(t0)
		out.Replaying += took
		if err != nil {
			if ctx.Err() != nil {
				return false, ctx.Err()
			}
			say("candidate %d (%d events, %d members): could not replay (%s): %v", n, len(c.Events), len(c.Members), ms(took), err)
			return false, fmt.Errorf("%w: %w", shrink.ErrCouldNotRun, err)
		}
		same := shrink.SameWay(first.Diff, r.Diff)
		gaveUp := ""
		if len(r.Stalls) > 0 {
			gaveUp = fmt.Sprintf(", %d waits given up", len(r.Stalls))
		}
		say("candidate %d (%d events, %d members): %d differences, same way: %v (%s%s)", n, len(c.Events), len(c.Members), len(r.Diff), same, ms(took), gaveUp)
		return same, nil
	})
	if err != nil {
		return nil, err
	}
	out.Result = res
	final, err := Run(ctx, res.Recording, opts)
	if err != nil {
		return nil, fmt.Errorf("replaying the shrunk recording: %w", err)
	}
	out.Final, out.FinalSame = final.Diff, shrink.SameWay(first.Diff, final.Diff)
	out.Took = time.Since(began)
	return out, nil
}

func ms(d time.Duration) string { return d.Round(time.Millisecond).String() }

// shrinkMain is `zooid replay --shrink OUT.json FILE`: exit 1 with the
// shrunk recording written when it diverges, 0 when it reproduces.
func shrinkMain(ctx context.Context, rec *recording.Recording, opts Options, out, htmlOut string, stdout, stderr io.Writer) int {
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
	fmt.Fprintf(stdout, "diverged: %d differences; shrunk %d events and %d members to %d events and %d members (%d of %d units) in %s; wrote %s\n",
		len(res.Diff), len(rec.Events), len(rec.Members), len(res.Recording.Events), len(res.Recording.Members),
		res.Units, res.InputUnits, ms(res.Took), out)
	fmt.Fprintf(stdout, "candidates: %d replays run in %s, %d answered from the cache, %d could not run\n",
		res.Tests, ms(res.Replaying), res.Cached, res.Failed)
	switch {
	case res.Minimal:
		fmt.Fprintf(stdout, "1-minimal: yes (removing any one remaining unit or member loses the divergence)\n")
	default:
		fmt.Fprintf(stdout, "1-minimal: not shown (%d single removals could not replay)\n", res.Unknown)
	}
	if res.FinalSame {
		fmt.Fprintf(stdout, "replayed again, the shrunk recording shows exactly the input's differences (%d):\n", len(res.Final))
		fmt.Fprint(stdout, res.Diff.String())
	} else {
		fmt.Fprintf(stdout, "the input's differences:\n%sbut replaying the shrunk recording once more showed %d differences (a replay that does not answer the same twice):\n%s",
			res.Diff.String(), len(res.Final), res.Final.String())
	}
	if htmlOut != "" {
		diff := res.Diff
		if !res.FinalSame {
			diff = res.Final
		}
		if err := WriteHTML(htmlOut, res.Recording, diff, "shrunk; diverges"); err != nil {
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
