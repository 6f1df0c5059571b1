package tasks

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/zooid-dev/zooid/zooid/tools"
	"github.com/zooid-dev/zooid/zooid/zevent"
)

// The tests of task_timeout run in a synctest bubble: Watch's timers and
// time.Now are the bubble's clock, which moves only when every goroutine of
// the bubble waits, so advance jumps half an hour at once and
// synctest.Wait is the barrier after which nothing more is on its way.

// advance moves the bubble's clock by d and returns once Watch and the
// reports it started have done all they will at the new time.
func advance(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// watch runs Watch on the current manager, as the daemon does after Recover,
// and returns how to stop it: the stop cancels its context and waits until
// it has returned.
func (e *env) watch() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan struct{})
	m := e.m
	go func() {
		defer close(returned)
		m.Watch(ctx)
	}()
	return func() {
		cancel()
		<-returned
	}
}

const question = "@ori which services are in scope?"

// waitOnAPerson ends the assignee's turn of task with a question to a person:
// the task stays open.
func (e *env) waitOnAPerson(task Task) {
	e.t.Helper()
	if err := e.m.TurnEnded(context.Background(), task.ThreadID, TurnOutcome{StopReason: "end_turn", LastProse: question, WaitingOnHuman: true}); err != nil {
		e.t.Fatal(err)
	}
	if got, _ := e.m.TaskByThread(task.Room, task.ThreadID); got.State != StateOpen {
		e.t.Fatalf("a task waiting on a person is %s, want open", got.State)
	}
}

// resultsOf counts the posted thread results and notices of task, and the
// wakes naming its thread.
func (e *env) resultsOf(task Task) (results, notices, wakes int) {
	results = countBy(e.hs, zevent.KeyThreadResult)[task.AttemptID+"-result"]
	for _, n := range e.hs.notices() {
		if n.Txn == task.AttemptID+"-notice" {
			notices++
		}
	}
	return results, notices, wakesFor(e, string(task.ThreadID))
}

// wantTimedOut checks task closed timed_out with output, its result posted,
// noticed and woken exactly once, and its report done.
func (e *env) wantTimedOut(task Task, output string) {
	e.t.Helper()
	got, _ := e.m.TaskByThread(task.Room, task.ThreadID)
	if got.State != StateClosed || got.Result == nil || got.Result.Status != StatusTimedOut || got.Result.Reason != "" || got.Result.Output != output || !got.Report.Done {
		e.t.Errorf("task for %s (%s): %s %+v %+v, want closed timed_out with output %q and reported", task.Agent, task.ThreadID, got.State, got.Result, got.Report, output)
	}
	if r, n, w := e.resultsOf(task); r != 1 || n != 1 || w != 1 {
		e.t.Errorf("task for %s (%s): %d thread results, %d notices, %d wakes; want one each", task.Agent, task.ThreadID, r, n, w)
	}
}

func TestAnOpenTaskTimesOutIsReportedOnceAndFreesItsSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := &env{t: t, dir: t.TempDir(), hs: newFakeHS(), timeout: 30 * time.Minute}
		e.open()
		// Watching from before any task exists: the first one to open
		// gives it a deadline to wait for.
		defer e.watch()()
		ctx := context.Background()
		home := caller("alice", roomA, "$home")
		var waiting []Task
		for _, a := range []string{"bob", "carol", "bob", "carol", "bob"} {
			task := e.startOne(home, "caller", a)
			e.waitOnAPerson(task)
			waiting = append(waiting, task)
		}
		if got := statuses(e.start(home, "caller", "carol")); got[0] != "refused:at_capacity" {
			t.Fatalf("a sixth task in a room of five waiting ones: %v, want refused:at_capacity", got)
		}
		// A task admitted later, elsewhere, keeps a deadline of its own; its
		// assignee is still at work when that comes (no turn has ended).
		advance(10 * time.Minute)
		busy := e.startOne(caller("alice", roomB, "$away"), "caller", "bob")

		advance(20*time.Minute - time.Second)
		if n := len(e.hs.ok(zevent.KeyThreadResult)); n != 0 || len(e.wakesCopy()) != 0 {
			t.Fatalf("a second before the bound: %d thread results and wakes %+v, want none", n, e.wakesCopy())
		}

		advance(time.Second)
		for _, task := range waiting {
			e.wantTimedOut(task, question)
		}
		first := waiting[0]
		want := fmt.Sprintf("[zooid] A task you delegated has ended; this is its result.\nTask for bob (thread %s) ended: timed_out\n\n%s", first.ThreadID, question)
		for _, w := range e.wakesCopy() {
			if strings.Contains(w.Text, string(first.ThreadID)) && (w.Text != want || w.Parent != first.Parent) {
				t.Errorf("the wake with the first task's result: %+v\nwant %q for %+v", w, want, first.Parent)
			}
		}
		if got, _ := e.m.TaskByThread(roomB, busy.ThreadID); got.State != StateOpen {
			t.Errorf("the task admitted 10 minutes later is %s at the first one's deadline, want open", got.State)
		}
		// The slots are free at once.
		if got := statuses(e.start(home, "none", "carol", "bob", "carol", "bob", "carol", "bob")); fmt.Sprint(got) != "[started: started: started: started: started: refused:at_capacity]" {
			t.Errorf("tasks after the five timed out: %v, want five started and the sixth refused", got)
		}

		// A reply reaching the assignee afterwards is an ordinary message: the
		// turn it runs ends without closing anything again, and the assignee
		// can no longer complete the task.
		if err := e.m.TurnEnded(ctx, first.ThreadID, TurnOutcome{StopReason: "end_turn", LastProse: "svc-a and svc-b are clean"}); err != nil {
			t.Fatal(err)
		}
		if r, err := e.m.Complete(ctx, assignee(first), "svc-a and svc-b are clean"); err != nil || r.Status != tools.CompleteRefused || r.Reason != ReasonNotAssignee {
			t.Errorf("zooid_complete_task after the timeout: %+v %v, want refused %s", r, err, ReasonNotAssignee)
		}
		synctest.Wait()
		e.wantTimedOut(first, question)

		advance(10 * time.Minute)
		e.wantTimedOut(busy, "")
		// The five started at the first deadline reach theirs (notify none:
		// a result in each thread, nobody woken).
		advance(20 * time.Minute)
		if n, w := len(e.hs.ok(zevent.KeyThreadResult)), len(e.wakesCopy()); n != 5+1+5 || w != 5+1 {
			t.Errorf("an hour after the first tasks: %d thread results and %d wakes, want 11 and 6", n, w)
		}

		// However long the daemon runs on, nothing is reported again.
		sent, woken := len(e.hs.all()), len(e.wakesCopy())
		advance(24 * time.Hour)
		if n, w := len(e.hs.all()), len(e.wakesCopy()); n != sent || w != woken {
			t.Errorf("a day later: %d posts and %d wakes, want still %d and %d", n, w, sent, woken)
		}
	})
}

func TestATimedOutTaskIsReportedOnceAcrossRestarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := &env{t: t, dir: t.TempDir(), hs: newFakeHS(), timeout: 30 * time.Minute}
		e.open()
		stop := e.watch()
		home := caller("alice", roomA, "$home")
		task := e.startOne(home, "caller", "bob")
		e.waitOnAPerson(task)
		// The close is journaled and the result posted, but the homeserver
		// refuses the caller's notice: the report is left unfinished.
		e.hs.setFail(func(s sent, nth int) error {
			if s.Txn == task.AttemptID+"-notice" {
				return fmt.Errorf("homeserver down")
			}
			return nil
		})
		advance(30 * time.Minute)
		got, _ := e.m.TaskByThread(roomA, task.ThreadID)
		if got.State != StateClosed || got.Result.Status != StatusTimedOut || got.Report.Done || !got.Report.ResultPosted || !got.Report.Woken {
			t.Fatalf("after the timeout with the notice refused: %s %+v %+v", got.State, got.Result, got.Report)
		}
		stop()
		e.hs.setFail(nil)

		// The restart finishes the report (the notice alone) and opens nothing.
		e.reopen()
		if err := e.m.Recover(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		e.wantTimedOut(task, question)
		if got := statuses(e.start(home, "none", "bob", "bob", "bob", "bob", "bob")); fmt.Sprint(got) != "[started: started: started: started: started:]" {
			t.Errorf("after the restart the room has %v, want all five slots free", got)
		}

		// Another restart, an hour later: the new tasks, past the bound,
		// time out at recovery; the first is not reported a third time.
		sent, woken := len(e.hs.all()), len(e.wakesCopy())
		advance(time.Hour)
		e.reopen()
		if err := e.m.Recover(context.Background()); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		e.wantTimedOut(task, question)
		if n, w := len(e.hs.all())-sent, len(e.wakesCopy())-woken; n != 5 || w != 0 {
			t.Errorf("the second restart posted %d and woke %d, want 5 results of the notify-none tasks and no wake", n, w)
		}
	})
}

// clock is a clock a test moves by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestRecoverClosesTasksThatPassedTheBoundWhileTheDaemonWasDown(t *testing.T) {
	clk := &clock{now: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)}
	e := &env{t: t, dir: t.TempDir(), hs: newFakeHS(), now: clk.Now, timeout: 30 * time.Minute}
	e.open()
	ctx := context.Background()
	home := caller("alice", roomA, "$home")
	old := e.startOne(home, "caller", "bob")
	e.waitOnAPerson(old)
	clk.add(20 * time.Minute)
	young := e.startOne(home, "caller", "carol")
	e.waitOnAPerson(young)

	// The daemon stops (no Watch ran to see either deadline) and starts again
	// 15 minutes later: the old task is past its bound, the young one not.
	clk.add(15 * time.Minute)
	e.reopen()
	if err := e.m.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	e.wantTimedOut(old, question)
	got, _ := e.m.TaskByThread(roomA, young.ThreadID)
	if got.Result == nil || got.Result.Status != StatusCancelled || got.Result.Reason != ReasonInterruptedByRestart {
		t.Errorf("the task within its bound at the restart: %+v, want cancelled (%s)", got.Result, ReasonInterruptedByRestart)
	}
	if r, n, w := e.resultsOf(young); r != 1 || n != 1 || w != 1 {
		t.Errorf("the task within its bound: %d results, %d notices, %d wakes; want one each", r, n, w)
	}

	sent, woken := len(e.hs.all()), len(e.wakesCopy())
	clk.add(time.Hour)
	e.reopen()
	if err := e.m.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	e.wantTimedOut(old, question)
	if n, w := len(e.hs.all()), len(e.wakesCopy()); n != sent || w != woken {
		t.Errorf("a second restart posted %d and woke %d more, want nothing", n-sent, w-woken)
	}
}

func TestKillNineWhilePostingPastTheBound(t *testing.T) {
	// The restart comes within RepostWithin, which would finish the reserved
	// task's root post, but after task_timeout: the task is closed timed_out
	// instead, and its caller told once.
	later := func() time.Time { return time.Now().Add(2 * time.Minute) }
	e := &env{t: t, dir: t.TempDir(), hs: newFakeHS(), now: later, timeout: time.Minute}
	runKilledChild(t, e.dir, "reserve")
	e.open()
	if err := e.m.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	roots := 0
	for _, s := range e.hs.ok("m.room.message") {
		if field(s.Content, zevent.KeyThreadStart) != nil {
			roots++
		}
	}
	if roots != 0 {
		t.Errorf("%d task roots posted at recovery, want none: the reserved task is past its bound", roots)
	}
	results := e.hs.ok(zevent.KeyThreadResult)
	if len(results) != 1 || results[0].Content["thread_id"] != "$child1" || results[0].Content["status"] != StatusTimedOut || results[0].Content["output"] != "half done" {
		t.Errorf("thread results = %+v, want the open task's, timed_out with its summary", results)
	}
	notices := e.hs.notices()
	if len(notices) != 2 {
		t.Fatalf("%d notices, want 2 (the open and the reserved task)", len(notices))
	}
	for _, n := range notices {
		if field(n.Content, zevent.KeyThreadResult, "status") != StatusTimedOut {
			t.Errorf("notice = %v, want timed_out", n.Content)
		}
	}
	if n := len(e.wakesCopy()); n != 2 {
		t.Errorf("%d wakes, want 2", n)
	}
}

func TestWatchEndsWithItsContextOrWithClose(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := &env{t: t, dir: t.TempDir(), hs: newFakeHS(), timeout: 30 * time.Minute}
		e.open()
		task := e.startOne(caller("alice", roomA, "$home"), "caller", "bob")
		// Stopped by its context while waiting for a deadline: the task
		// stays open, for the next start to recover.
		e.watch()()
		advance(time.Hour)
		if got, _ := e.m.TaskByThread(roomA, task.ThreadID); got.State != StateOpen {
			t.Errorf("with Watch stopped the task is %s, want open", got.State)
		}

		// Close ends a Watch still running: Close waits for it, so a Watch
		// that did not return would leave every goroutine of the bubble
		// blocked, which synctest reports as a deadlock.
		returned := make(chan struct{})
		go func() {
			defer close(returned)
			e.m.Watch(context.Background())
		}()
		synctest.Wait()
		if err := e.m.Close(); err != nil {
			t.Fatal(err)
		}
		<-returned
		// After Close, Watch returns at once.
		e.m.Watch(context.Background())
	})
}
