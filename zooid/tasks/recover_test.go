package tasks

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/tools"
	"github.com/zooid-dev/zooid/zooid/zevent"
)

// countBy counts successful sends of typ by txn id.
func countBy(hs *fakeHS, typ string) map[string]int {
	out := map[string]int{}
	for _, s := range hs.ok(typ) {
		out[s.Txn]++
	}
	return out
}

func wakesFor(e *env, sub string) int {
	n := 0
	for _, w := range e.wakesCopy() {
		if strings.Contains(w.Text, sub) {
			n++
		}
	}
	return n
}

func TestRecoverAfterSimulatedCrash(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	home := caller("alice", roomA, "$home")
	t1 := e.startOne(home, "caller", "bob")
	t2 := e.startOne(home, "none", "carol")
	t3 := e.startOne(home, "caller", "carol")
	t4 := e.startOne(home, "caller", "bob")
	if err := e.m.TurnEnded(ctx, t3.ThreadID, TurnOutcome{StopReason: "end_turn", LastProse: "t3 done"}); err != nil {
		t.Fatal(err)
	}
	e.hs.setFail(func(s sent, nth int) error {
		if s.Txn == t4.AttemptID+"-notice" {
			return errors.New("homeserver down")
		}
		return nil
	})
	if err := e.m.TurnEnded(ctx, t4.ThreadID, TurnOutcome{StopReason: "end_turn", LastProse: "t4 done"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.m.TaskByThread(roomA, t4.ThreadID); got.State != StateClosed || got.Report.Done || !got.Report.ResultPosted || !got.Report.Woken {
		t.Fatalf("t4 after failing notice: %+v", got.Report)
	}
	e.hs.setFail(nil)

	e.reopen()
	// Open tasks have their threads: start-up has no root to look for.
	if rooms := e.m.UncertainRooms(); len(rooms) != 0 {
		t.Fatalf("UncertainRooms after a crash with every root journaled = %v, want none", rooms)
	}
	// Until Recover, the journal's open tasks are still open (and hold capacity).
	if got, ok := e.m.TaskByThread(roomA, t1.ThreadID); !ok || got.State != StateOpen {
		t.Fatalf("t1 after reopen: %+v %v", got, ok)
	}
	if err := e.m.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	results := countBy(e.hs, zevent.KeyThreadResult)
	notices := map[string]int{}
	for _, n := range e.hs.notices() {
		notices[n.Txn]++
	}
	for _, task := range []Task{t1, t2, t3, t4} {
		if results[task.AttemptID+"-result"] != 1 {
			t.Errorf("%s: %d thread results, want 1", task.Agent, results[task.AttemptID+"-result"])
		}
	}
	for _, task := range []Task{t1, t3, t4} {
		if notices[task.AttemptID+"-notice"] != 1 {
			t.Errorf("notices for %s = %d, want 1", task.AttemptID, notices[task.AttemptID+"-notice"])
		}
	}
	if notices[t2.AttemptID+"-notice"] != 0 {
		t.Errorf("notify none task got a notice")
	}
	if n := len(e.wakesCopy()); n != 3 {
		t.Errorf("%d wakes, want 3 (t1, t3, t4 once each)", n)
	}
	if wakesFor(e, ReasonInterruptedByRestart) != 1 || wakesFor(e, "t4 done") != 1 || wakesFor(e, "t3 done") != 1 {
		t.Errorf("wakes = %+v", e.wakesCopy())
	}
	for _, task := range []Task{t1, t2} {
		got, _ := e.m.TaskByThread(roomA, task.ThreadID)
		if got.State != StateClosed || got.Result.Status != StatusCancelled || got.Result.Reason != ReasonInterruptedByRestart || !got.Report.Done {
			t.Errorf("%s after recover: %+v %+v", task.Agent, got.Result, got.Report)
		}
	}
	// The slots are free again.
	if got := statuses(e.start(home, "", "bob", "bob", "bob", "bob", "bob", "bob")); got[4] != "started:" || got[5] != "refused:at_capacity" {
		t.Fatalf("capacity after recover: %v", got)
	}

	// Another restart reports nothing again; the new tasks are interrupted once.
	before := len(e.hs.all())
	beforeWakes := len(e.wakesCopy())
	e.reopen()
	if err := e.m.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(e.hs.all()) - before; n != 5*2 {
		t.Errorf("second restart sent %d events, want 10 (result+notice for 5 new tasks)", n)
	}
	if n := len(e.wakesCopy()) - beforeWakes; n != 5 {
		t.Errorf("second restart woke %d, want 5", n)
	}
	before = len(e.hs.all())
	e.reopen()
	if err := e.m.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(e.hs.all()) - before; n != 0 {
		t.Errorf("third restart sent %d events, want 0", n)
	}
}

func TestTaskForRoot(t *testing.T) {
	e := newEnv(t)
	home := caller("alice", roomA, "$home")
	var root sent
	type bound struct {
		task Task
		ok   bool
	}
	early := make(chan bound, 1)
	// The homeserver delivers the root before Send returns.
	e.hs.setHook(func(s sent) {
		attempt, _ := field(s.Content, zevent.KeyThreadStart, "attempt_id").(string)
		if attempt == "" {
			return
		}
		root = s
		if _, ok := e.m.TaskForRoot(roomA, "$pushed", "@mallory:hs", attempt); ok {
			t.Errorf("root from another sender accepted")
		}
		if _, ok := e.m.TaskForRoot(roomB, "$pushed", "@alice:hs", attempt); ok {
			t.Errorf("root in another room accepted")
		}
		go func() {
			task, ok := e.m.TaskForRoot(roomA, "$ev1", "@alice:hs", attempt)
			early <- bound{task, ok}
		}()
		// TaskForRoot has met the root and waits for the post to journal it:
		// it can't return while this Send has not.
		for {
			e.m.mu.Lock()
			fl := e.m.posting[attempt]
			met := fl != nil && fl.root == "$ev1"
			e.m.mu.Unlock()
			if met {
				break
			}
			runtime.Gosched()
		}
		if len(early) != 0 {
			t.Errorf("TaskForRoot returned before the post was journaled")
		}
	})
	task := e.startOne(home, "", "bob")
	e.hs.setHook(nil)
	got := <-early
	if !got.ok || got.task.State != StateOpen || got.task.ThreadID != "$ev1" || task.ThreadID != "$ev1" || root.Txn != task.AttemptID {
		t.Fatalf("early root: %+v; task %+v", got, task)
	}
	if _, ok := e.m.TaskForRoot(roomA, "$ev1", "@alice:hs", "nope"); ok {
		t.Errorf("unknown attempt accepted")
	}
	if _, ok := e.m.TaskForRoot(roomA, "$other", "@alice:hs", task.AttemptID); ok {
		t.Errorf("second root for one attempt accepted")
	}
}

// A root that comes back while every answer to its post is lost makes the
// task started, in that thread, not failed.
func TestTaskForRootWhileThePostFails(t *testing.T) {
	e := newEnv(t)
	met := make(chan struct{})
	e.hs.setHook(func(s sent) {
		attempt, _ := field(s.Content, zevent.KeyThreadStart, "attempt_id").(string)
		if attempt == "" || s.Type.Type != "m.room.message" {
			return
		}
		select {
		case <-met:
			return
		default:
		}
		close(met)
		go e.m.TaskForRoot(roomA, "$landed", "@alice:hs", attempt)
		for {
			e.m.mu.Lock()
			fl := e.m.posting[attempt]
			ok := fl != nil && fl.root == "$landed"
			e.m.mu.Unlock()
			if ok {
				return
			}
			runtime.Gosched()
		}
	})
	e.hs.setFail(func(s sent, nth int) error { return errors.New("connection lost") })
	res := e.start(caller("alice", roomA, "$home"), "", "bob")
	if r := res.Results[0]; r.Status != tools.TaskStarted || r.ThreadID != "$landed" {
		t.Fatalf("result %+v, want started in $landed", r)
	}
	if task, ok := e.m.TaskByThread(roomA, "$landed"); !ok || task.State != StateOpen {
		t.Fatalf("task %+v %v, want open in $landed", task, ok)
	}
}

// A root posted before a crash, whose journal write the crash lost, is
// adopted when the daemon meets it before Recover: the task goes on, open in
// that thread, and nothing is reported for it.
func TestKillNineAfterTheRootLanded(t *testing.T) {
	e, carol := killedWhileReservingCarol(t)
	// Carol's root may have landed: start-up looks for it in her room.
	if rooms := e.m.UncertainRooms(); !slices.Equal(rooms, []id.RoomID{roomA}) {
		t.Fatalf("UncertainRooms = %v, want [%s]", rooms, roomA)
	}
	adopted, ok := e.m.TaskForRoot(roomA, "$landed", "@alice:hs", carol.AttemptID)
	if !ok || adopted.State != StateOpen || adopted.ThreadID != "$landed" {
		t.Fatalf("TaskForRoot before Recover: %+v %v", adopted, ok)
	}
	if rooms := e.m.UncertainRooms(); len(rooms) != 0 {
		t.Fatalf("UncertainRooms after the adoption = %v, want none", rooms)
	}
	if err := e.m.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, ok := e.m.TaskByThread(roomA, "$landed"); !ok || got.State != StateOpen || got.Result != nil {
		t.Fatalf("carol's task after Recover: %+v %v, want open", got, ok)
	}
	for _, r := range e.hs.ok(zevent.KeyThreadResult) {
		if r.Content["thread_id"] == "$landed" {
			t.Fatalf("a result for the adopted task: %v", r.Content)
		}
	}
	if n := wakesFor(e, "carol"); n != 0 {
		t.Fatalf("%d wakes for the adopted task", n)
	}
	if n := countBy(e.hs, "m.room.message")[carol.AttemptID]; n != 0 {
		t.Fatalf("the adopted task's root was posted again (%d)", n)
	}
	// It ends like any task: reported once.
	if err := e.m.TurnEnded(context.Background(), "$landed", TurnOutcome{StopReason: "end_turn", LastProse: "carol done"}); err != nil {
		t.Fatal(err)
	}
	if n := wakesFor(e, "carol done"); n != 1 {
		t.Fatalf("%d wakes with carol's result, want 1", n)
	}
	// The journal agrees after another restart: nothing more.
	before := len(e.hs.all())
	e.reopen()
	if err := e.m.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(e.hs.all()) - before; n != 0 {
		t.Fatalf("another restart sent %d events", n)
	}
}

// TestMain lets the test binary act as the child of the kill -9 tests.
func TestMain(m *testing.M) {
	if dir := os.Getenv("ZOOID_TASKS_CHILD_DIR"); dir != "" {
		runChild(dir, os.Getenv("ZOOID_TASKS_CHILD_MODE"))
		fmt.Fprintln(os.Stderr, "child was not killed")
		os.Exit(3)
	}
	os.Exit(m.Run())
}

func killSelf() {
	_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {}
}

// runChild opens the journal, does work, and dies by SIGKILL part way through.
func runChild(dir, mode string) {
	hs := newFakeHS()
	hs.prefix = "$child"
	hs.hook = func(s sent) {
		switch {
		case mode == "reserve" && strings.Contains(fmt.Sprint(s.Content["body"]), "thing 0") && s.As == "@alice:hs" && strings.Contains(fmt.Sprint(s.Content["body"]), "@carol:hs"):
			killSelf() // the second Start's root: reserved, post uncertain
		case mode == "report" && s.Type.Type == zevent.KeyThreadResult:
			killSelf() // closed durably, result not posted yet
		}
	}
	opts := Options{
		StateDir: dir,
		Send:     hs.Send,
		Agents: func(name string) (id.UserID, []id.RoomID, bool) {
			a, ok := agents[name]
			return a.user, a.rooms, ok
		},
		Logger: testLogger(),
	}
	m, err := Open(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx := context.Background()
	home := caller("alice", roomA, "$home")
	res, err := m.Start(ctx, home, tools.StartRequest{Tasks: specs("bob"), Notify: "caller"})
	if err != nil || res.Results[0].Status != tools.TaskStarted {
		fmt.Fprintln(os.Stderr, "start:", res, err)
		os.Exit(2)
	}
	task, _ := m.TaskByThread(roomA, res.Results[0].ThreadID)
	if r, err := m.Complete(ctx, assignee(task), "half done"); err != nil || r.Status != tools.CompleteRecorded {
		fmt.Fprintln(os.Stderr, "complete:", r, err)
		os.Exit(2)
	}
	switch mode {
	case "reserve":
		_, _ = m.Start(ctx, home, tools.StartRequest{Tasks: specs("carol"), Notify: "caller"})
	case "report":
		_ = m.TurnEnded(ctx, task.ThreadID, TurnOutcome{StopReason: "end_turn", LastProse: "bye"})
	}
}

func runKilledChild(t *testing.T, dir, mode string) {
	t.Helper()
	// A child that hangs instead of dying is killed, and the test fails below.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "ZOOID_TASKS_CHILD_DIR="+dir, "ZOOID_TASKS_CHILD_MODE="+mode)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("child: %v\n%s", err, out)
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if ctx.Err() != nil || !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child did not die by SIGKILL: %v\n%s", err, out)
	}
}

func TestKillNineWhilePosting(t *testing.T) {
	// The restart comes long after the crash: the reserved task is too old
	// to have its post finished (RepostWithin), so it is closed.
	later := func() time.Time { return time.Now().Add(RepostWithin + time.Minute) }
	e := &env{t: t, dir: t.TempDir(), hs: newFakeHS(), now: later}
	runKilledChild(t, e.dir, "reserve")
	e.open()
	ctx := context.Background()
	// The child's first task is open with its summary; its second is reserved and
	// counts against capacity.
	open, ok := e.m.TaskByThread(roomA, "$child1")
	if !ok || open.State != StateOpen || open.Summary != "half done" || open.Agent != "bob" {
		t.Fatalf("open task after kill: %+v %v", open, ok)
	}
	if got := statuses(e.start(caller("alice", roomA, "$x"), "none", "bob", "bob", "bob", "bob")); got[2] != "started:" || got[3] != "refused:at_capacity" {
		t.Fatalf("capacity with a reserved task: %v", got)
	}
	e.hs = newFakeHS()
	e.reopen()
	if err := e.m.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	results := e.hs.ok(zevent.KeyThreadResult)
	// One result for the open child task, three for the parent's own none tasks;
	// the reserved task has no thread to post in.
	byThread := map[string]map[string]any{}
	for _, r := range results {
		byThread[fmt.Sprint(r.Content["thread_id"])] = r.Content
	}
	if len(results) != 4 || byThread["$child1"]["status"] != "cancelled" || byThread["$child1"]["reason"] != ReasonInterruptedByRestart || byThread["$child1"]["output"] != "half done" {
		t.Fatalf("results = %+v", results)
	}
	notices := e.hs.notices()
	if len(notices) != 2 {
		t.Fatalf("%d notices, want 2 (open + uncertain child tasks)", len(notices))
	}
	agentsNotified := map[string]bool{}
	for _, n := range notices {
		agentsNotified[fmt.Sprint(field(n.Content, zevent.KeyThreadResult, "agent"))] = true
		if field(n.Content, zevent.KeyThreadResult, "reason") != ReasonInterruptedByRestart || field(n.Content, "m.relates_to", "event_id") != "$home" {
			t.Errorf("notice = %v", n.Content)
		}
	}
	if !agentsNotified["bob"] || !agentsNotified["carol"] {
		t.Errorf("notices for %v, want bob and carol", agentsNotified)
	}
	if n := len(e.wakesCopy()); n != 2 {
		t.Fatalf("%d wakes, want 2", n)
	}

	// The uncertain root did land after all: it arrives, is bound, and gets its
	// result; the caller is not told twice.
	var carol Task
	for _, task := range e.m.snapshotAll() {
		if task.Agent == "carol" {
			carol = task
		}
	}
	if carol.AttemptID == "" || carol.ThreadID != "" {
		t.Fatalf("carol task = %+v", carol)
	}
	bound, ok := e.m.TaskForRoot(roomA, "$late", "@alice:hs", carol.AttemptID)
	if !ok || bound.State != StateClosed {
		t.Fatalf("TaskForRoot late = %+v %v", bound, ok)
	}
	if err := e.m.Close(); err != nil { // waits for the background report
		t.Fatal(err)
	}
	late := 0
	for _, r := range e.hs.ok(zevent.KeyThreadResult) {
		if r.Content["thread_id"] == "$late" && r.Room == roomA && field(r.Content, "m.relates_to", "event_id") == "$late" {
			late++
		}
	}
	if late != 1 || len(e.hs.notices()) != 2 || len(e.wakesCopy()) != 2 {
		t.Fatalf("late root: %d results, %d notices, %d wakes", late, len(e.hs.notices()), len(e.wakesCopy()))
	}
	e.open()
	if _, ok := e.m.TaskByThread(roomA, "$late"); !ok {
		t.Fatalf("late binding not journaled")
	}
	before := len(e.hs.all())
	if err := e.m.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(e.hs.all()) - before; n != 0 || len(e.wakesCopy()) != 2 {
		t.Fatalf("after another restart: %d sends, %d wakes", n, len(e.wakesCopy()))
	}
}

// A root whose post a crash cut short, not met since, is posted again at
// Recover with its attempt id as txn id (a homeserver that has it answers with
// it), and the task goes on.
func TestKillNineThenTheRootPostIsFinished(t *testing.T) {
	e, carol := killedWhileReservingCarol(t)
	if err := e.m.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	var roots []sent
	for _, s := range e.hs.ok("m.room.message") {
		if s.Txn == carol.AttemptID {
			roots = append(roots, s)
		}
	}
	if len(roots) != 1 || roots[0].As != "@alice:hs" || field(roots[0].Content, zevent.KeyThreadStart, "attempt_id") != carol.AttemptID {
		t.Fatalf("root posts at Recover: %+v, want one with the attempt id as txn id", roots)
	}
	got, ok := e.m.TaskByThread(roomA, roots[0].EventID)
	if !ok || got.State != StateOpen || got.Result != nil {
		t.Fatalf("carol's task after Recover: %+v %v, want open in %s", got, ok, roots[0].EventID)
	}
	if n := wakesFor(e, "carol"); n != 0 {
		t.Fatalf("%d wakes for the task that goes on", n)
	}
}

// A finished post the homeserver refuses is reported to the caller, whose
// tool call never returned.
func TestKillNineThenTheRootPostFails(t *testing.T) {
	e := &env{t: t, dir: t.TempDir(), hs: newFakeHS()}
	runKilledChild(t, e.dir, "reserve")
	e.open()
	e.hs.setFail(func(s sent, nth int) error {
		if field(s.Content, zevent.KeyThreadStart, "assignee") == "carol" {
			return errors.New("M_FORBIDDEN")
		}
		return nil
	})
	if err := e.m.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	var failed []sent
	for _, n := range e.hs.notices() {
		if field(n.Content, zevent.KeyThreadResult, "agent") == "carol" {
			failed = append(failed, n)
		}
	}
	if len(failed) != 1 || field(failed[0].Content, zevent.KeyThreadResult, "status") != StatusFailed || field(failed[0].Content, zevent.KeyThreadResult, "reason") != ReasonPostFailed {
		t.Fatalf("notices for carol's task: %+v, want one failed (post_failed)", failed)
	}
	if n := wakesFor(e, ReasonPostFailed); n != 1 {
		t.Fatalf("%d wakes with the failed post, want 1", n)
	}
}

func TestKillNineWhileReporting(t *testing.T) {
	e := &env{t: t, dir: t.TempDir(), hs: newFakeHS()}
	runKilledChild(t, e.dir, "report")
	e.open()
	task, ok := e.m.TaskByThread(roomA, "$child1")
	if !ok || task.State != StateClosed || task.Result.Status != StatusComplete || task.Report.ResultPosted {
		t.Fatalf("task after kill while reporting: %+v %v", task, ok)
	}
	if err := e.m.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	r := e.hs.ok(zevent.KeyThreadResult)
	if len(r) != 1 || r[0].Content["status"] != "complete" || r[0].Content["output"] != "half done" || r[0].Txn != task.AttemptID+"-result" {
		t.Fatalf("results = %+v", r)
	}
	if len(e.hs.notices()) != 1 || len(e.wakesCopy()) != 1 {
		t.Fatalf("%d notices, %d wakes, want 1 each", len(e.hs.notices()), len(e.wakesCopy()))
	}
}

func TestRecoverLeavesTasksStartedSinceOpen(t *testing.T) {
	e := newEnv(t)
	home := caller("alice", roomA, "$home")
	old := e.startOne(home, "none", "bob")
	e.reopen()
	fresh := e.startOne(home, "none", "carol")
	if err := e.m.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.m.TaskByThread(roomA, old.ThreadID); got.State != StateClosed || got.Result.Reason != ReasonInterruptedByRestart {
		t.Errorf("old task: %+v", got)
	}
	if got, _ := e.m.TaskByThread(roomA, fresh.ThreadID); got.State != StateOpen {
		t.Errorf("task started after Open was closed by Recover: %+v", got.Result)
	}
}

// A result whose wake is still queued behind the caller's running turn when the
// daemon stops must wake the caller after the restart, exactly once.
func TestAQueuedWakeSurvivesARestart(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	home := caller("alice", roomA, "$home")
	task := e.startOne(home, "caller", "bob")

	e.mu.Lock()
	e.holdWakes = true // alice is mid-turn
	e.mu.Unlock()
	if err := e.m.TurnEnded(ctx, task.ThreadID, TurnOutcome{StopReason: "end_turn", LastProse: "svc-a is clean"}); err != nil {
		t.Fatal(err)
	}
	if n := wakesFor(e, "svc-a is clean"); n != 1 {
		t.Fatalf("queued %d wakes, want 1", n)
	}
	if got, _ := e.m.TaskByThread(roomA, task.ThreadID); got.Report.Woken || got.Report.Done {
		t.Fatalf("report %+v: a wake still in the caller's queue must not count as delivered", got.Report)
	}

	// The daemon stops before alice's turn ends: the queued wake is gone with it.
	e.mu.Lock()
	e.holdWakes, e.held = false, nil
	e.mu.Unlock()
	e.reopen()
	if err := e.m.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if n := wakesFor(e, "svc-a is clean"); n != 2 {
		t.Fatalf("after the restart the caller was woken %d times in all, want the lost wake again (2)", n)
	}
	if got, _ := e.m.TaskByThread(roomA, task.ThreadID); !got.Report.Woken || !got.Report.Done {
		t.Fatalf("report after the delivered wake: %+v", got.Report)
	}
	if n := countBy(e.hs, zevent.KeyThreadResult)[task.AttemptID+"-result"]; n != 1 {
		t.Fatalf("result event posted %d times, want once", n)
	}

	e.reopen()
	if err := e.m.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if n := wakesFor(e, "svc-a is clean"); n != 2 {
		t.Fatalf("a delivered wake was repeated after another restart (%d wakes)", n)
	}
}

// A wake taken later, when the caller's turn ends, completes the report.
func TestAHeldWakeIsJournaledWhenTaken(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	task := e.startOne(caller("alice", roomA, "$home"), "caller", "bob")
	e.mu.Lock()
	e.holdWakes = true
	e.mu.Unlock()
	if err := e.m.TurnEnded(ctx, task.ThreadID, TurnOutcome{StopReason: "end_turn", LastProse: "done"}); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock()
	held := e.held
	e.mu.Unlock()
	if len(held) != 1 {
		t.Fatalf("%d wakes held, want 1", len(held))
	}
	held[0]() // alice's turn ended; her session takes the wake
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, _ := e.m.TaskByThread(roomA, task.ThreadID)
		if got.Report.Woken && got.Report.Done {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("report never finished after the wake was taken: %+v", got.Report)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A wake taken in the instant after the report looked at the task (the
// caller's turn ended just then) still finishes the report in this process.
// The wake's own report used to find the first one still running and give up,
// and the first one had seen the wake still queued: the task stayed
// unreported, its "reported" trace record missing, until the next restart.
func TestAWakeTakenAsItsReportLooksAwayFinishesTheReport(t *testing.T) {
	e := newEnv(t)
	task := e.startOne(caller("alice", roomA, "$home"), "caller", "bob")
	e.mu.Lock()
	e.holdWakes = true // alice is mid-turn when the result comes
	e.mu.Unlock()
	taken := 0
	afterWakeLook = func(attempt string) {
		e.mu.Lock()
		held := e.held
		e.held = nil
		e.mu.Unlock()
		for _, deliver := range held {
			deliver() // her turn ends now: the session takes the wake
			taken++
		}
	}
	t.Cleanup(func() { afterWakeLook = func(string) {} })

	if err := e.m.TurnEnded(context.Background(), task.ThreadID, TurnOutcome{StopReason: "end_turn", LastProse: "done"}); err != nil {
		t.Fatal(err)
	}
	if taken != 1 {
		t.Fatalf("the wake was taken %d times after the report's look, want 1", taken)
	}
	// Close waits for every report this process started or owes.
	if err := e.m.Close(); err != nil {
		t.Fatal(err)
	}
	got, _ := e.m.TaskByThread(roomA, task.ThreadID)
	if !got.Report.Woken || !got.Report.Done {
		t.Fatalf("report %+v after the wake was taken, want woken and done", got.Report)
	}
}

// A /clear of the caller's thread is journaled: after a restart, a result
// delegated from before the clear is posted but wakes nobody.
func TestAClearedCallerIsNotWokenAfterARestart(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	task := e.startOne(caller("alice", roomA, "$home"), "caller", "bob")
	if err := e.m.ThreadCleared(roomA, "$home"); err != nil {
		t.Fatal(err)
	}
	e.reopen() // the daemon restarts with the task still open
	if err := e.m.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(e.wakesCopy()); n != 0 {
		t.Fatalf("the cleared caller was woken %d times", n)
	}
	if n := countBy(e.hs, "m.room.message")[task.AttemptID+"-notice"]; n != 1 {
		t.Fatalf("result notice posted %d times, want once", n)
	}
	if got, _ := e.m.TaskByThread(roomA, task.ThreadID); !got.Report.Done {
		t.Fatalf("report not finished: %+v", got.Report)
	}
}

// killedWhileReservingCarol opens the journal of a child SIGKILLed after it
// reserved carol's task, before the root's post was journaled, and returns
// that task, still reserved.
func killedWhileReservingCarol(t *testing.T) (*env, Task) {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), hs: newFakeHS()}
	runKilledChild(t, e.dir, "reserve")
	e.open()
	var carol Task
	for _, task := range e.m.snapshotAll() {
		if task.Agent == "carol" {
			carol = task
		}
	}
	if carol.State != StateReserved {
		t.Fatalf("carol's task after the kill: %+v, want reserved", carol)
	}
	return e, carol
}
