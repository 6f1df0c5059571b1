// Package faultpoint lets the test harness SIGKILL the daemon at a named point
// of its work, where a crash can't be timed from outside: between a post and
// the journal write that records it.
//
// Only the harness arms it: ZOOID_TEST_KILL_FILE names a file; when the file
// holds a point's name as that point is reached, the daemon removes the file
// (so the next start is not killed again), says so on stderr and SIGKILLs
// itself. With the variable unset, as in production, Reach returns at once.
// The daemon logs a warning at start-up when the variable is set.
package faultpoint

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// Env names the file that arms a point.
const Env = "ZOOID_TEST_KILL_FILE"

// The points, each between two writes whose order a crash must not undo: a
// post and the journal write that records it, or the journal and the trace.
const (
	// TurnClosingJournaled: a turn's closing words are journaled, not yet posted.
	TurnClosingJournaled = "turn.closing_journaled"
	// TurnReplyPosted: a turn's closing words are posted, its turn record
	// not yet acknowledged.
	TurnReplyPosted = "turn.reply_posted"
	// TaskResultPosted: a task's dev.zooid.thread_result is posted, the task
	// journal does not say so yet.
	TaskResultPosted = "task.result_posted"
	// TaskRootPosted: a task's root is posted, the task journal still says
	// reserved (its post uncertain).
	TaskRootPosted = "task.root_posted"
	// HandoffPosted: a zooid_handoff's notice is posted in the thread, the
	// task journal still says reserved (its post uncertain).
	HandoffPosted = "handoff.posted"
	// HandoffReturned: a handoff's return is journaled, the caller's wake
	// not yet queued.
	HandoffReturned = "handoff.returned"
	// HandoffReturnPosted: the return of another daemon's handoff is posted
	// in its thread, the task journal does not say it is delivered yet.
	HandoffReturnPosted = "handoff.return_posted"
	// TaskAdopting: another daemon's task root for this daemon's agent is
	// received, the task journal does not hold its adoption yet.
	TaskAdopting = "task.adopting"
	// HandoffAdopting: another daemon's handoff notice to this daemon's agent
	// is received, the task journal does not hold its adoption yet.
	HandoffAdopting = "handoff.adopting"
	// TaskAdopted: another daemon's task root for this daemon's agent is
	// journaled as adopted, its assignee not yet woken.
	TaskAdopted = "task.adopted"
	// HandoffAdopted: another daemon's handoff to this daemon's agent is
	// journaled as adopted, its callee not yet started.
	HandoffAdopted = "handoff.adopted"
	// TurnEndTraced: a turn's end is in the trace; the turn journal let go
	// of the turn just before.
	TurnEndTraced = "turn.end_traced"
)

// Points lists every point, for the harness to refuse a misspelt one.
var Points = []string{TurnClosingJournaled, TurnReplyPosted, TaskResultPosted, TurnEndTraced, TaskRootPosted, HandoffPosted, HandoffReturned, HandoffReturnPosted, TaskAdopting, TaskAdopted, HandoffAdopting, HandoffAdopted}

var file = os.Getenv(Env)

// Armable says whether this process can be killed at a point at all.
func Armable() bool { return file != "" }

// Reach kills this process with SIGKILL when the armed file names point.
func Reach(point string) {
	if file == "" {
		return
	}
	b, err := os.ReadFile(file)
	if err != nil || strings.TrimSpace(string(b)) != point {
		return
	}
	if os.Remove(file) != nil {
		return // another goroutine reached it first and is killing us
	}
	fmt.Fprintf(os.Stderr, "faultpoint: killed at %s\n", point)
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal is on its way; nothing after the point may run
}
