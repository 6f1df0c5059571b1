package tasks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zooid-dev/zooid/zooid/tools"
)

func TestAdmissionReasonsIndexAligned(t *testing.T) {
	e := newEnv(t)
	res := e.start(caller("alice", roomA, "$home"), "", "bob", "nobody", "dave", "carol", "alice")
	want := []string{"started:", "refused:unknown_agent", "refused:not_in_room", "started:", "refused:self"}
	if got := statuses(res); !slices.Equal(got, want) {
		t.Fatalf("statuses = %v, want %v", got, want)
	}
	for i, name := range []string{"bob", "nobody", "dave", "carol"} {
		if res.Results[i].Agent != name {
			t.Errorf("results[%d].agent = %q, want %q", i, res.Results[i].Agent, name)
		}
	}
	if res.Results[0].ThreadID == "" || res.Results[3].ThreadID == "" || res.Results[0].ThreadID == res.Results[3].ThreadID {
		t.Fatalf("thread ids = %q, %q; want two distinct", res.Results[0].ThreadID, res.Results[3].ThreadID)
	}
	if res.Results[1].ThreadID != "" || res.Results[2].ThreadID != "" {
		t.Errorf("refused tasks carry thread ids: %+v", res.Results)
	}
	if res.Notify != tools.NotifyCaller {
		t.Errorf("notify = %q, want default caller", res.Notify)
	}
	if !strings.Contains(res.Delivery, "new turn") || !strings.Contains(res.Delivery, "End your turn now") {
		t.Errorf("delivery for caller = %q", res.Delivery)
	}
	// Each started result's thread is the event that was posted for it.
	roots := e.hs.ok("m.room.message")
	if len(roots) != 2 {
		t.Fatalf("posted %d roots, want 2", len(roots))
	}
	for _, i := range []int{0, 3} {
		task, ok := e.m.TaskByThread(roomA, res.Results[i].ThreadID)
		if !ok || task.Agent != res.Results[i].Agent || task.State != StateOpen {
			t.Errorf("TaskByThread(results[%d]) = %+v, %v", i, task, ok)
		}
	}
}

func TestAdmissionDepthLimitFirst(t *testing.T) {
	e := newEnv(t)
	c := caller("alice", roomA, "$home")
	c.Kind = tools.TaskAssignee
	res := e.start(c, "", "bob", "nobody", "dave")
	for i, r := range res.Results {
		if r.Status != tools.TaskRefused || r.Reason != tools.ReasonDepthLimit {
			t.Errorf("results[%d] = %+v, want refused depth_limit", i, r)
		}
	}
	if n := len(e.hs.all()); n != 0 {
		t.Fatalf("%d sends for refused tasks", n)
	}

	// A conversation session whose thread is a task thread is also one level deep,
	// even after the task closed.
	task := e.startOne(caller("alice", roomA, "$home"), "none", "bob")
	if err := e.m.TurnEnded(context.Background(), task.ThreadID, TurnOutcome{StopReason: "end_turn", LastProse: "done"}); err != nil {
		t.Fatal(err)
	}
	res = e.start(caller("carol", roomA, task.ThreadID), "", "bob")
	if got := statuses(res); !slices.Equal(got, []string{"refused:depth_limit"}) {
		t.Fatalf("from a task thread: %v", got)
	}
	// The same root id in another room is not that task thread.
	res = e.start(caller("bob", roomB, task.ThreadID), "", "alice")
	if got := statuses(res); !slices.Equal(got, []string{"started:"}) {
		t.Fatalf("other room: %v", got)
	}
}

func TestAdmissionCapacityOrderAndReadmission(t *testing.T) {
	e := newEnv(t)
	c := caller("alice", roomA, "$home")
	res := e.start(c, "", "bob", "bob", "carol", "bob", "nobody", "bob", "dave", "carol")
	want := []string{"started:", "started:", "started:", "started:", "refused:unknown_agent", "started:", "refused:not_in_room", "refused:at_capacity"}
	if got := statuses(res); !slices.Equal(got, want) {
		t.Fatalf("statuses = %v, want %v", got, want)
	}
	// Another room has its own capacity.
	if got := statuses(e.start(caller("alice", roomB, ""), "", "dave")); !slices.Equal(got, []string{"started:"}) {
		t.Fatalf("room B: %v", got)
	}
	// Full room A: at_capacity, but the reasons before it still win.
	if got := statuses(e.start(c, "", "nobody", "dave", "bob")); !slices.Equal(got, []string{"refused:unknown_agent", "refused:not_in_room", "refused:at_capacity"}) {
		t.Fatalf("full room: %v", got)
	}
	// Closing one frees one slot.
	if err := e.m.TurnEnded(context.Background(), res.Results[0].ThreadID, TurnOutcome{StopReason: "end_turn", LastProse: "ok"}); err != nil {
		t.Fatal(err)
	}
	if got := statuses(e.start(c, "", "bob", "bob")); !slices.Equal(got, []string{"started:", "refused:at_capacity"}) {
		t.Fatalf("after one close: %v", got)
	}
	// Capacity survives a restart: the journal still holds 5 open tasks.
	e.reopen()
	if got := statuses(e.start(c, "", "bob")); !slices.Equal(got, []string{"refused:at_capacity"}) {
		t.Fatalf("after reopen: %v", got)
	}
}

// Reserved tasks whose posts are still in flight count against capacity.
func TestAdmissionCountsReserved(t *testing.T) {
	e := newEnv(t)
	release := make(chan struct{})
	arrived := make(chan struct{}, 16)
	e.hs.hook = func(s sent) {
		arrived <- struct{}{}
		<-release
	}
	c := caller("alice", roomA, "$home")
	var first tools.StartResult
	done := make(chan error, 1)
	go func() {
		var err error
		first, err = e.m.Start(context.Background(), c, tools.StartRequest{Tasks: specs("bob", "bob", "bob", "bob"), Notify: "caller"})
		done <- err
	}()
	// The first root is in flight (posts go one at a time).
	<-arrived
	// Four reserved, none posted: one slot left.
	e.hs.setHook(nil)
	second, err := e.m.Start(context.Background(), c, tools.StartRequest{Tasks: specs("carol", "carol"), Notify: "caller"})
	close(release)
	if err != nil {
		t.Fatal(err)
	}
	if got := statuses(second); !slices.Equal(got, []string{"started:", "refused:at_capacity"}) {
		t.Fatalf("while 4 reserved: %v", got)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := statuses(first); !slices.Equal(got, []string{"started:", "started:", "started:", "started:"}) {
		t.Fatalf("first call: %v", got)
	}
}

func TestRootPostShape(t *testing.T) {
	e := newEnv(t)
	c := caller("alice", roomA, "$home")
	task := e.startOne(c, "none", "bob")
	roots := e.hs.ok("m.room.message")
	if len(roots) != 1 {
		t.Fatalf("%d roots", len(roots))
	}
	r := roots[0]
	if r.As != "@alice:hs" || r.Room != roomA {
		t.Errorf("posted as %s in %s, want @alice:hs in %s", r.As, r.Room, roomA)
	}
	if r.Txn != task.AttemptID || task.AttemptID == "" {
		t.Errorf("txn %q, attempt %q: want equal", r.Txn, task.AttemptID)
	}
	if r.EventID != task.ThreadID {
		t.Errorf("thread id %s, posted %s", task.ThreadID, r.EventID)
	}
	if r.Content["m.relates_to"] != nil {
		t.Errorf("root is not top-level: %v", r.Content["m.relates_to"])
	}
	body, _ := r.Content["body"].(string)
	if !strings.Contains(body, "@bob:hs") || !strings.Contains(body, "please do thing 0") {
		t.Errorf("body %q lacks mention or prompt", body)
	}
	if got := fmt.Sprint(field(r.Content, "m.mentions", "user_ids")); got != "[@bob:hs]" {
		t.Errorf("m.mentions.user_ids = %s", got)
	}
	ts := field(r.Content, "dev.zooid.thread_start").(map[string]any)
	want := map[string]any{"version": float64(1), "assignee": "bob", "attempt_id": task.AttemptID, "notify": "none"}
	for k, v := range want {
		if ts[k] != v {
			t.Errorf("thread_start.%s = %v, want %v", k, ts[k], v)
		}
	}
	p := ts["parent"].(map[string]any)
	if p["agent"] != "alice" || p["thread_root"] != "$home" || p["session_key"] != "alice|$home" {
		t.Errorf("thread_start.parent = %v", p)
	}
	if task.Parent.UserID != "@alice:hs" || task.Parent.Room != roomA || task.Parent.ThreadRoot != "$home" {
		t.Errorf("task parent = %+v", task.Parent)
	}
}

func TestPostRetriesOnceWithSameTxn(t *testing.T) {
	e := newEnv(t)
	e.hs.fail = func(s sent, nth int) error {
		if nth == 0 {
			return errors.New("503 try again")
		}
		return nil
	}
	task := e.startOne(caller("alice", roomA, "$home"), "", "bob")
	calls := e.hs.all()
	if len(calls) != 2 || calls[0].Txn != task.AttemptID || calls[1].Txn != task.AttemptID {
		t.Fatalf("calls = %+v, want two with txn %s", calls, task.AttemptID)
	}
}

func TestPostFailsAfterOneRetry(t *testing.T) {
	e := newEnv(t)
	e.hs.fail = func(s sent, nth int) error {
		if s.Content["body"] != nil && strings.Contains(s.Content["body"].(string), "thing 1") {
			return errors.New("M_FORBIDDEN")
		}
		return nil
	}
	c := caller("alice", roomA, "$home")
	res := e.start(c, "", "bob", "carol", "bob")
	if got := statuses(res); !slices.Equal(got, []string{"started:", "failed:post_failed", "started:"}) {
		t.Fatalf("statuses = %v", got)
	}
	var failing []sent
	for _, s := range e.hs.all() {
		if s.Err != nil {
			failing = append(failing, s)
		}
	}
	if len(failing) != 2 || failing[0].Txn != failing[1].Txn {
		t.Fatalf("failed calls = %+v, want exactly two with one txn", failing)
	}
	if strings.Contains(res.Results[1].Reason, "M_FORBIDDEN") {
		t.Errorf("backend detail leaked to the model: %q", res.Results[1].Reason)
	}
	// A failed task frees its slot and is never reported to the caller later.
	e.hs.setFail(nil)
	if got := statuses(e.start(c, "", "bob", "bob", "bob", "bob")); !slices.Equal(got, []string{"started:", "started:", "started:", "refused:at_capacity"}) {
		t.Fatalf("after a failed post: %v", got)
	}
	e.reopen()
	if err := e.m.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, n := range e.hs.notices() {
		if strings.Contains(n.Content["body"].(string), "post_failed") {
			t.Fatalf("failed post reported again after restart: %v", n.Content["body"])
		}
	}
}

// Roots are posted one at a time, in the order the tasks were given, so the room
// shows them in that order: a post starts only after the one before it returned.
func TestPostsInOrderGiven(t *testing.T) {
	e := newEnv(t)
	const n = 4
	var mu sync.Mutex
	inFlight, most := 0, 0
	var order []string
	another := make(chan struct{}, n)
	e.hs.hook = func(s sent) {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		order = append(order, s.Content["body"].(string))
		first := len(order) == 1
		mu.Unlock()
		if first {
			// Give a concurrent poster every chance to overtake the first post.
			select {
			case <-another:
			case <-time.After(500 * time.Millisecond):
			}
		} else {
			another <- struct{}{}
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
	}
	res := e.start(caller("alice", roomA, "$home"), "", "bob", "carol", "bob", "carol")
	if got := statuses(res); !slices.Equal(got, []string{"started:", "started:", "started:", "started:"}) {
		t.Fatalf("statuses = %v", got)
	}
	if most != 1 {
		t.Errorf("%d root posts were in flight at once, want 1", most)
	}
	for i, body := range order {
		if !strings.HasSuffix(body, fmt.Sprint(i)) {
			t.Errorf("post %d was %q, want the prompt of task %d", i, body, i)
		}
	}
	for i, r := range res.Results {
		task, ok := e.m.TaskByThread(roomA, r.ThreadID)
		if !ok || !strings.HasSuffix(task.Prompt, fmt.Sprint(i)) {
			t.Errorf("results[%d] thread %s holds prompt %q", i, r.ThreadID, task.Prompt)
		}
	}
}

func TestStartRejectsBadNotify(t *testing.T) {
	e := newEnv(t)
	_, err := e.m.Start(context.Background(), caller("alice", roomA, ""), tools.StartRequest{Tasks: specs("bob"), Notify: "loud"})
	var te *tools.Error
	if !errors.As(err, &te) || te.Code != tools.CodeInvalidArgument {
		t.Fatalf("err = %v, want invalid_argument", err)
	}
	res := e.start(caller("alice", roomA, ""), "none", "bob", "nobody")
	if res.Notify != "none" || !strings.Contains(res.Delivery, "nothing comes back") {
		t.Errorf("none: notify %q delivery %q", res.Notify, res.Delivery)
	}
	res = e.start(caller("alice", roomA, ""), "caller", "nobody")
	if !strings.Contains(res.Delivery, "No task thread was started") {
		t.Errorf("none started: delivery %q", res.Delivery)
	}
}
