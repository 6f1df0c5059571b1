package tasks

import (
	"context"
	"strings"
	"testing"

	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/tools"
	"github.com/zooid-dev/zooid/zooid/zevent"
)

const ciBob = id.UserID("@ci.bob:other")

// A task for another daemon's agent (Remote): its root mentions that agent,
// it goes on across this daemon's restart, and the result that agent posts
// in the thread closes it and is reported to the caller once, the notice
// posted by the caller (this daemon can't post as the other's user).
func TestRemoteTaskClosesOnItsAssigneesResult(t *testing.T) {
	e := &env{t: t, dir: t.TempDir(), hs: newFakeHS(), workstation: "laptop",
		other: func(room id.RoomID, addr string) (id.UserID, string, bool) {
			if room == roomA && (addr == "ci.bob" || addr == "bob") {
				return ciBob, "ci.bob", true
			}
			return "", "", false
		}}
	e.open()
	c := caller("alice", roomA, "$home")
	res := e.start(c, "", "ci.bob", "ci.nobody")
	if got := statuses(res); got[0] != "started:" || got[1] != "refused:unknown_agent" {
		t.Fatalf("statuses = %v, want started, refused:unknown_agent", got)
	}
	task, ok := e.m.TaskByThread(roomA, res.Results[0].ThreadID)
	if !ok || !task.Remote || task.Agent != "ci.bob" || task.AgentUser != ciBob {
		t.Fatalf("task = %+v, %v; want remote ci.bob (%s)", task, ok, ciBob)
	}
	root := e.hs.ok("m.room.message")[0]
	if field(root.Content, "dev.zooid.thread_start", "assignee") != "ci.bob" || !strings.Contains(root.Content["body"].(string), string(ciBob)) {
		t.Errorf("root = %v, want the assignee ci.bob mentioned", root.Content)
	}

	// This daemon restarts: another daemon runs the task, so it stays open.
	e.reopen()
	if err := e.m.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.m.TaskByThread(roomA, task.ThreadID); got.State != StateOpen {
		t.Fatalf("after a restart the remote task is %s, want open", got.State)
	}

	ctx := context.Background()
	result := zevent.ThreadResult{Agent: "bob", ThreadID: task.ThreadID, Status: StatusComplete, Output: "green"}
	// Someone else's result event changes nothing.
	if err := e.m.RemoteResult(ctx, roomA, task.ThreadID, "@mallory:other", result); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.m.TaskByThread(roomA, task.ThreadID); got.State != StateOpen || len(e.wakesCopy()) != 0 {
		t.Fatalf("after a stranger's result: %s, %d wakes", got.State, len(e.wakesCopy()))
	}
	for range 2 { // the second is a redelivery
		if err := e.m.RemoteResult(ctx, roomA, task.ThreadID, ciBob, result); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := e.m.TaskByThread(roomA, task.ThreadID)
	if got.State != StateClosed || got.Result.Status != StatusComplete || got.Result.Output != "green" || !got.Report.Done {
		t.Fatalf("task = %+v, want closed complete with green, reported", got)
	}
	if n := len(e.hs.ok(zevent.KeyThreadResult)); n != 0 {
		t.Errorf("%d thread results posted here, want 0 (the assignee's daemon posts it)", n)
	}
	notices := e.hs.notices()
	if len(notices) != 1 || notices[0].As != "@alice:hs" {
		t.Fatalf("notices = %+v, want one, posted by the caller @alice:hs", notices)
	}
	if wakes := e.wakesCopy(); len(wakes) != 1 || !strings.Contains(wakes[0].Text, "green") {
		t.Fatalf("wakes = %+v, want one with the result", wakes)
	}
}

// A root another daemon's agent posted for an agent of this one is adopted
// once, run here and reported only in its thread, where the caller's daemon
// reads it.
func TestAdoptedTaskReportsInItsThreadOnly(t *testing.T) {
	e := newEnv(t)
	start := zevent.ThreadStart{Version: 1, Assignee: "ci.bob", AttemptID: "zt-remote-1",
		Parent: zevent.ThreadStartParent{Agent: "architect", ThreadRoot: "$their-home"}}
	const architect = id.UserID("@laptop.architect:other")
	task, ok := e.m.Adopt(roomA, "$root", architect, start, "bob", "@bob:hs", "run the suite")
	if !ok || !task.Adopted || task.State != StateOpen || task.Notify != tools.NotifyNone || task.Agent != "bob" || task.ThreadID != "$root" {
		t.Fatalf("adopted = %+v, %v", task, ok)
	}
	if again, ok := e.m.Adopt(roomA, "$root", architect, start, "bob", "@bob:hs", "run the suite"); !ok || again.AttemptID != task.AttemptID {
		t.Fatalf("adopting again = %+v, %v; want the same task", again, ok)
	}
	if _, ok := e.m.Adopt(roomA, "$other-root", architect, start, "bob", "@bob:hs", "x"); ok {
		t.Fatal("an attempt id adopted for another root")
	}
	if !strings.Contains(Header(task), "architect") {
		t.Errorf("header %q does not name who delegated", Header(task))
	}
	if err := e.m.TurnEnded(context.Background(), "$root", TurnOutcome{StopReason: "end_turn", LastProse: "green"}); err != nil {
		t.Fatal(err)
	}
	results := e.hs.ok(zevent.KeyThreadResult)
	if len(results) != 1 || results[0].As != "@bob:hs" || results[0].Content["output"] != "green" {
		t.Fatalf("thread results = %+v, want one by @bob:hs with green", results)
	}
	if len(e.hs.notices()) != 0 || len(e.wakesCopy()) != 0 {
		t.Errorf("an adopted task posted %d notices and woke %d callers here, want none", len(e.hs.notices()), len(e.wakesCopy()))
	}
}

// An adopted task the journal held open at a restart is closed by
// CloseStale, which the daemon runs before its intake opens, and not yet
// reported: the root redelivered from the inbox then finds it closed (the
// daemon wakes nobody for it), and Recover reports it once.
func TestCloseStaleClosesBeforeTheRootComesBackAndRecoverReportsOnce(t *testing.T) {
	e := newEnv(t)
	start := zevent.ThreadStart{Version: 1, Assignee: "ci.bob", AttemptID: "zt-remote-2",
		Parent: zevent.ThreadStartParent{Agent: "architect", ThreadRoot: "$their-home"}}
	const architect = id.UserID("@laptop.architect:other")
	if _, ok := e.m.Adopt(roomA, "$root", architect, start, "bob", "@bob:hs", "run the suite"); !ok {
		t.Fatal("not adopted")
	}
	e.reopen()
	if err := e.m.CloseStale(); err != nil {
		t.Fatal(err)
	}
	again, ok := e.m.Adopt(roomA, "$root", architect, start, "bob", "@bob:hs", "run the suite")
	if !ok || again.IsOpen() || again.Result == nil || again.Result.Reason != ReasonInterruptedByRestart {
		t.Fatalf("the redelivered root found %+v, %v; want its task closed interrupted_by_restart", again, ok)
	}
	if n := len(e.hs.ok(zevent.KeyThreadResult)); n != 0 {
		t.Fatalf("CloseStale posted %d thread results, want 0 (Recover reports)", n)
	}
	if err := e.m.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := e.m.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	results := e.hs.ok(zevent.KeyThreadResult)
	if len(results) != 1 || results[0].Content["status"] != string(StatusCancelled) {
		t.Fatalf("thread results = %+v, want one cancelled", results)
	}
}
