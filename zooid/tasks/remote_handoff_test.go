package tasks

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/tools"
	"github.com/zooid-dev/zooid/zooid/zevent"
)

// A handoff to another daemon's agent (Remote): its notice mentions that
// agent, no callee starts here, it stays running across this daemon's
// restart, and only the callee's return wakes the caller, once.
func TestRemoteHandoffReturnsOnceFromItsCallee(t *testing.T) {
	cs := &callees{}
	e := &env{t: t, dir: t.TempDir(), hs: newFakeHS(), workstation: "laptop",
		other: func(room id.RoomID, addr string) (id.UserID, string, bool) {
			if room == roomA && (addr == "ci.bob" || addr == "bob") {
				return ciBob, "ci.bob", true
			}
			return "", "", false
		}}
	e.openWith(func(o *Options) { o.StartCallee = cs.start })
	c := caller("alice", roomA, "$home")
	if res := e.handoff(c, "ci.nobody"); res.Status != tools.HandoffRefused || res.Reason != tools.ReasonUnknownAgent {
		t.Fatalf("handoff to ci.nobody = %+v, want refused unknown_agent", res)
	}
	if res := e.handoff(c, "ci.bob"); res.Status != tools.HandoffStarted {
		t.Fatalf("handoff to ci.bob = %+v, want started", res)
	}
	if n := len(cs.got()); n != 0 {
		t.Fatalf("%d callees started here, want 0 (its daemon runs it)", n)
	}
	notices := handoffNotices(e)
	if len(notices) != 1 || field(notices[0].Content, "dev.zooid.handoff", "to") != "ci.bob" ||
		!strings.HasPrefix(notices[0].Content["body"].(string), string(ciBob)+" ") {
		t.Fatalf("notices = %+v, want one for ci.bob mentioning %s", notices, ciBob)
	}
	hid := field(notices[0].Content, "dev.zooid.handoff", "id").(string)

	e.restartWith(cs)
	if !e.m.HandoffOutstanding(roomA, "$home", "alice") {
		t.Fatal("after a restart the remote handoff is over, want it still running")
	}
	if n := len(e.wakesCopy()); n != 0 {
		t.Fatalf("a restart woke the caller %d times, want 0", n)
	}

	ret := zevent.HandoffReturn{Version: 1, ID: hid, From: "alice", To: "ci.bob", Output: "certificates renewed"}
	// Someone else's return, or one in another thread, changes nothing.
	for _, r := range []struct {
		thread id.EventID
		sender id.UserID
	}{{"$home", "@mallory:other"}, {"$elsewhere", ciBob}} {
		if err := e.m.RemoteHandoffReturn(roomA, r.thread, r.sender, ret); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(e.wakesCopy()); n != 0 {
		t.Fatalf("a stranger's return woke the caller %d times, want 0", n)
	}
	for range 2 { // the second is a redelivery
		if err := e.m.RemoteHandoffReturn(roomA, "$home", ciBob, ret); err != nil {
			t.Fatal(err)
		}
	}
	wakes := e.wakesCopy()
	if len(wakes) != 1 || wakes[0].Text != "[handoff return] from ci.bob\n\ncertificates renewed" || wakes[0].Parent.Agent != "alice" {
		t.Fatalf("wakes = %+v, want one for alice from ci.bob", wakes)
	}
	if e.m.HandoffOutstanding(roomA, "$home", "alice") {
		t.Fatal("the returned handoff is still outstanding")
	}
}

// A handoff notice another daemon's agent posted for an agent of this one is
// adopted once by its id; when the callee is done its return is posted in the
// thread as the callee (not woken here), and a restart mid-callee posts
// interrupted_by_restart, once.
func TestAdoptedHandoffPostsItsReturnInTheThread(t *testing.T) {
	e, cs := newHandoffEnv(t)
	const architect = id.UserID("@laptop.architect:other")
	hz := zevent.Handoff{Version: 1, ID: "zh-remote-1", From: "architect", To: "bob"}
	h, isNew := e.m.AdoptHandoff(roomA, "$thread", "$notice", architect, hz, "bob", "@bob:hs", "check it")
	if !isNew || !h.Adopted || h.State != HandoffRunning || h.To != "bob" || h.FromUser != architect {
		t.Fatalf("adopted = %+v, %v", h, isNew)
	}
	if _, again := e.m.AdoptHandoff(roomA, "$thread", "$notice", architect, hz, "bob", "@bob:hs", "check it"); again {
		t.Fatal("a notice met again was adopted twice")
	}
	if err := e.m.CalleeDone(h.ID, "all fine", nil); err != nil {
		t.Fatal(err)
	}
	rets := waitReturns(t, e, 1)
	if rets[0].As != "@bob:hs" || field(rets[0].Content, zevent.KeyHandoffReturn, "id") != "zh-remote-1" ||
		field(rets[0].Content, zevent.KeyHandoffReturn, "output") != "all fine" {
		t.Fatalf("return = %+v, want one by @bob:hs with all fine", rets[0])
	}
	if n := len(e.wakesCopy()); n != 0 {
		t.Fatalf("an adopted handoff woke %d callers here, want 0", n)
	}

	// A second one, cut short by a restart: interrupted, posted once.
	hz.ID = "zh-remote-2"
	if _, isNew := e.m.AdoptHandoff(roomA, "$thread", "$notice2", architect, hz, "bob", "@bob:hs", "again"); !isNew {
		t.Fatal("second handoff not adopted")
	}
	e.restartWith(cs)
	rets = waitReturns(t, e, 2)
	if field(rets[1].Content, zevent.KeyHandoffReturn, "reason") != ReasonInterruptedByRestart {
		t.Fatalf("return after a restart = %+v, want interrupted_by_restart", rets[1].Content)
	}
	e.restartWith(cs)
	if h, _ := e.m.handoffSnapshot("zh-remote-2"); !h.Woken {
		t.Fatalf("after a second restart %+v, want its return delivered", h)
	}
	if n := len(e.hs.ok("m.room.message")) - len(handoffNotices(e)); n != 2 {
		t.Fatalf("%d returns posted, want 2", n)
	}
	if _, isNew := e.m.AdoptHandoff(roomA, "$thread", "$notice2", architect, hz, "bob", "@bob:hs", "again"); isNew {
		t.Fatal("a notice met after a restart was adopted again")
	}
}

// waitReturns waits for n handoff returns to be posted (they are posted on
// their own goroutine) and returns them.
func waitReturns(t *testing.T, e *env, n int) []sent {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		var rets []sent
		for _, s := range e.hs.ok("m.room.message") {
			if _, ok := s.Content[zevent.KeyHandoffReturn]; ok {
				rets = append(rets, s)
			}
		}
		if len(rets) >= n {
			return rets
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d handoff returns posted, want %d", len(rets), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A handoff to another daemon's agent that never returns is returned
// timed_out at task_timeout, counted from its admission: the caller is woken
// once, a restart neither wakes it again nor revives the handoff, another
// handoff is admitted (no longer already_open), and the callee's return
// posted after that is ignored.
func TestRemoteHandoffTimesOutOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs := &callees{}
		e := &env{t: t, dir: t.TempDir(), hs: newFakeHS(), workstation: "laptop", timeout: 30 * time.Minute,
			other: ciBobInRoomA}
		e.openWith(func(o *Options) { o.StartCallee = cs.start })
		stop := e.watch()
		c := caller("alice", roomA, "$home")
		if res := e.handoff(c, "ci.bob"); res.Status != tools.HandoffStarted {
			t.Fatalf("handoff to ci.bob = %+v, want started", res)
		}
		hid := field(handoffNotices(e)[0].Content, "dev.zooid.handoff", "id").(string)

		advance(30*time.Minute - time.Second)
		if n := len(e.wakesCopy()); n != 0 || !e.m.HandoffOutstanding(roomA, "$home", "alice") {
			t.Fatalf("a second before the bound: %d wakes, outstanding %v; want none, still outstanding", n, e.m.HandoffOutstanding(roomA, "$home", "alice"))
		}
		if res := e.handoff(c, "ci.bob"); res.Status != tools.HandoffRefused || res.Reason != tools.ReasonAlreadyOpen {
			t.Fatalf("a second handoff before the bound = %+v, want refused already_open", res)
		}
		advance(time.Second)
		want := "[handoff return] from ci.bob: no return came within the task timeout, so the handoff is over (timed_out); ci.bob's daemon may be down, and a return it posts later is not delivered. Read this thread to see how far it got."
		wakes := e.wakesCopy()
		if len(wakes) != 1 || wakes[0].Text != want || wakes[0].Parent.Agent != "alice" {
			t.Fatalf("wakes at the bound = %+v, want one for alice: %q", wakes, want)
		}
		if h, _ := e.m.handoffSnapshot(hid); h.State != HandoffReturned || h.Reason != ReasonHandoffTimedOut || !h.Woken {
			t.Fatalf("handoff at the bound = %+v, want returned timed_out and woken", h)
		}
		stop()

		e.restartWith(cs)
		defer e.watch()()
		advance(time.Hour)
		if n := len(e.wakesCopy()); n != 1 {
			t.Fatalf("after a restart the caller was woken %d times in all, want 1", n)
		}
		late := zevent.HandoffReturn{Version: 1, ID: hid, From: "alice", To: "ci.bob", Output: "certificates renewed"}
		if err := e.m.RemoteHandoffReturn(roomA, "$home", ciBob, late); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if n := len(e.wakesCopy()); n != 1 {
			t.Fatalf("a return after the timeout woke the caller: %d wakes in all, want 1", n)
		}
		if h, _ := e.m.handoffSnapshot(hid); h.Reason != ReasonHandoffTimedOut || h.Output != "" {
			t.Fatalf("handoff after a late return = %+v, want it timed_out still", h)
		}
		if res := e.handoff(c, "ci.bob"); res.Status != tools.HandoffStarted {
			t.Fatalf("a handoff after the timeout = %+v, want started", res)
		}
	})
}

// A remote handoff whose bound passed while this daemon was down is returned
// timed_out once Watch runs after the restart: it is not left running because
// Recover keeps remote handoffs running.
func TestRemoteHandoffPastItsBoundWhileDownTimesOutAtStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs := &callees{}
		e := &env{t: t, dir: t.TempDir(), hs: newFakeHS(), workstation: "laptop", timeout: 30 * time.Minute,
			other: ciBobInRoomA}
		e.openWith(func(o *Options) { o.StartCallee = cs.start })
		if res := e.handoff(caller("alice", roomA, "$home"), "ci.bob"); res.Status != tools.HandoffStarted {
			t.Fatalf("handoff to ci.bob = %+v, want started", res)
		}
		if err := e.m.Close(); err != nil {
			t.Fatal(err)
		}
		advance(time.Hour) // down, with no Watch running
		e.openWith(func(o *Options) { o.StartCallee = cs.start })
		if err := e.m.Recover(t.Context()); err != nil {
			t.Fatal(err)
		}
		if n := len(e.wakesCopy()); n != 0 {
			t.Fatalf("Recover woke the caller %d times, want 0 (Watch returns it)", n)
		}
		defer e.watch()()
		synctest.Wait()
		wakes := e.wakesCopy()
		if len(wakes) != 1 || !strings.Contains(wakes[0].Text, "(timed_out)") {
			t.Fatalf("wakes after the restart = %+v, want one timed_out", wakes)
		}
	})
}

// ciBobInRoomA is an Options.OtherAgent knowing one other daemon's agent,
// ci.bob, in roomA.
func ciBobInRoomA(room id.RoomID, addr string) (id.UserID, string, bool) {
	if room == roomA && addr == "ci.bob" {
		return ciBob, "ci.bob", true
	}
	return "", "", false
}
