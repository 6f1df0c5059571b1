package steps

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"sync"
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
}

func newLogTail() *logTail { return &logTail{lines: make([][]byte, logTailLines)} }

// Write takes one or more whole lines (slog's handlers write a record, with
// its newline, in one call).
func (t *logTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
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

// writeTo prints the kept lines, oldest first, saying how many were dropped.
func (t *logTail) writeTo(out io.Writer, scenario string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b bytes.Buffer
	kept := min(t.total, len(t.lines))
	fmt.Fprintf(&b, "\n--- the log of failed scenario %q (%v): its last %d of %d lines\n", scenario, err, kept, t.total)
	for i := range kept {
		b.Write(t.lines[(t.next-kept+i+len(t.lines))%len(t.lines)])
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "--- end of the log of %q\n", scenario)
	_, _ = out.Write(b.Bytes()) // one write: scenarios failing at once do not interleave
}

// teeLog is base's logger that also writes every record, debug included,
// into tail.
func teeLog(base *slog.Logger, tail *logTail) *slog.Logger {
	return slog.New(slog.NewMultiHandler(base.Handler(), slog.NewTextHandler(tail, &slog.HandlerOptions{Level: slog.LevelDebug})))
}
