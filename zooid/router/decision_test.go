package router

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// fakeFacts is a task journal and a homeserver for Decide; it notes what it
// was asked, so a test can say which facts a decision needed.
type fakeFacts struct {
	threads map[id.EventID]string    // journaled task threads: root → assignee
	roots   map[id.EventID]string    // journaled task roots: root → assignee
	closed  map[id.EventID]bool      // task roots whose task the journal closed
	history map[id.EventID][]Message // threads the homeserver can read back
	asked   []string
}

func (f *fakeFacts) TaskThread(_ id.RoomID, root id.EventID) (string, id.UserID, bool) {
	f.asked = append(f.asked, "task_thread "+string(root))
	a, ok := f.threads[root]
	return a, userA, ok
}

func (f *fakeFacts) TaskRoot(m Message) (string, bool, bool) {
	f.asked = append(f.asked, "task_root "+string(m.EventID))
	a, ok := f.roots[m.EventID]
	return a, f.closed[m.EventID], ok
}

func (f *fakeFacts) ThreadHistory(m Message) ([]Message, bool) {
	f.asked = append(f.asked, "history "+string(m.ThreadRoot))
	h, ok := f.history[m.ThreadRoot]
	return h, ok
}

// content is one option of an event's content.
type content func(map[string]any)

func inThread(root id.EventID) content {
	return func(c map[string]any) {
		c["m.relates_to"] = map[string]any{"rel_type": "m.thread", "event_id": root, "is_falling_back": true, "m.in_reply_to": map[string]any{"event_id": root}}
	}
}

func mentioning(users ...id.UserID) content {
	return func(c map[string]any) { c["m.mentions"] = map[string]any{"user_ids": users} }
}

func notice(c map[string]any) { c["msgtype"] = "m.notice" }

func taskStart(assignee, attempt string) content {
	return func(c map[string]any) {
		c["dev.zooid.thread_start"] = map[string]any{"version": 1, "assignee": assignee, "attempt_id": attempt}
	}
}

func handoffTo(agent string) content {
	return func(c map[string]any) {
		c["dev.zooid.handoff"] = map[string]any{"version": 1, "id": "zh1", "from": "agent-a", "to": agent}
	}
}

func taskResult(c map[string]any) {
	c["dev.zooid.thread_result"] = map[string]any{"status": "complete"}
}

// eventOf builds the event as the homeserver delivers it (raw JSON content).
func eventOf(typ string, room id.RoomID, eid id.EventID, sender id.UserID, c map[string]any) *event.Event {
	js, err := json.Marshal(map[string]any{"type": typ, "event_id": eid, "room_id": room, "sender": sender, "content": c})
	if err != nil {
		panic(err)
	}
	ev := &event.Event{}
	if err := json.Unmarshal(js, ev); err != nil {
		panic(err)
	}
	ev.Type.Class = event.MessageEventType
	return ev
}

func msgEvent(room id.RoomID, eid id.EventID, sender id.UserID, body string, opts ...content) *event.Event {
	c := map[string]any{"msgtype": "m.text", "body": body}
	for _, o := range opts {
		o(c)
	}
	return eventOf("m.room.message", room, eid, sender, c)
}

func clearEvent(room id.RoomID, eid id.EventID, sender id.UserID, root id.EventID) *event.Event {
	return eventOf("dev.zooid.session_reset", room, eid, sender, map[string]any{"m.relates_to": map[string]any{"rel_type": "m.thread", "event_id": root}})
}

func wakeOf(agent string, room id.RoomID, root, eid id.EventID, sender id.UserID, text, why string) Wake {
	return Wake{Agent: agent, Room: room, ThreadRoot: root, Text: text, EventID: eid, Sender: sender, Why: why}
}

// TestDecide holds the decision, exactly, on each event of a room played in
// order, and the facts the router asked the daemon for while deciding.
func TestDecide(t *testing.T) {
	type step struct {
		ev    *event.Event
		want  Decision
		asked []string
	}
	reaction := eventOf("m.reaction", roomMain, "$r", alice,
		map[string]any{"m.relates_to": map[string]any{"rel_type": "m.annotation", "event_id": "$1", "key": "👍"}})
	edit := msgEvent(roomMain, "$e", alice, "* hi", func(c map[string]any) {
		c["m.relates_to"] = map[string]any{"rel_type": "m.replace", "event_id": "$1"}
	})
	// Ciphertext, even one whose cleartext relation puts it in a thread and
	// whose sender is mentioned nowhere readable: this daemon cannot read it.
	encrypted := eventOf("m.room.encrypted", roomMain, "$x", alice, map[string]any{
		"algorithm": "m.megolm.v1.aes-sha2", "ciphertext": "AwgAEn", "session_id": "s", "sender_key": "k", "device_id": "D",
		"m.relates_to": map[string]any{"rel_type": "m.thread", "event_id": "$1"}})
	cases := []struct {
		name  string
		facts fakeFacts
		steps []step
	}{
		{name: "what is not a message is decided on too, asking nothing", steps: []step{
			{ev: reaction, want: Decision{Room: roomMain, Why: WhyNotMessage}},
			{ev: edit, want: Decision{Room: roomMain, Why: WhyNotMessage}},
		}},
		{name: "an encrypted event wakes nobody, and says why", steps: []step{
			{ev: encrypted, want: Decision{Room: roomMain, Why: WhyEncrypted}},
		}},
		{name: "a mention wakes its agent on a new thread; a bare reply goes back to it", steps: []step{
			{ev: msgEvent(roomMain, "$1", alice, "@agent-a hi", mentioning(userA)),
				want: Decision{Room: roomMain, Wakes: []Wake{wakeOf("agent-a", roomMain, "$1", "$1", alice, "hi", WhyMention)}}},
			{ev: msgEvent(roomMain, "$2", alice, "and?", inThread("$1")),
				want: Decision{Room: roomMain, Thread: "$1", Wakes: []Wake{wakeOf("agent-a", roomMain, "$1", "$2", alice, "and?", WhyAddressee)}}},
		}},
		{name: "nobody: nobody addressed, a person's notice, an agent's post, a task result", steps: []step{
			{ev: msgEvent(roomMain, "$1", alice, "lunch?"),
				want: Decision{Room: roomMain, Why: WhyNotAddressed}},
			{ev: msgEvent(roomMain, "$2", "@bot:example.org", "@agent-a build red", mentioning(userA), notice),
				want: Decision{Room: roomMain, Why: WhyNotAddressed}},
			{ev: msgEvent(roomMain, "$3", userA, "@agent-b over to you", mentioning(userB), notice),
				want: Decision{Room: roomMain, Why: WhyAgentPost}},
			{ev: msgEvent(roomMain, "$4", userB, "Task for agent-b ended", inThread("$3"), notice, taskResult),
				want: Decision{Room: roomMain, Thread: "$3", Why: WhyTaskResult}, asked: []string{"task_thread $3"}},
		}},
		{name: "an agent's handoff notice wakes nobody and makes the callee the thread's addressee", steps: []step{
			{ev: msgEvent(roomMain, "$1", alice, "@agent-a hi", mentioning(userA)),
				want: Decision{Room: roomMain, Wakes: []Wake{wakeOf("agent-a", roomMain, "$1", "$1", alice, "hi", WhyMention)}}},
			{ev: msgEvent(roomMain, "$2", userA, "@agent-b check it", inThread("$1"), mentioning(userB), notice, handoffTo("agent-b")),
				want: Decision{Room: roomMain, Thread: "$1", Why: WhyHandoff}},
			{ev: msgEvent(roomMain, "$3", alice, "and the other one?", inThread("$1")),
				want: Decision{Room: roomMain, Thread: "$1", Wakes: []Wake{wakeOf("agent-b", roomMain, "$1", "$3", alice, "and the other one?", WhyAddressee)}}},
		}},
		{name: "/clear resets the thread and wakes nobody; the thread's memory survives it", steps: []step{
			{ev: msgEvent(roomMain, "$1", alice, "@agent-b hi", mentioning(userB)),
				want: Decision{Room: roomMain, Wakes: []Wake{wakeOf("agent-b", roomMain, "$1", "$1", alice, "hi", WhyMention)}}},
			{ev: clearEvent(roomMain, "$c", alice, "$1"),
				want: Decision{Room: roomMain, Thread: "$1", Reset: true, Why: WhyReset}},
			{ev: msgEvent(roomMain, "$2", alice, "again", inThread("$1")),
				want: Decision{Room: roomMain, Thread: "$1", Wakes: []Wake{wakeOf("agent-b", roomMain, "$1", "$2", alice, "again", WhyAddressee)}}},
		}},
		{name: "a journaled task root is noted and wakes its assignee alone, then owns its thread",
			facts: fakeFacts{roots: map[id.EventID]string{"$t": "agent-c"}},
			steps: []step{
				{ev: msgEvent(roomOther, "$t", userA, "Carol: build it", mentioning(userC), taskStart("agent-c", "zt1")),
					want: Decision{Room: roomOther, TaskRoot: "agent-c",
						Wakes: []Wake{wakeOf("agent-c", roomOther, "$t", "$t", userA, "build it", WhyTaskAssignee)}},
					asked: []string{"task_root $t"}},
				{ev: msgEvent(roomOther, "$h", alice, "status?", inThread("$t")),
					want: Decision{Room: roomOther, Thread: "$t",
						Wakes: []Wake{wakeOf("agent-c", roomOther, "$t", "$h", alice, "status?", WhyTaskAssignee)}}},
			}},
		{name: "a task root met after its task closed wakes nobody, and its thread stays the task's",
			facts: fakeFacts{roots: map[id.EventID]string{"$t": "agent-c"}, closed: map[id.EventID]bool{"$t": true}},
			steps: []step{
				{ev: msgEvent(roomOther, "$t", userA, "Carol: build it", mentioning(userC), taskStart("agent-c", "zt1")),
					want:  Decision{Room: roomOther, TaskRoot: "agent-c", Why: WhyTaskClosed},
					asked: []string{"task_root $t"}},
				{ev: msgEvent(roomOther, "$h", alice, "status?", inThread("$t")),
					want: Decision{Room: roomOther, Thread: "$t",
						Wakes: []Wake{wakeOf("agent-c", roomOther, "$t", "$h", alice, "status?", WhyTaskAssignee)}}},
			}},
		{name: "an unjournaled task root is an agent's post, and its thread no task thread",
			facts: fakeFacts{history: map[id.EventID][]Message{"$t": nil}},
			steps: []step{
				{ev: msgEvent(roomOther, "$t", userA, "Carol: build it", mentioning(userC), taskStart("agent-c", "zt1")),
					want:  Decision{Room: roomOther, Why: WhyAgentPost},
					asked: []string{"task_root $t"}},
				{ev: msgEvent(roomOther, "$h", alice, "status?", inThread("$t")),
					want: Decision{Room: roomOther, Thread: "$t", Recall: true,
						Wakes: []Wake{wakeOf("agent-c", roomOther, "$t", "$h", alice, "status?", WhyTriggerAny)}},
					asked: []string{"task_thread $t", "history $t"}},
			}},
		{name: "a person's thread_start is content: asked about, never a task root", steps: []step{
			{ev: msgEvent(roomMain, "$h", alice, "@agent-b audit svc-b", mentioning(userB), taskStart("agent-a", "zt2")),
				want:  Decision{Room: roomMain, Wakes: []Wake{wakeOf("agent-b", roomMain, "$h", "$h", alice, "audit svc-b", WhyMention)}},
				asked: []string{"task_root $h"}},
		}},
		{name: "a task thread the router forgot is known again from the journal, without reading it",
			facts: fakeFacts{threads: map[id.EventID]string{"$t": "agent-c"}},
			steps: []step{
				{ev: msgEvent(roomOther, "$h", alice, "status?", inThread("$t")),
					want: Decision{Room: roomOther, Thread: "$t",
						Wakes: []Wake{wakeOf("agent-c", roomOther, "$t", "$h", alice, "status?", WhyTaskAssignee)}},
					asked: []string{"task_thread $t"}},
			}},
		{name: "a bare reply in a thread the router has no memory of recalls it once",
			facts: fakeFacts{history: map[id.EventID][]Message{"$1": {
				{Room: roomMain, EventID: "$1", Sender: alice, Body: "@agent-a hi", Mentions: mentions(userA)},
				{Room: roomMain, EventID: "$2", Sender: userB, Body: "I'll take it", MsgType: "m.notice", ThreadRoot: "$1"},
			}}},
			steps: []step{
				{ev: msgEvent(roomMain, "$3", alice, "so?", inThread("$1")),
					want: Decision{Room: roomMain, Thread: "$1", Recall: true,
						Wakes: []Wake{wakeOf("agent-b", roomMain, "$1", "$3", alice, "so?", WhyAddressee)}},
					asked: []string{"task_thread $1", "history $1"}},
				{ev: msgEvent(roomMain, "$4", alice, "and?", inThread("$1")),
					want: Decision{Room: roomMain, Thread: "$1",
						Wakes: []Wake{wakeOf("agent-b", roomMain, "$1", "$4", alice, "and?", WhyAddressee)}}},
			}},
		{name: "a recalled thread whose last post is a handoff goes to the callee",
			facts: fakeFacts{history: map[id.EventID][]Message{"$1": {
				{Room: roomMain, EventID: "$1", Sender: alice, Body: "@agent-a hi", Mentions: mentions(userA)},
				{Room: roomMain, EventID: "$2", Sender: userA, Body: "@agent-b check it", MsgType: "m.notice", ThreadRoot: "$1", HandoffTo: "agent-b"},
			}}},
			steps: []step{
				{ev: msgEvent(roomMain, "$3", alice, "so?", inThread("$1")),
					want: Decision{Room: roomMain, Thread: "$1", Recall: true,
						Wakes: []Wake{wakeOf("agent-b", roomMain, "$1", "$3", alice, "so?", WhyAddressee)}},
					asked: []string{"task_thread $1", "history $1"}},
			}},
		{name: "a thread that cannot be read back: routed without memory, read again next time", steps: []step{
			{ev: msgEvent(roomMain, "$3", alice, "so?", inThread("$1")),
				want:  Decision{Room: roomMain, Thread: "$1", Recall: true, Why: WhyNotAddressed},
				asked: []string{"task_thread $1", "history $1"}},
			{ev: msgEvent(roomMain, "$4", alice, "hello?", inThread("$1")),
				want:  Decision{Room: roomMain, Thread: "$1", Recall: true, Why: WhyNotAddressed},
				asked: []string{"task_thread $1", "history $1"}},
		}},
		{name: "in a thread it has no memory of, a mention or an agent's post needs no recall", steps: []step{
			{ev: msgEvent(roomMain, "$3", alice, "@agent-b look", inThread("$old"), mentioning(userB)),
				want:  Decision{Room: roomMain, Thread: "$old", Wakes: []Wake{wakeOf("agent-b", roomMain, "$old", "$3", alice, "look", WhyMention)}},
				asked: []string{"task_thread $old"}},
			{ev: msgEvent(roomMain, "$4", userA, "done", inThread("$older"), notice),
				want:  Decision{Room: roomMain, Thread: "$older", Why: WhyAgentPost},
				asked: []string{"task_thread $older"}},
		}},
		{name: "trigger any wakes beside a mention, and is an addressee of the thread after", steps: []step{
			{ev: msgEvent(roomOther, "$1", alice, "@agent-a hi", mentioning(userA)),
				want: Decision{Room: roomOther, Wakes: []Wake{
					wakeOf("agent-a", roomOther, "$1", "$1", alice, "hi", WhyMention),
					wakeOf("agent-c", roomOther, "$1", "$1", alice, "@agent-a hi", WhyTriggerAny),
				}}},
			{ev: msgEvent(roomOther, "$2", alice, "next", inThread("$1")),
				want: Decision{Room: roomOther, Thread: "$1", Wakes: []Wake{
					wakeOf("agent-a", roomOther, "$1", "$2", alice, "next", WhyAddressee),
					wakeOf("agent-c", roomOther, "$1", "$2", alice, "next", WhyAddressee),
				}}},
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := New(testAgents())
			f := c.facts
			for i, s := range c.steps {
				f.asked = nil
				_, got := r.Decide(s.ev, &f)
				if !reflect.DeepEqual(got, s.want) {
					t.Errorf("step %d: decision\n%+v\nwant\n%+v", i, got, s.want)
				}
				if fmt.Sprint(f.asked) != fmt.Sprint(s.asked) {
					t.Errorf("step %d: asked %q, want %q", i, f.asked, s.asked)
				}
			}
		})
	}
}

// Decide hands back the routing view it decided on: the body, the thread, and
// a task root's fields only when the journal holds the root.
func TestDecideReturnsTheMessageItRouted(t *testing.T) {
	r := New(testAgents())
	f := &fakeFacts{roots: map[id.EventID]string{"$t": "agent-b"}}
	m, _ := r.Decide(msgEvent(roomMain, "$t", userA, "@agent-b audit", mentioning(userB), taskStart("agent-b", "zt1")), f)
	if !m.IsTaskRoot || m.TaskAssignee != "agent-b" || m.TaskAttempt != "zt1" || m.Body != "@agent-b audit" {
		t.Errorf("journaled root routed as %+v", m)
	}
	m, _ = r.Decide(msgEvent(roomMain, "$u", userA, "@agent-b audit", mentioning(userB), taskStart("agent-b", "zt2")), f)
	if m.IsTaskRoot || m.TaskAssignee != "" || m.TaskAttempt != "" {
		t.Errorf("unjournaled root routed as %+v", m)
	}
	if m, d := r.Decide(nil, f); m != (Message{}) || d.Why != WhyNotMessage {
		t.Errorf("nil event: %+v, %+v", m, d)
	}
}
