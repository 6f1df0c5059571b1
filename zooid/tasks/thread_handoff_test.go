package tasks

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix/event"

	"github.com/zooid-dev/zooid/zooid/tools"
)

// callees records the handoffs StartCallee was handed.
type callees struct {
	mu sync.Mutex
	hs []ThreadHandoff
}

func (c *callees) start(h ThreadHandoff) {
	c.mu.Lock()
	c.hs = append(c.hs, h)
	c.mu.Unlock()
}

func (c *callees) got() []ThreadHandoff {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]ThreadHandoff(nil), c.hs...)
}

// newHandoffEnv is newEnv whose managers run callees through cs.
func newHandoffEnv(t *testing.T) (*env, *callees) {
	t.Helper()
	cs := &callees{}
	e := &env{t: t, dir: t.TempDir(), hs: newFakeHS()}
	e.openWith(func(o *Options) { o.StartCallee = cs.start })
	return e, cs
}

func (e *env) openWith(tune func(*Options)) {
	e.t.Helper()
	o := e.options()
	tune(&o)
	m, err := Open(o)
	if err != nil {
		e.t.Fatalf("Open: %v", err)
	}
	e.m = m
	e.t.Cleanup(func() { _ = m.Close() })
}

// restartWith closes the manager without Recover, opens the journal again with
// cs as StartCallee, and recovers.
func (e *env) restartWith(cs *callees) {
	e.t.Helper()
	if err := e.m.Close(); err != nil {
		e.t.Fatalf("Close: %v", err)
	}
	e.openWith(func(o *Options) { o.StartCallee = cs.start })
	if err := e.m.Recover(context.Background()); err != nil {
		e.t.Fatalf("Recover: %v", err)
	}
}

func (e *env) handoff(c tools.Caller, to string) tools.HandoffResult {
	e.t.Helper()
	res, err := e.m.Handoff(context.Background(), c, tools.HandoffRequest{Agent: to, Prompt: "check the certificates"})
	if err != nil {
		e.t.Fatalf("Handoff: %v", err)
	}
	return res
}

func handoffNotices(e *env) []sent {
	var out []sent
	for _, s := range e.hs.ok("m.room.message") {
		if s.Content["dev.zooid.handoff"] != nil {
			out = append(out, s)
		}
	}
	return out
}

// TestHandoffRefusals: each refusal is a result with its reason, and nothing
// is posted or started for it.
func TestHandoffRefusals(t *testing.T) {
	e, cs := newHandoffEnv(t)
	alice := caller("alice", roomA, "$home")
	for _, c := range []struct{ to, reason string }{
		{"alice", tools.ReasonSelf},
		{"zed", tools.ReasonUnknownAgent},
		{"dave", tools.ReasonNotInRoom},
	} {
		if got := e.handoff(alice, c.to); got.Status != tools.HandoffRefused || got.Reason != c.reason {
			t.Errorf("handoff to %s: %+v, want refused %s", c.to, got, c.reason)
		}
	}
	if got := e.handoff(alice, "bob"); got.Status != tools.HandoffStarted {
		t.Fatalf("handoff to bob: %+v", got)
	}
	if got := e.handoff(alice, "carol"); got.Status != tools.HandoffRefused || got.Reason != tools.ReasonAlreadyOpen {
		t.Fatalf("second handoff: %+v, want refused already_open", got)
	}
	// bob, working for alice, handing back to alice would leave both waiting.
	if got := e.handoff(caller("bob", roomA, "$home"), "alice"); got.Status != tools.HandoffRefused || got.Reason != ReasonCircularHandoff {
		t.Fatalf("handoff back up the chain: %+v, want refused circular_handoff", got)
	}
	if n := len(handoffNotices(e)); n != 1 {
		t.Fatalf("%d handoff notices posted, want 1", n)
	}
	if n := len(cs.got()); n != 1 {
		t.Fatalf("%d callees started, want 1", n)
	}
}

// TestHandoffReturnsOnce: the notice mentions the callee in the caller's
// thread, marked dev.zooid.handoff; the callee's final message wakes the
// caller once, in its own session, and only then is a new handoff possible.
func TestHandoffReturnsOnce(t *testing.T) {
	e, cs := newHandoffEnv(t)
	alice := caller("alice", roomA, "$home")
	res := e.handoff(alice, "bob")
	if res.Status != tools.HandoffStarted || res.EventID == "" || res.Delivery == "" {
		t.Fatalf("handoff: %+v", res)
	}
	n := handoffNotices(e)[0]
	if n.As != "@alice:hs" || field(n.Content, "msgtype") != "m.notice" || field(n.Content, "m.relates_to", "event_id") != "$home" ||
		field(n.Content, "dev.zooid.handoff", "to") != "bob" || field(n.Content, "dev.zooid.handoff", "from") != "alice" {
		t.Fatalf("handoff notice: %+v", n)
	}
	if ids, _ := field(n.Content, "m.mentions", "user_ids").([]any); len(ids) != 1 || ids[0] != "@bob:hs" {
		t.Fatalf("handoff notice mentions %v, want [@bob:hs]", ids)
	}
	h := cs.got()[0]
	if !e.m.HandoffOutstanding(roomA, "$home", "alice") || !e.m.IsHandoffCallee(roomA, "$home", "bob") {
		t.Fatal("the handoff is not outstanding while bob runs")
	}
	if err := e.m.CalleeDone(h.ID, "certificates valid until 2027", nil); err != nil {
		t.Fatal(err)
	}
	if err := e.m.CalleeDone(h.ID, "said again", nil); err != nil {
		t.Fatal(err)
	}
	w := e.wakesCopy()
	if len(w) != 1 || w[0].Parent.Agent != "alice" || w[0].Parent.ThreadRoot != "$home" ||
		w[0].Text != "[handoff return] from bob\n\ncertificates valid until 2027" {
		t.Fatalf("wakes %+v, want one of alice in $home with bob's words", w)
	}
	if e.m.HandoffOutstanding(roomA, "$home", "alice") {
		t.Fatal("still outstanding after the return was taken")
	}
	if got := e.handoff(alice, "carol"); got.Status != tools.HandoffStarted {
		t.Fatalf("a handoff after the return: %+v", got)
	}
}

// TestHandoffWithoutReply: a callee ending with no prose returns that.
func TestHandoffWithoutReply(t *testing.T) {
	e, cs := newHandoffEnv(t)
	e.handoff(caller("alice", roomA, "$home"), "bob")
	if err := e.m.CalleeDone(cs.got()[0].ID, "  ", nil); err != nil {
		t.Fatal(err)
	}
	if w := e.wakesCopy(); len(w) != 1 || w[0].Text != "[handoff return] from bob: it ended its turn without a reply." {
		t.Fatalf("wakes %+v", w)
	}
}

// TestHandoffWhoseCalleeFailed: a callee whose turn failed returns that, with
// the error and what it said before.
func TestHandoffWhoseCalleeFailed(t *testing.T) {
	e, cs := newHandoffEnv(t)
	e.handoff(caller("alice", roomA, "$home"), "bob")
	if err := e.m.CalleeDone(cs.got()[0].ID, "looking", errors.New("agent process exited")); err != nil {
		t.Fatal(err)
	}
	want := "[handoff return] from bob: its turn failed (agent_error): agent process exited\n\nIts last message before that:\n\nlooking"
	if w := e.wakesCopy(); len(w) != 1 || w[0].Text != want {
		t.Fatalf("wakes %+v, want %q", w, want)
	}
}

// TestHandoffAcrossRestarts: a handoff running at a crash returns once,
// interrupted_by_restart; a return queued but not taken is delivered again
// after a restart and never after it was taken.
func TestHandoffAcrossRestarts(t *testing.T) {
	e, cs := newHandoffEnv(t)
	e.handoff(caller("alice", roomA, "$home"), "bob")
	e.restartWith(cs)
	w := e.wakesCopy()
	if len(w) != 1 || w[0].Text != "[handoff return] from bob: the daemon restarted while bob was working on it, so its turn was interrupted (interrupted_by_restart). Read this thread to see how far it got." {
		t.Fatalf("wakes after a restart %+v", w)
	}
	e.restartWith(cs)
	if n := len(e.wakesCopy()); n != 1 {
		t.Fatalf("%d wakes after a second restart, want still 1", n)
	}

	e.handoff(caller("alice", roomA, "$other"), "bob")
	e.holdWakes = true // alice is mid-turn: the return waits in her queue
	if err := e.m.CalleeDone(cs.got()[1].ID, "done", nil); err != nil {
		t.Fatal(err)
	}
	if n := len(e.wakesCopy()); n != 2 {
		t.Fatalf("%d wakes, want 2", n)
	}
	e.holdWakes = false
	e.restartWith(cs) // the queued wake died with the process
	w = e.wakesCopy()
	if len(w) != 3 || w[2].Text != "[handoff return] from bob\n\ndone" {
		t.Fatalf("wakes after a restart with a return owed %+v", w)
	}
	e.restartWith(cs)
	if n := len(e.wakesCopy()); n != 3 {
		t.Fatalf("%d wakes after the return was taken and a restart, want 3", n)
	}
}

// TestHandoffReservedAtCrashIsPosted: a handoff journaled but not known posted
// (the daemon died in between) is posted again with its txn id, so the thread
// holds one notice, and its callee runs.
func TestHandoffReservedAtCrashIsPosted(t *testing.T) {
	e, cs := newHandoffEnv(t)
	h, reason, err := e.m.admitHandoff("alice", "@alice:hs", roomA, "$home", "k", "bob", "check it", false)
	if err != nil || reason != "" {
		t.Fatalf("admit: %v %q", err, reason)
	}
	// The post landed; the journal write after it did not happen.
	if _, err := e.hs.Send(context.Background(), "@alice:hs", roomA, event.EventMessage, handoffContent(h), h.ID); err != nil {
		t.Fatal(err)
	}
	e.restartWith(cs)
	if n := len(handoffNotices(e)); n != 2 { // the second send is the same txn: one event
		t.Fatalf("%d sends, want 2 with one txn id", n)
	}
	ns := handoffNotices(e)
	if ns[0].EventID != ns[1].EventID {
		t.Fatalf("the repost made a second event: %s, %s", ns[0].EventID, ns[1].EventID)
	}
	got := cs.got()
	if len(got) != 1 || got[0].ID != h.ID || got[0].EventID != ns[0].EventID {
		t.Fatalf("callees %+v, want bob for %s", got, h.ID)
	}
	if len(e.wakesCopy()) != 0 {
		t.Fatal("the caller was woken although its handoff goes on")
	}
}

// TestCompleteRefusedWhileToolHandoffOutstanding: an assignee that handed off
// with the tool cannot complete until the return is taken.
func TestCompleteRefusedWhileToolHandoffOutstanding(t *testing.T) {
	e, cs := newHandoffEnv(t)
	task := e.startOne(caller("alice", roomA, "$home"), tools.NotifyCaller, "bob")
	as := assignee(task)
	if got := e.handoff(as, "carol"); got.Status != tools.HandoffStarted {
		t.Fatalf("handoff from the assignee: %+v", got)
	}
	res, err := e.m.Complete(context.Background(), as, "all clean")
	if err != nil || res.Status != tools.CompleteRefused || res.Reason != ReasonHandoffOutstanding {
		t.Fatalf("complete while handing off: %+v %v", res, err)
	}
	if err := e.m.CalleeDone(cs.got()[0].ID, "carol's part is clean", nil); err != nil {
		t.Fatal(err)
	}
	res, err = e.m.Complete(context.Background(), as, "all clean")
	if err != nil || res.Status != tools.CompleteRecorded {
		t.Fatalf("complete after the return: %+v %v", res, err)
	}
	if !slices.ContainsFunc(e.wakesCopy(), func(w wake) bool { return w.Parent.Agent == "bob" }) {
		t.Fatal("bob was not woken with carol's return")
	}
}

// TestTwoCallersOneCallee: two agents handing off to the same one in a thread
// are both returned when its one session is done.
func TestTwoCallersOneCallee(t *testing.T) {
	e, _ := newHandoffEnv(t)
	e.handoff(caller("alice", roomA, "$home"), "carol")
	e.handoff(caller("bob", roomA, "$home"), "carol")
	hs := e.m.CalleeOf(roomA, "$home", "carol")
	if len(hs) != 2 || hs[0].From != "alice" || hs[1].From != "bob" {
		t.Fatalf("carol's handoffs %+v, want alice's then bob's", hs)
	}
	for _, h := range hs {
		if err := e.m.CalleeDone(h.ID, "both checked", nil); err != nil {
			t.Fatal(err)
		}
	}
	var woken []string
	for _, w := range e.wakesCopy() {
		woken = append(woken, w.Parent.Agent)
	}
	if !slices.Equal(woken, []string{"alice", "bob"}) {
		t.Fatalf("woken %v, want alice and bob once each", woken)
	}
	if e.m.IsHandoffCallee(roomA, "$home", "carol") {
		t.Fatal("carol still counts as a callee")
	}
}

// TestHandoffReservedLongAgoIsReturnedNotPosted: a reservation older than
// RepostWithin is not posted again (the homeserver may have forgotten its txn
// id, so a repost might double the notice): it returns interrupted, once.
func TestHandoffReservedLongAgoIsReturnedNotPosted(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	cs := &callees{}
	e := &env{t: t, dir: t.TempDir(), hs: newFakeHS(), now: func() time.Time { return now }}
	e.openWith(func(o *Options) { o.StartCallee = cs.start })
	if _, reason, err := e.m.admitHandoff("alice", "@alice:hs", roomA, "$home", "k", "bob", "check it", false); err != nil || reason != "" {
		t.Fatalf("admit: %v %q", err, reason)
	}
	now = now.Add(RepostWithin + time.Minute)
	e.restartWith(cs)
	if n := len(handoffNotices(e)); n != 0 {
		t.Fatalf("%d handoff notices posted, want none", n)
	}
	if len(cs.got()) != 0 {
		t.Fatal("the callee was started")
	}
	w := e.wakesCopy()
	if len(w) != 1 || !strings.Contains(w[0].Text, "interrupted_by_restart") {
		t.Fatalf("wakes %+v, want one interrupted return", w)
	}
	e.restartWith(cs)
	if n := len(e.wakesCopy()); n != 1 {
		t.Fatalf("%d wakes after another restart, want 1", n)
	}
}

// TestHandoffOfAClearedThreadWakesNobody: /clear ends the thread's sessions,
// so a return owed there wakes no new session, and the caller may hand off
// again.
func TestHandoffOfAClearedThreadWakesNobody(t *testing.T) {
	e, cs := newHandoffEnv(t)
	alice := caller("alice", roomA, "$home")
	e.handoff(alice, "bob")
	e.m.HandoffThreadCleared(roomA, "$home")
	if err := e.m.CalleeDone(cs.got()[0].ID, "late answer", nil); err != nil {
		t.Fatal(err)
	}
	if w := e.wakesCopy(); len(w) != 0 {
		t.Fatalf("wakes %+v after /clear, want none", w)
	}
	if got := e.handoff(alice, "carol"); got.Status != tools.HandoffStarted {
		t.Fatalf("a handoff after /clear: %+v", got)
	}
	e.restartWith(cs)
	if w := e.wakesCopy(); len(w) != 1 || !strings.Contains(w[0].Text, "from carol") {
		t.Fatalf("wakes after a restart %+v, want only carol's interrupted return", w)
	}
}
