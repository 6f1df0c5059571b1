package router

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

const (
	roomMain  id.RoomID = "!main:example.org"
	roomOther id.RoomID = "!other:example.org"
	roomNone  id.RoomID = "!none:example.org"
	alice     id.UserID = "@alice:example.org"
	userA     id.UserID = "@agent-a:example.org"
	userB     id.UserID = "@agent-b:example.org"
	userC     id.UserID = "@agent-c:example.org"
)

func testAgents() []Agent {
	return []Agent{
		{Name: "agent-a", UserID: userA, DisplayName: "Agent A", Rooms: []id.RoomID{roomMain, roomOther}},
		{Name: "agent-b", UserID: userB, DisplayName: "Agent B", Rooms: []id.RoomID{roomMain}, Trigger: Mention},
		{Name: "agent-c", UserID: userC, DisplayName: "Carol", Rooms: []id.RoomID{roomOther}, Trigger: Any},
	}
}

func mentions(users ...id.UserID) *event.Mentions { return &event.Mentions{UserIDs: users} }

// fmtWakes renders wakes as "agent@root:text" for compact expectations.
func fmtWakes(ws []Wake) []string {
	var out []string
	for _, w := range ws {
		out = append(out, fmt.Sprintf("%s@%s:%s", w.Agent, w.ThreadRoot, w.Text))
	}
	return out
}

type step struct {
	msg  Message
	want []string
}

func runSteps(t *testing.T, r *Router, steps []step) {
	t.Helper()
	for i, s := range steps {
		got := fmtWakes(r.route(s.msg))
		if !slices.Equal(got, s.want) {
			t.Fatalf("step %d (%s from %s: %q): wakes = %q, want %q", i, s.msg.EventID, s.msg.Sender, s.msg.Body, got, s.want)
		}
		for _, w := range r.route(Message{}) {
			t.Fatalf("empty message woke %v", w)
		}
	}
}

func TestRoute(t *testing.T) {
	cases := []struct {
		name  string
		steps []step
	}{
		{"m.mentions wakes the mentioned agent on a new thread", []step{
			{Message{Room: roomMain, EventID: "$1", Sender: alice, Body: "Agent A: hi", Mentions: mentions(userA)}, []string{"agent-a@$1:hi"}},
		}},
		{"m.mentions present but empty: body is not consulted", []step{
			{Message{Room: roomMain, EventID: "$1", Sender: alice, Body: "@agent-a hi", Mentions: mentions()}, nil},
		}},
		{"m.mentions names an agent the body doesn't", []step{
			{Message{Room: roomMain, EventID: "$1", Sender: alice, Body: "hi there", Mentions: mentions(userB)}, []string{"agent-b@$1:hi there"}},
		}},
		{"body fallback: localpart, full id, display name", []step{
			{Message{Room: roomMain, EventID: "$1", Sender: alice, Body: "@agent-a hi"}, []string{"agent-a@$1:hi"}},
			{Message{Room: roomMain, EventID: "$2", Sender: alice, Body: "@agent-b:example.org hi"}, []string{"agent-b@$2:hi"}},
			{Message{Room: roomMain, EventID: "$3", Sender: alice, Body: "agent b, hi"}, []string{"agent-b@$3:hi"}},
		}},
		{"two agents mentioned: both wake in config order, each with its own mention stripped", []step{
			{Message{Room: roomMain, EventID: "$1", Sender: alice, Body: "@agent-b and @agent-a compare"}, []string{"agent-a@$1:@agent-b and compare", "agent-b@$1:and @agent-a compare"}},
		}},
		{"no mention: nobody in a mention-only room", []step{
			{Message{Room: roomMain, EventID: "$1", Sender: alice, Body: "hello room"}, nil},
		}},
		{"unbound room: a mention wakes nobody", []step{
			{Message{Room: roomNone, EventID: "$1", Sender: alice, Body: "@agent-a hi", Mentions: mentions(userA)}, nil},
		}},
		{"bound to another room only", []step{
			{Message{Room: roomOther, EventID: "$1", Sender: alice, Body: "@agent-b hi", Mentions: mentions(userB)}, []string{"agent-c@$1:@agent-b hi"}},
		}},
		{"trigger any wakes on every human message, with mentioned agents", []step{
			{Message{Room: roomOther, EventID: "$1", Sender: alice, Body: "anyone?"}, []string{"agent-c@$1:anyone?"}},
			{Message{Room: roomOther, EventID: "$2", Sender: alice, Body: "@agent-a look", Mentions: mentions(userA)}, []string{"agent-a@$2:look", "agent-c@$2:@agent-a look"}},
		}},
		{"an agent never routes its own message, even mentioning itself", []step{
			{Message{Room: roomMain, EventID: "$1", Sender: userA, Body: "@agent-a note to self", Mentions: mentions(userA)}, nil},
		}},
		{"agent prose wakes nobody, top level or mentioning another agent", []step{
			{Message{Room: roomMain, EventID: "$1", Sender: userA, Body: "@agent-b over to you", Mentions: mentions(userB)}, nil},
			{Message{Room: roomOther, EventID: "$2", Sender: userA, Body: "status"}, nil},
		}},
		{"bare human reply goes to the agent the root woke", []step{
			{Message{Room: roomMain, EventID: "$1", Sender: alice, Body: "@agent-a hi", Mentions: mentions(userA)}, []string{"agent-a@$1:hi"}},
			{Message{Room: roomMain, EventID: "$2", Sender: alice, Body: "and then?", ThreadRoot: "$1"}, []string{"agent-a@$1:and then?"}},
		}},
		{"bare reply goes to the last agent that posted", []step{
			{Message{Room: roomMain, EventID: "$1", Sender: alice, Body: "@agent-a @agent-b hi", Mentions: mentions(userA, userB)}, []string{"agent-a@$1:@agent-b hi", "agent-b@$1:@agent-a hi"}},
			{Message{Room: roomMain, EventID: "$2", Sender: userB, Body: "B answers", ThreadRoot: "$1"}, nil},
			{Message{Room: roomMain, EventID: "$3", Sender: alice, Body: "thanks", ThreadRoot: "$1"}, []string{"agent-b@$1:thanks"}},
			{Message{Room: roomMain, EventID: "$4", Sender: userA, Body: "A adds", ThreadRoot: "$1"}, nil},
			{Message{Room: roomMain, EventID: "$5", Sender: alice, Body: "ok", ThreadRoot: "$1"}, []string{"agent-a@$1:ok"}},
		}},
		{"a human mention of another agent switches the addressee", []step{
			{Message{Room: roomMain, EventID: "$1", Sender: alice, Body: "@agent-a hi", Mentions: mentions(userA)}, []string{"agent-a@$1:hi"}},
			{Message{Room: roomMain, EventID: "$2", Sender: userA, Body: "hello", ThreadRoot: "$1"}, nil},
			{Message{Room: roomMain, EventID: "$3", Sender: alice, Body: "@agent-b your view?", ThreadRoot: "$1", Mentions: mentions(userB)}, []string{"agent-b@$1:your view?"}},
			// B hasn't posted yet: the switch alone makes it the addressee.
			{Message{Room: roomMain, EventID: "$4", Sender: alice, Body: "well?", ThreadRoot: "$1"}, []string{"agent-b@$1:well?"}},
		}},
		{"agent mentioning another agent in a thread wakes nobody by default", []step{
			{Message{Room: roomMain, EventID: "$1", Sender: alice, Body: "@agent-a hi", Mentions: mentions(userA)}, []string{"agent-a@$1:hi"}},
			{Message{Room: roomMain, EventID: "$2", Sender: userA, Body: "@agent-b help", ThreadRoot: "$1", Mentions: mentions(userB)}, nil},
			{Message{Room: roomMain, EventID: "$3", Sender: alice, Body: "go on", ThreadRoot: "$1"}, []string{"agent-a@$1:go on"}},
		}},
		{"reply in an unknown thread: only mentions", []step{
			{Message{Room: roomMain, EventID: "$2", Sender: alice, Body: "anyone?", ThreadRoot: "$old"}, nil},
			{Message{Room: roomMain, EventID: "$3", Sender: alice, Body: "@agent-b?", ThreadRoot: "$old", Mentions: mentions(userB)}, []string{"agent-b@$old:?"}},
			{Message{Room: roomMain, EventID: "$4", Sender: alice, Body: "more", ThreadRoot: "$old"}, []string{"agent-b@$old:more"}},
		}},
		{"trigger any also wakes in ordinary threads", []step{
			{Message{Room: roomOther, EventID: "$1", Sender: alice, Body: "@agent-a hi", Mentions: mentions(userA)}, []string{"agent-a@$1:hi", "agent-c@$1:@agent-a hi"}},
			{Message{Room: roomOther, EventID: "$2", Sender: userA, Body: "yo", ThreadRoot: "$1"}, nil},
			{Message{Room: roomOther, EventID: "$3", Sender: alice, Body: "next", ThreadRoot: "$1"}, []string{"agent-a@$1:next", "agent-c@$1:next"}},
		}},
		{"task root wakes only the assignee, not trigger-any agents", []step{
			{Message{Room: roomOther, EventID: "$t", Sender: userA, Body: "Carol: build it", IsTaskRoot: true, TaskAssignee: "agent-c", Mentions: mentions(userC)}, []string{"agent-c@$t:build it"}},
			{Message{Room: roomOther, EventID: "$p", Sender: userC, Body: "working", ThreadRoot: "$t"}, nil},
			// Bare human reply in a task thread goes to the assignee; no trigger-any extras.
			{Message{Room: roomOther, EventID: "$h", Sender: alice, Body: "status?", ThreadRoot: "$t"}, []string{"agent-c@$t:status?"}},
			{Message{Room: roomOther, EventID: "$h2", Sender: userA, Body: "fine", ThreadRoot: "$t"}, nil},
			{Message{Room: roomOther, EventID: "$h3", Sender: alice, Body: "and now?", ThreadRoot: "$t"}, []string{"agent-c@$t:and now?"}},
		}},
		{"task root by a human with an unbound assignee wakes nobody", []step{
			{Message{Room: roomMain, EventID: "$t", Sender: alice, Body: "do", IsTaskRoot: true, TaskAssignee: "agent-c"}, nil},
			{Message{Room: roomMain, EventID: "$t2", Sender: alice, Body: "do", IsTaskRoot: true, TaskAssignee: "nobody"}, nil},
		}},
		{"task root ignores mentions of others", []step{
			{Message{Room: roomMain, EventID: "$t", Sender: userA, Body: "@agent-b build, cc @agent-a", IsTaskRoot: true, TaskAssignee: "agent-b", Mentions: mentions(userA, userB)}, []string{"agent-b@$t:build, cc @agent-a"}},
		}},
		{"thread_result never triggers anyone", []step{
			{Message{Room: roomMain, EventID: "$1", Sender: alice, Body: "@agent-a done", Mentions: mentions(userA), IsTaskResult: true}, nil},
			{Message{Room: roomOther, EventID: "$2", Sender: userA, Body: "result", IsTaskResult: true}, nil},
		}},
		{"reset events are not routed", []step{
			{Message{Room: roomMain, EventID: "$1", Sender: alice, Body: "@agent-a", Mentions: mentions(userA), IsReset: true}, nil},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			runSteps(t, New(testAgents()), c.steps)
		})
	}
}

func TestWakeFields(t *testing.T) {
	r := New(testAgents())
	ws := r.route(Message{Room: roomMain, EventID: "$1", Sender: alice, Body: "@agent-a hi", Mentions: mentions(userA)})
	want := []Wake{{Agent: "agent-a", Room: roomMain, ThreadRoot: "$1", Text: "hi", EventID: "$1", Sender: alice, Why: WhyMention}}
	if !slices.Equal(ws, want) {
		t.Fatalf("wakes = %+v, want %+v", ws, want)
	}
	ws = r.route(Message{Room: roomMain, EventID: "$2", Sender: alice, Body: "more", ThreadRoot: "$1"})
	want = []Wake{{Agent: "agent-a", Room: roomMain, ThreadRoot: "$1", Text: "more", EventID: "$2", Sender: alice, Why: WhyAddressee}}
	if !slices.Equal(ws, want) {
		t.Fatalf("wakes = %+v, want %+v", ws, want)
	}
}

func TestResetEndsSessionsKeepsMemory(t *testing.T) {
	r := New(testAgents())
	runSteps(t, r, []step{
		{Message{Room: roomMain, EventID: "$1", Sender: alice, Body: "@agent-a hi", Mentions: mentions(userA)}, []string{"agent-a@$1:hi"}},
		{Message{Room: roomMain, EventID: "$2", Sender: alice, Body: "@agent-b too", ThreadRoot: "$1", Mentions: mentions(userB)}, []string{"agent-b@$1:too"}},
	})
	if got := r.reset(roomMain, "$1"); !slices.Equal(got, []string{"agent-a", "agent-b"}) {
		t.Fatalf("reset = %v, want [agent-a agent-b]", got)
	}
	if got := r.reset(roomMain, "$1"); got != nil {
		t.Fatalf("second reset = %v, want none", got)
	}
	if got := r.reset(roomMain, "$unknown"); got != nil {
		t.Fatalf("reset of unknown thread = %v", got)
	}
	// Memory survived: the bare reply still finds agent-b.
	runSteps(t, r, []step{
		{Message{Room: roomMain, EventID: "$3", Sender: alice, Body: "again", ThreadRoot: "$1"}, []string{"agent-b@$1:again"}},
	})
	if got := r.reset(roomMain, "$1"); !slices.Equal(got, []string{"agent-b"}) {
		t.Fatalf("reset after new wake = %v, want [agent-b]", got)
	}
}

func TestThreadMemoryIsBounded(t *testing.T) {
	r := New(testAgents())
	r.SetThreadMemory(2)
	for i := range 3 {
		eid := id.EventID(fmt.Sprintf("$%d", i))
		if ws := r.route(Message{Room: roomMain, EventID: eid, Sender: alice, Body: "@agent-a x", Mentions: mentions(userA)}); len(ws) != 1 {
			t.Fatalf("root %d woke %v", i, ws)
		}
	}
	// $0 was evicted: a bare reply there finds no addressee; $2 is remembered.
	if ws := r.route(Message{Room: roomMain, EventID: "$r0", Sender: alice, Body: "x", ThreadRoot: "$0"}); ws != nil {
		t.Fatalf("evicted thread woke %v", ws)
	}
	if ws := r.route(Message{Room: roomMain, EventID: "$r2", Sender: alice, Body: "x", ThreadRoot: "$2"}); len(ws) != 1 {
		t.Fatalf("remembered thread woke %v", ws)
	}
	if n := len(r.threads); n != 2 {
		t.Fatalf("threads remembered = %d, want 2", n)
	}
}

func TestAgentProseWakesNobodyAndBecomesTheAddressee(t *testing.T) {
	r := New(testAgents())
	if ws := r.route(Message{Room: roomMain, EventID: "$t", Sender: userB, Body: "@agent-a do", IsTaskRoot: true, TaskAssignee: "agent-a", Mentions: mentions(userA)}); len(ws) != 1 || ws[0].Agent != "agent-a" {
		t.Fatalf("task root wakes = %v", ws)
	}
	if ws := r.route(Message{Room: roomMain, EventID: "$2", Sender: userA, Body: "@agent-b help", ThreadRoot: "$t", Mentions: mentions(userA, userB)}); len(ws) != 0 {
		t.Fatalf("agent prose woke %v", ws)
	}
	if info, ok := r.Thread(roomMain, "$t"); !ok || !info.Task || info.Assignee != "agent-a" || !slices.Equal(info.Addressees, []string{"agent-a"}) {
		t.Fatalf("Thread = %+v, %v", info, ok)
	}
	if _, ok := r.Thread(roomMain, "$nope"); ok {
		t.Fatal("unknown thread reported")
	}
}

func TestAtMentionedNeedsADeliberateMention(t *testing.T) {
	r := New(testAgents())
	for body, want := range map[string][]string{
		"@agent-b please check":                                     {"agent-b"},
		"a reviewer may want to check":                              nil,
		"[Agent B](https://matrix.to/#/" + string(userB) + ") look": {"agent-b"},
		"ask " + string(userB) + " about it":                        {"agent-b"},
	} {
		if got := r.AtMentioned(roomMain, body); !slices.Equal(got, want) {
			t.Errorf("AtMentioned(%q) = %v, want %v", body, got, want)
		}
	}
}

func TestObserveRebuildsMemory(t *testing.T) {
	r := New(testAgents())
	r.observe(Message{Room: roomMain, EventID: "$1", Sender: alice, Body: "@agent-a hi", Mentions: mentions(userA)})
	r.observe(Message{Room: roomMain, EventID: "$2", Sender: userB, Body: "me", ThreadRoot: "$1"})
	r.observe(Message{Room: roomOther, EventID: "$t", Sender: userA, Body: "task", IsTaskRoot: true, TaskAssignee: "agent-c"})
	runSteps(t, r, []step{
		{Message{Room: roomMain, EventID: "$3", Sender: alice, Body: "so?", ThreadRoot: "$1"}, []string{"agent-b@$1:so?"}},
		{Message{Room: roomOther, EventID: "$4", Sender: alice, Body: "so?", ThreadRoot: "$t"}, []string{"agent-c@$t:so?"}},
	})
}

// Only a person's bare reply in a thread the router never saw needs the thread
// read; everything else routes the same with or without that memory.
func TestNeedsThreadMemoryOnlyForABareReplyInAnUnknownThread(t *testing.T) {
	r := New(testAgents())
	r.route(Message{Room: roomMain, EventID: "$seen", Sender: alice, Body: "@agent-a hi", Mentions: mentions(userA)})
	for _, c := range []struct {
		name string
		msg  Message
		want bool
	}{
		{"a bare reply in an unknown thread", Message{Room: roomMain, EventID: "$1", Sender: alice, Body: "so?", ThreadRoot: "$old"}, true},
		{"a bare reply in a thread seen live", Message{Room: roomMain, EventID: "$2", Sender: alice, Body: "so?", ThreadRoot: "$seen"}, false},
		{"a top-level message", Message{Room: roomMain, EventID: "$3", Sender: alice, Body: "so?"}, false},
		{"a reply that mentions an agent", Message{Room: roomMain, EventID: "$4", Sender: alice, Body: "@agent-b so?", ThreadRoot: "$old"}, false},
		{"an agent's post", Message{Room: roomMain, EventID: "$5", Sender: userB, Body: "done", ThreadRoot: "$old"}, false},
		{"a person's notice", Message{Room: roomMain, EventID: "$6", Sender: alice, Body: "fyi", MsgType: "m.notice", ThreadRoot: "$old"}, false},
		{"a /clear", Message{Room: roomMain, EventID: "$7", Sender: alice, IsReset: true, ThreadRoot: "$old"}, false},
		{"a task result", Message{Room: roomMain, EventID: "$8", Sender: alice, Body: "result", IsTaskResult: true, ThreadRoot: "$old"}, false},
	} {
		if got := r.needsThreadMemory(c.msg); got != c.want {
			t.Errorf("%s: needsThreadMemory = %v, want %v", c.name, got, c.want)
		}
	}
}

// recall rebuilds the addressee from the thread's past, and a thread where
// nobody was addressed is known afterwards, so it is not read again.
func TestRecallRebuildsMemoryAndMarksTheThreadKnown(t *testing.T) {
	r := New(testAgents())
	r.recall(roomMain, "$1", []Message{
		{Room: roomMain, EventID: "$1", Sender: alice, Body: "@agent-a hi", Mentions: mentions(userA)},
		{Room: roomMain, EventID: "$2", Sender: userA, Body: "on it", MsgType: "m.notice", ThreadRoot: "$1"},
		{Room: roomMain, EventID: "$3", Sender: alice, Body: "@agent-b over to you", Mentions: mentions(userB), ThreadRoot: "$1"},
	})
	reply := Message{Room: roomMain, EventID: "$4", Sender: alice, Body: "so?", ThreadRoot: "$1"}
	if r.needsThreadMemory(reply) {
		t.Fatal("a recalled thread still needs memory")
	}
	runSteps(t, r, []step{{reply, []string{"agent-b@$1:so?"}}})

	r.recall(roomMain, "$quiet", []Message{{Room: roomMain, EventID: "$quiet", Sender: alice, Body: "lunch?"}})
	quiet := Message{Room: roomMain, EventID: "$5", Sender: alice, Body: "pizza", ThreadRoot: "$quiet"}
	if r.needsThreadMemory(quiet) {
		t.Fatal("a recalled thread that addressed nobody still needs memory")
	}
	runSteps(t, r, []step{{quiet, nil}})
}

func TestIsAgent(t *testing.T) {
	r := New(testAgents())
	if name, ok := r.IsAgent(userB); !ok || name != "agent-b" {
		t.Fatalf("IsAgent(userB) = %q, %v", name, ok)
	}
	if _, ok := r.IsAgent(alice); ok {
		t.Fatal("alice is not an agent")
	}
}

func parseEvent(t *testing.T, js string) *event.Event {
	t.Helper()
	ev := &event.Event{}
	if err := json.Unmarshal([]byte(js), ev); err != nil {
		t.Fatal(err)
	}
	ev.Type.Class = event.MessageEventType
	return ev
}

func TestMessageFromEvent(t *testing.T) {
	cases := []struct {
		name string
		js   string
		ok   bool
		want Message
	}{
		{"plain top-level", `{"type":"m.room.message","event_id":"$1","room_id":"!r:x","sender":"@alice:x","content":{"msgtype":"m.text","body":"hi"}}`,
			true, Message{Room: "!r:x", EventID: "$1", Sender: "@alice:x", Body: "hi", MsgType: "m.text"}},
		{"mentions and thread", `{"type":"m.room.message","event_id":"$2","room_id":"!r:x","sender":"@alice:x","content":{"msgtype":"m.text","body":"yo","m.mentions":{"user_ids":["@a:x"]},"m.relates_to":{"rel_type":"m.thread","event_id":"$1"}}}`,
			true, Message{Room: "!r:x", EventID: "$2", Sender: "@alice:x", Body: "yo", MsgType: "m.text", Mentions: mentions("@a:x"), ThreadRoot: "$1"}},
		{"empty m.mentions is kept, not nil", `{"type":"m.room.message","event_id":"$2","room_id":"!r:x","sender":"@alice:x","content":{"msgtype":"m.text","body":"yo","m.mentions":{}}}`,
			true, Message{Room: "!r:x", EventID: "$2", Sender: "@alice:x", Body: "yo", MsgType: "m.text", Mentions: mentions()}},
		{"reply (not thread) is top-level", `{"type":"m.room.message","event_id":"$3","room_id":"!r:x","sender":"@alice:x","content":{"msgtype":"m.text","body":"re","m.relates_to":{"m.in_reply_to":{"event_id":"$1"}}}}`,
			true, Message{Room: "!r:x", EventID: "$3", Sender: "@alice:x", Body: "re", MsgType: "m.text"}},
		{"task root", `{"type":"m.room.message","event_id":"$t","room_id":"!r:x","sender":"@a:x","content":{"msgtype":"m.text","body":"do it","dev.zooid.thread_start":{"version":1,"assignee":"agent-b","attempt_id":"zt1"}}}`,
			true, Message{Room: "!r:x", EventID: "$t", Sender: "@a:x", Body: "do it", MsgType: "m.text", IsTaskRoot: true, TaskAssignee: "agent-b", TaskAttempt: "zt1"}},
		{"task result", `{"type":"m.room.message","event_id":"$r","room_id":"!r:x","sender":"@a:x","content":{"msgtype":"m.notice","body":"done","dev.zooid.thread_result":{"status":"complete"}}}`,
			true, Message{Room: "!r:x", EventID: "$r", Sender: "@a:x", Body: "done", MsgType: "m.notice", IsTaskResult: true}},
		{"session reset", `{"type":"dev.zooid.session_reset","event_id":"$c","room_id":"!r:x","sender":"@alice:x","content":{"m.relates_to":{"rel_type":"m.thread","event_id":"$1"}}}`,
			true, Message{Room: "!r:x", EventID: "$c", Sender: "@alice:x", IsReset: true, ThreadRoot: "$1"}},
		{"edit is not routed", `{"type":"m.room.message","event_id":"$e","room_id":"!r:x","sender":"@alice:x","content":{"msgtype":"m.text","body":"* hi","m.new_content":{"body":"hi"},"m.relates_to":{"rel_type":"m.replace","event_id":"$1"}}}`,
			false, Message{}},
		{"reaction is not routed", `{"type":"m.reaction","event_id":"$x","room_id":"!r:x","sender":"@alice:x","content":{"m.relates_to":{"rel_type":"m.annotation","event_id":"$1","key":"👍"}}}`,
			false, Message{}},
		{"state event is not routed", `{"type":"m.room.member","state_key":"@alice:x","event_id":"$m","room_id":"!r:x","sender":"@alice:x","content":{"membership":"join"}}`,
			false, Message{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev := parseEvent(t, c.js)
			got, ok := MessageFromEvent(ev)
			if ok != c.ok {
				t.Fatalf("ok = %v, want %v", ok, c.ok)
			}
			g, w := got, c.want
			g.Mentions, w.Mentions = nil, nil
			if g != w || !sameMentions(got.Mentions, c.want.Mentions) {
				t.Fatalf("got  %+v\nwant %+v", got, c.want)
			}
		})
	}
	if _, ok := MessageFromEvent(nil); ok {
		t.Fatal("nil event routed")
	}
}

func sameMentions(a, b *event.Mentions) bool {
	if (a == nil) != (b == nil) {
		return false
	}
	return a == nil || strings.Join(idsToStrings(a.UserIDs), ",") == strings.Join(idsToStrings(b.UserIDs), ",")
}

func idsToStrings(ids []id.UserID) []string {
	var out []string
	for _, u := range ids {
		out = append(out, string(u))
	}
	return out
}

func BenchmarkRoute(b *testing.B) {
	r := New(testAgents())
	msgs := []Message{
		{Room: roomMain, EventID: "$1", Sender: alice, Body: "Agent A: please look at the failing build"},
		{Room: roomMain, EventID: "$2", Sender: alice, Body: "and the logs?", ThreadRoot: "$1"},
		{Room: roomOther, EventID: "$3", Sender: alice, Body: "general chatter with no mention at all"},
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r.route(msgs[i%len(msgs)])
	}
}

func TestWakeSaysWhy(t *testing.T) {
	r := New(testAgents())
	whys := func(ws []Wake) []string {
		var out []string
		for _, w := range ws {
			out = append(out, w.Agent+":"+w.Why)
		}
		return out
	}
	for _, c := range []struct {
		m    Message
		want []string
	}{
		{Message{Room: roomOther, EventID: "$o1", Sender: alice, Body: "anyone?"}, []string{"agent-c:" + WhyTriggerAny}},
		{Message{Room: roomMain, EventID: "$t1", Sender: userA, Body: "do it", IsTaskRoot: true, TaskAssignee: "agent-b"}, []string{"agent-b:" + WhyTaskAssignee}},
		{Message{Room: roomMain, EventID: "$t2", Sender: alice, Body: "and?", ThreadRoot: "$t1"}, []string{"agent-b:" + WhyTaskAssignee}},
		{Message{Room: roomMain, EventID: "$m1", Sender: alice, Body: "@agent-b x", Mentions: mentions(userB)}, []string{"agent-b:" + WhyMention}},
		{Message{Room: roomMain, EventID: "$m2", Sender: alice, Body: "y", ThreadRoot: "$m1"}, []string{"agent-b:" + WhyAddressee}},
	} {
		if got := whys(r.route(c.m)); !slices.Equal(got, c.want) {
			t.Errorf("%s %q woke %v, want %v", c.m.EventID, c.m.Body, got, c.want)
		}
	}
}

// Notices are what bots (Zooid's agents included) post: answering them lets two
// bots loop, so a notice wakes no one, whoever it mentions.
func TestNoticesNeverWake(t *testing.T) {
	r := New(testAgents())
	runSteps(t, r, []step{
		{Message{Room: roomMain, EventID: "$1", Sender: "@otherbot:example.org", MsgType: "m.notice", Body: "@agent-a deploy done", Mentions: mentions(userA)}, nil},
		{Message{Room: roomOther, EventID: "$2", Sender: "@otherbot:example.org", MsgType: "m.notice", Body: "tick"}, nil},
		{Message{Room: roomMain, EventID: "$3", Sender: alice, MsgType: "m.text", Body: "@agent-a hi", Mentions: mentions(userA)}, []string{"agent-a@$3:hi"}},
		{Message{Room: roomMain, EventID: "$4", Sender: "@otherbot:example.org", MsgType: "m.notice", Body: "build red", ThreadRoot: "$3"}, nil},
		{Message{Room: roomMain, EventID: "$5", Sender: "@otherbot:example.org", MsgType: "m.notice", Body: "@agent-b look", ThreadRoot: "$3", Mentions: mentions(userB)}, nil},
	})
	// The notice that mentioned agent-b did not switch the thread to it.
	if th, _ := r.Thread(roomMain, "$3"); !slices.Equal(th.Addressees, []string{"agent-a"}) {
		t.Fatalf("addressees after notices = %v, want [agent-a]", th.Addressees)
	}
}

// Only an agent's post can be a task root (and the daemon checks its journal
// too): a human's message carrying dev.zooid.thread_start is an ordinary one.
func TestHumanThreadStartIsNotATaskRoot(t *testing.T) {
	r := New(testAgents())
	runSteps(t, r, []step{
		{Message{Room: roomMain, EventID: "$1", Sender: alice, Body: "audit svc-a", IsTaskRoot: true, TaskAssignee: "agent-b"}, nil},
		{Message{Room: roomMain, EventID: "$2", Sender: alice, Body: "@agent-b audit svc-b", Mentions: mentions(userB), IsTaskRoot: true, TaskAssignee: "agent-b"}, []string{"agent-b@$2:audit svc-b"}},
	})
	if th, ok := r.Thread(roomMain, "$1"); ok {
		t.Fatalf("a human's unmentioned thread_start is remembered as %+v", th)
	}
	if th, _ := r.Thread(roomMain, "$2"); th.Task || th.Assignee != "" {
		t.Fatalf("a human's thread_start made a task thread: %+v", th)
	}
	r.observe(Message{Room: roomMain, EventID: "$3", Sender: alice, Body: "x", IsTaskRoot: true, TaskAssignee: "agent-a"})
	if th, ok := r.Thread(roomMain, "$3"); ok && th.Task {
		t.Fatalf("replayed human thread_start made a task thread: %+v", th)
	}
}

// A body that is not a string is no message: it must not wake an agent with an
// empty prompt, whatever m.mentions says.
func TestNonStringBodyIsNotRouted(t *testing.T) {
	for _, body := range []string{`42`, `{"text":"hi"}`, `["hi"]`, `null`, ``} {
		content := `{"msgtype":"m.text","m.mentions":{"user_ids":["@agent-a:example.org"]}`
		if body != "" {
			content += `,"body":` + body
		}
		content += `}`
		ev := parseEvent(t, `{"type":"m.room.message","event_id":"$1","room_id":"!main:example.org","sender":"@alice:example.org","content":`+content+`}`)
		if m, ok := MessageFromEvent(ev); ok {
			t.Errorf("body %s: routed as %+v, wakes %v", body, m, fmtWakes(New(testAgents()).route(m)))
		}
	}
}
