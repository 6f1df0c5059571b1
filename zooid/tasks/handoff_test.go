package tasks

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/zooid-dev/zooid/zooid/tools"
)

func TestHandoffs(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	task := e.startOne(caller("alice", roomA, "$home"), "", "bob")
	th := task.ThreadID

	if err := e.m.StartHandoff(th, "carol", "alice"); !errors.Is(err, ErrNotHandoffParty) {
		t.Errorf("handoff from a bystander: %v", err)
	}
	if err := e.m.StartHandoff(th, "bob", "bob"); !errors.Is(err, ErrCircularHandoff) {
		t.Errorf("self handoff: %v", err)
	}
	if err := e.m.StartHandoff(th, "bob", "dave"); err == nil || errors.Is(err, ErrCircularHandoff) {
		t.Errorf("handoff to an agent outside the room: %v", err)
	}
	if err := e.m.StartHandoff("$nope", "bob", "carol"); !errors.Is(err, ErrNoOpenTask) {
		t.Errorf("handoff outside a task: %v", err)
	}
	if err := e.m.StartHandoff(th, "bob", "carol"); err != nil {
		t.Fatalf("bob → carol: %v", err)
	}
	// carol hands on to alice; alice back to bob or carol is circular.
	if err := e.m.StartHandoff(th, "carol", "alice"); err != nil {
		t.Fatalf("carol → alice: %v", err)
	}
	for _, to := range []string{"bob", "carol"} {
		if err := e.m.StartHandoff(th, "alice", to); !errors.Is(err, ErrCircularHandoff) {
			t.Errorf("alice → %s: %v, want circular", to, err)
		}
	}

	// While a handoff is outstanding: complete is refused and turns stay open.
	if res, _ := e.m.Complete(ctx, assignee(task), "done"); res.Status != tools.CompleteRefused || res.Reason != ReasonHandoffOutstanding {
		t.Errorf("complete during handoff = %+v", res)
	}
	if err := e.m.TurnEnded(ctx, th, TurnOutcome{StopReason: "end_turn", LastProse: "@carol please"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.m.TaskByThread(roomA, th); got.State != StateOpen || len(got.Handoffs) != 2 {
		t.Fatalf("after handoff turn: %+v", got)
	}
	// Handoffs survive a reopen.
	e.reopen()

	w, err := e.m.HandoffEnded(th, "alice", "alice's part")
	if err != nil || w.Agent != "carol" || w.Thread != th || w.Room != roomA || !strings.Contains(w.Text, "alice's part") {
		t.Fatalf("alice ended: %+v %v", w, err)
	}
	if _, err := e.m.HandoffEnded(th, "alice", "again"); !errors.Is(err, ErrNoHandoff) {
		t.Errorf("second end: %v", err)
	}
	if w.Owed {
		t.Errorf("alice's return goes to carol, a callee, yet is owed to the assignee: %+v", w)
	}
	w, err = e.m.HandoffEnded(th, "carol", "")
	if err != nil || w.Agent != "bob" || !strings.Contains(w.Text, "without a reply") || !w.Owed {
		t.Fatalf("carol ended: %+v %v", w, err)
	}
	// The daemon's session of bob takes up the return.
	e.m.ReturnTaken(th)
	if res, _ := e.m.Complete(ctx, assignee(task), "all done"); res.Status != tools.CompleteRecorded {
		t.Errorf("complete after handoffs = %+v", res)
	}
	if err := e.m.TurnEnded(ctx, th, TurnOutcome{StopReason: "end_turn"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.m.TaskByThread(roomA, th); got.State != StateClosed || got.Result.Output != "all done" {
		t.Fatalf("after close: %+v", got)
	}
	if err := e.m.StartHandoff(th, "bob", "carol"); !errors.Is(err, ErrNoOpenTask) {
		t.Errorf("handoff in a closed task: %v", err)
	}
}

// A turn of the assignee's that ended before its handoff's return, but is
// judged after the return ended the handoff (the daemon reads the room's
// members first), leaves the task open: the return is still to be taken up
// by the assignee's session. Once taken, the next turn's end closes it.
func TestATurnJudgedAfterItsHandoffReturnedIsNotTheLast(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	task := e.startOne(caller("alice", roomA, "$home"), "", "bob")
	th := task.ThreadID
	if err := e.m.StartHandoff(th, "bob", "carol"); err != nil {
		t.Fatal(err)
	}
	w, err := e.m.HandoffEnded(th, "carol", "certificates valid")
	if err != nil || w.Agent != "bob" || !w.Owed {
		t.Fatalf("carol ended: %+v %v", w, err)
	}
	if err := e.m.TurnEnded(ctx, th, TurnOutcome{StopReason: "end_turn", LastProse: "@carol please check"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.m.TaskByThread(roomA, th); got.State != StateOpen {
		t.Fatalf("the turn that handed off closed the task with %+v before its return was taken", got.Result)
	}
	e.m.ReturnTaken(th)
	if err := e.m.TurnEnded(ctx, th, TurnOutcome{StopReason: "end_turn", LastProse: "svc-a is clean"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := e.m.TaskByThread(roomA, th); got.State != StateClosed || got.Result.Output != "svc-a is clean" {
		t.Fatalf("after the return's turn: %+v %+v", got, got.Result)
	}
}

func TestHeader(t *testing.T) {
	e := newEnv(t)
	task := e.startOne(caller("alice", roomA, "$home"), "", "bob")
	h := Header(task)
	for _, want := range []string{"alice", "@alice:hs", "assignee", "zooid_complete_task", "end your turn", "cannot start task threads", "@mention"} {
		if !strings.Contains(h, want) {
			t.Errorf("header lacks %q: %s", want, h)
		}
	}
}

func TestOpenRefusesCorruptJournal(t *testing.T) {
	dir := t.TempDir()
	db, err := bolt.Open(filepath.Join(dir, journalFile), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketTasks)
		if err != nil {
			return err
		}
		return b.Put([]byte("zt1"), []byte("{not json"))
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, dir: dir, hs: newFakeHS()}
	_, err = Open(e.options())
	if err == nil || !strings.Contains(err.Error(), "zt1") {
		t.Fatalf("Open on a corrupt record: %v", err)
	}
	// Nothing was lost: the record is still there for an operator to inspect.
	raw, _ := os.ReadFile(filepath.Join(dir, journalFile))
	if !strings.Contains(string(raw), "{not json") {
		t.Fatalf("corrupt record was dropped")
	}
	if _, err := Open(Options{StateDir: dir}); err == nil {
		t.Fatalf("Open without Send/Agents succeeded")
	}
}

func TestClosedManager(t *testing.T) {
	e := newEnv(t)
	if err := e.m.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Start(context.Background(), caller("alice", roomA, ""), tools.StartRequest{Tasks: specs("bob")}); err == nil {
		t.Fatal("Start after Close succeeded")
	}
	if err := e.m.Recover(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("Recover after Close: %v", err)
	}
	if err := e.m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func BenchmarkStartAndClose(b *testing.B) {
	dir := b.TempDir()
	hs := newFakeHS()
	e := &env{dir: dir, hs: hs}
	m, err := Open(e.options())
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	ctx := context.Background()
	c := caller("alice", roomA, "$home")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := m.Start(ctx, c, tools.StartRequest{Tasks: specs("bob"), Notify: "none"})
		if err != nil || res.Results[0].Status != tools.TaskStarted {
			b.Fatalf("start: %+v %v", res, err)
		}
		if err := m.TurnEnded(ctx, res.Results[0].ThreadID, TurnOutcome{StopReason: "end_turn", LastProse: "x"}); err != nil {
			b.Fatal(err)
		}
	}
}
