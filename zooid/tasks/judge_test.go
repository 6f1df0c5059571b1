package tasks

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/zooid-dev/zooid/zooid/tools"
	"github.com/zooid-dev/zooid/zooid/zevent"
)

func TestJudgeRules(t *testing.T) {
	cases := []struct {
		name    string
		summary string
		hand    bool
		o       TurnOutcome
		want    *Result // nil: stays open
	}{
		{"error", "s", false, TurnOutcome{Err: errors.New("agent crashed"), LastProse: "p"}, &Result{Status: StatusFailed, Reason: ReasonAgentError, Error: "agent crashed", Output: "s"}},
		{"error beats cancelled", "", false, TurnOutcome{Err: errors.New("x"), StopReason: "cancelled"}, &Result{Status: StatusFailed, Reason: ReasonAgentError, Error: "x"}},
		{"cancelled", "", false, TurnOutcome{StopReason: "cancelled", LastProse: "half"}, &Result{Status: StatusCancelled, Reason: ReasonTurnCancelled, Output: "half"}},
		{"cancelled while waiting", "", false, TurnOutcome{StopReason: "cancelled", WaitingOnHuman: true}, &Result{Status: StatusCancelled, Reason: ReasonTurnCancelled}},
		{"max tokens", "", false, TurnOutcome{StopReason: "max_tokens", LastProse: "so far"}, &Result{Status: StatusPartial, Reason: "max_tokens", Output: "so far"}},
		{"max turns", "sum", false, TurnOutcome{StopReason: "max_turn_requests"}, &Result{Status: StatusPartial, Reason: "max_turn_requests", Output: "sum"}},
		{"waiting on human", "sum", false, TurnOutcome{StopReason: "end_turn", WaitingOnHuman: true, LastProse: "which one?"}, nil},
		{"daemon handoff", "", false, TurnOutcome{StopReason: "end_turn", HandoffOutstanding: true}, nil},
		{"recorded handoff", "", true, TurnOutcome{StopReason: "end_turn", LastProse: "@carol help"}, nil},
		{"summary wins over prose", "the summary", false, TurnOutcome{StopReason: "end_turn", LastProse: "bye"}, &Result{Status: StatusComplete, Output: "the summary"}},
		{"last prose", "", false, TurnOutcome{StopReason: "end_turn", LastProse: "  result text \n"}, &Result{Status: StatusComplete, Output: "result text"}},
		{"no result", "", false, TurnOutcome{StopReason: "end_turn", LastProse: "  "}, &Result{Status: StatusFailed, Reason: ReasonNoResult}},
		{"refusal", "", false, TurnOutcome{StopReason: "refusal", LastProse: "I won't"}, &Result{Status: StatusFailed, Reason: ReasonRefusal, Output: "I won't"}},
		{"refusal after summary", "sum", false, TurnOutcome{StopReason: "refusal"}, &Result{Status: StatusComplete, Output: "sum"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			task := &Task{Agent: "bob", State: StateOpen, Summary: tc.summary}
			if tc.hand {
				task.Handoffs = []Handoff{{From: "bob", To: "carol"}}
			}
			got := judge(task, tc.o)
			switch {
			case tc.want == nil && got != nil:
				t.Fatalf("judge = %+v, want open", got)
			case tc.want != nil && got == nil:
				t.Fatalf("judge = open, want %+v", tc.want)
			case tc.want != nil && *got != *tc.want:
				t.Fatalf("judge = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestTurnEndedClosesOnceAndReports(t *testing.T) {
	e := newEnv(t)
	c := caller("alice", roomA, "$home")
	task := e.startOne(c, "", "bob")
	ctx := context.Background()

	// A waiting turn keeps it open: nothing reported.
	if err := e.m.TurnEnded(ctx, task.ThreadID, TurnOutcome{StopReason: "end_turn", WaitingOnHuman: true, LastProse: "which?"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.m.TaskByThread(roomA, task.ThreadID); got.State != StateOpen || len(e.hs.ok(zevent.KeyThreadResult)) != 0 {
		t.Fatalf("after waiting turn: state %s, %d results", got.State, len(e.hs.ok(zevent.KeyThreadResult)))
	}
	if err := e.m.TurnEnded(ctx, task.ThreadID, TurnOutcome{StopReason: "end_turn", LastProse: "42"}); err != nil {
		t.Fatal(err)
	}
	if err := e.m.TurnEnded(ctx, task.ThreadID, TurnOutcome{StopReason: "end_turn", LastProse: "43"}); err != nil {
		t.Fatal(err)
	}
	if err := e.m.TurnEnded(ctx, task.ThreadID, TurnOutcome{Err: errors.New("late crash")}); err != nil {
		t.Fatal(err)
	}
	results := e.hs.ok(zevent.KeyThreadResult)
	if len(results) != 1 {
		t.Fatalf("%d thread results, want 1", len(results))
	}
	r := results[0]
	if r.As != "@bob:hs" || r.Room != roomA || r.Content["status"] != "complete" || r.Content["output"] != "42" ||
		r.Content["agent"] != "bob" || r.Content["thread_id"] != string(task.ThreadID) {
		t.Errorf("thread result = %+v", r)
	}
	if field(r.Content, "m.relates_to", "rel_type") != "m.thread" || field(r.Content, "m.relates_to", "event_id") != string(task.ThreadID) {
		t.Errorf("thread result not in the task thread: %v", r.Content["m.relates_to"])
	}
	if _, has := r.Content["reason"]; has {
		t.Errorf("complete result carries a reason: %v", r.Content)
	}

	notices := e.hs.notices()
	if len(notices) != 1 {
		t.Fatalf("%d notices, want 1", len(notices))
	}
	n := notices[0]
	if n.Room != roomA || field(n.Content, "m.relates_to", "event_id") != "$home" || field(n.Content, "m.relates_to", "rel_type") != "m.thread" {
		t.Errorf("notice not in the caller's thread: %+v", n)
	}
	if field(n.Content, "dev.zooid.thread_result", "status") != "complete" || field(n.Content, "dev.zooid.thread_result", "output") != "42" {
		t.Errorf("notice lacks dev.zooid.thread_result: %v", n.Content)
	}
	if m, ok := n.Content["m.mentions"].(map[string]any); !ok || len(m) != 0 {
		t.Errorf("notice mentions = %v, want empty", n.Content["m.mentions"])
	}
	if !strings.Contains(n.Content["body"].(string), "42") {
		t.Errorf("notice body %q lacks the output", n.Content["body"])
	}

	wakes := e.wakesCopy()
	if len(wakes) != 1 {
		t.Fatalf("%d wakes, want 1", len(wakes))
	}
	if wakes[0].Parent != task.Parent || !strings.Contains(wakes[0].Text, "42") || !strings.Contains(wakes[0].Text, "complete") {
		t.Errorf("wake = %+v", wakes[0])
	}
	got, _ := e.m.TaskByThread(roomA, task.ThreadID)
	if got.State != StateClosed || !got.Report.Done || got.Result.Output != "42" {
		t.Errorf("task after close = %+v", got)
	}
	// A closed task's session is no longer an assignee.
	if res, _ := e.m.Complete(ctx, assignee(task), "late"); res.Status != tools.CompleteRefused {
		t.Errorf("complete after close = %+v", res)
	}
}

func TestNotifyNoneReportsOnlyInThread(t *testing.T) {
	e := newEnv(t)
	task := e.startOne(caller("alice", roomA, "$home"), "none", "bob")
	if err := e.m.TurnEnded(context.Background(), task.ThreadID, TurnOutcome{StopReason: "max_tokens"}); err != nil {
		t.Fatal(err)
	}
	results := e.hs.ok(zevent.KeyThreadResult)
	if len(results) != 1 || results[0].Content["status"] != "partial" || results[0].Content["reason"] != "max_tokens" {
		t.Fatalf("thread results = %+v", results)
	}
	if n := len(e.hs.notices()); n != 0 {
		t.Errorf("%d notices with notify none", n)
	}
	if n := len(e.wakesCopy()); n != 0 {
		t.Errorf("%d wakes with notify none", n)
	}
	if got, _ := e.m.TaskByThread(roomA, task.ThreadID); !got.Report.Done {
		t.Errorf("not marked reported: %+v", got.Report)
	}
}

func TestCallerWithoutThreadGetsTopLevelNotice(t *testing.T) {
	e := newEnv(t)
	task := e.startOne(caller("alice", roomA, ""), "", "bob")
	if err := e.m.TurnEnded(context.Background(), task.ThreadID, TurnOutcome{StopReason: "end_turn"}); err != nil {
		t.Fatal(err)
	}
	n := e.hs.notices()
	if len(n) != 1 || n[0].Content["m.relates_to"] != nil || field(n[0].Content, "dev.zooid.thread_result", "reason") != ReasonNoResult {
		t.Fatalf("notices = %+v", n)
	}
}

func TestCompleteTask(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := caller("alice", roomA, "$home")
	task := e.startOne(c, "", "bob")
	me := assignee(task)

	check := func(name string, c tools.Caller, summary, status, reason string) {
		t.Helper()
		res, err := e.m.Complete(ctx, c, summary)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if res.Status != status || res.Reason != reason {
			t.Errorf("%s: %+v, want %s %s", name, res, status, reason)
		}
	}
	check("empty", me, " \n", tools.CompleteRefused, ReasonEmptySummary)
	check("caller", c, "x", tools.CompleteRefused, ReasonNotAssignee)
	other := me
	other.Agent, other.UserID = "carol", "@carol:hs"
	check("other agent in the thread", other, "x", tools.CompleteRefused, ReasonNotAssignee)
	wrongRoom := me
	wrongRoom.Room = roomB
	check("other room", wrongRoom, "x", tools.CompleteRefused, ReasonNotAssignee)
	check("first", me, "first summary", tools.CompleteRecorded, "")
	check("second", me, "second summary", tools.CompleteAlreadyRecorded, "")

	// Recording does not end the turn: the task is open until judged.
	if got, _ := e.m.TaskByThread(roomA, task.ThreadID); got.State != StateOpen || got.Summary != "first summary" {
		t.Fatalf("after complete: %+v", got)
	}
	// The summary survives a restart before the turn ends.
	e.reopen()
	if got, _ := e.m.TaskByThread(roomA, task.ThreadID); got.Summary != "first summary" {
		t.Fatalf("summary lost on reopen: %+v", got)
	}
	if err := e.m.TurnEnded(ctx, task.ThreadID, TurnOutcome{StopReason: "end_turn", LastProse: "bye"}); err != nil {
		t.Fatal(err)
	}
	r := e.hs.ok(zevent.KeyThreadResult)
	if len(r) != 1 || r[0].Content["output"] != "first summary" {
		t.Fatalf("results = %+v", r)
	}
}
