package steps

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"

	"github.com/cucumber/godog"
)

// A scenario that fails in CI leaves only its step's error behind: why the
// daemon never prompted an agent is in the daemon's log, which a run without
// -v discards. Each world therefore keeps the last lines of its own log (the
// daemon's and the harness's, at debug level) and prints them under the
// scenario's name when it fails.

// logTailLines is how many of a scenario's last log lines a failure prints;
// logTailLineMax bounds one line (a transaction body can be long).
const (
	logTailLines   = 300
	logTailLineMax = 800
)

// logTail is an io.Writer keeping the last logTailLines lines written to it.
type logTail struct {
	mu    sync.Mutex
	lines [][]byte // ring of logTailLines
	next  int      // where the next line goes
	total int      // lines ever written
	// whole, once keepWhole was called, is every line written since, for
	// the steps that look for what must never be logged.
	whole *bytes.Buffer
}

// keepWhole makes the tail keep every line written from now on too.
func (t *logTail) keepWhole() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.whole == nil {
		t.whole = &bytes.Buffer{}
	}
}

// wholeLog is every line written since keepWhole; false before it.
func (t *logTail) wholeLog() (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.whole == nil {
		return "", false
	}
	return t.whole.String(), true
}

func newLogTail() *logTail { return &logTail{lines: make([][]byte, logTailLines)} }

// Write takes one or more whole lines (slog's handlers write a record, with
// its newline, in one call).
func (t *logTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.whole != nil {
		t.whole.Write(p)
	}
	for line := range bytes.Lines(p) {
		line = bytes.TrimRight(line, "\n")
		if len(line) > logTailLineMax {
			line = append(line[:logTailLineMax:logTailLineMax], " …"...)
		}
		t.lines[t.next] = append(t.lines[t.next][:0], line...)
		t.next = (t.next + 1) % len(t.lines)
		t.total++
	}
	return len(p), nil
}

// String is the kept lines, oldest first, under a header naming the
// scenario and its error and saying how many lines were dropped.
func (t *logTail) String(scenario string, err error) string {
	lines, kept, total := t.kept()
	return fmt.Sprintf("\n--- the log of failed scenario %q (%v): its last %d of %d lines\n%s--- end of the log of %q\n",
		scenario, err, kept, total, lines, scenario)
}

// kept is the kept lines, oldest first, each ending in a newline; how many
// they are; and how many lines were ever written.
func (t *logTail) kept() (lines string, kept, total int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	kept = min(t.total, len(t.lines))
	for i := range kept {
		b.Write(t.lines[(t.next-kept+i+len(t.lines))%len(t.lines)])
		b.WriteByte('\n')
	}
	return b.String(), kept, t.total
}

// report prints the tail of a failed scenario, and more after it (the log of
// a daemon run as its own process, which writes to a file, not to the tail):
// in the scenario's own subtest under go test (so go test -json files it
// under that test, which a write to stdout from a scenario among parallel
// ones is not), else on out.
func (t *logTail) report(ctx context.Context, underTest bool, out io.Writer, scenario string, err error, more string) {
	text := t.String(scenario, err) + more
	if gt := godog.T(ctx); underTest && gt != nil {
		gt.Log(text)
		return
	}
	_, _ = io.WriteString(out, text) // one write: scenarios failing at once do not interleave
}

// teeLog is base's logger that also writes every record, debug included,
// into tail.
func teeLog(base *slog.Logger, tail *logTail) *slog.Logger {
	return slog.New(slog.NewMultiHandler(base.Handler(), slog.NewTextHandler(tail, &slog.HandlerOptions{Level: slog.LevelDebug})))
}
