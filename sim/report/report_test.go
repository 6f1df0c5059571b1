package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/recording"
	"github.com/zooid-dev/zooid/zooid/trace"
)

// fixture is a recorded room with a thread, an agent, a hostile body, a
// traced turn with a tool call and a task thread, and its trace.
const fixture = `{
  "version": 2, "name": "ops <b>incident</b>", "room": "#ops",
  "members": [{"name": "agent-a", "role": "agent", "rooms": ["#ops"], "trigger": "mention"},
              {"name": "agent-b", "role": "agent", "rooms": ["#ops"], "trigger": "mention"}, "ori"],
  "events": [
    {"label": "alarm", "sender": "ori", "ts": "2026-03-02T09:02:11Z", "content": {"msgtype": "m.text", "body": "svc-a is slow, @agent-a can you look?"}},
    {"sender": "agent-a", "ts": "2026-03-02T09:03:00Z", "thread": "alarm", "content": {"msgtype": "m.notice", "body": "Deploy 8812 shrank the pool."}},
    {"sender": "ori", "ts": "2026-03-02T09:04:00Z", "content": {"msgtype": "m.text", "body": "<script>window.pwned=1</script><img src=x onerror=\"window.pwned=2\">"}},
    {"label": "task-root", "sender": "agent-a", "ts": "2026-03-02T09:05:00Z", "content": {"msgtype": "m.notice", "body": "Task for agent-b: check svc-b"}},
    {"sender": "agent-b", "ts": "2026-03-02T09:06:00Z", "thread": "task-root", "content": {"msgtype": "m.notice", "body": "svc-b is fine"}}
  ]
}`

func fixtureRecording(t testing.TB) *recording.Recording {
	t.Helper()
	rec, err := recording.Parse(strings.NewReader(fixture), "fixture.json")
	if err != nil {
		t.Fatal(err)
	}
	room := id.RoomID("!ops:hs1")
	sess := "agent-a|!ops:hs1|$alarm"
	at := time.Date(2026, 3, 2, 9, 2, 11, 0, time.UTC)
	recs := []any{
		trace.Header{Format: "zooid-trace", Version: 1, Room: room, Segment: 1},
		trace.Record{Seq: 1, Kind: trace.KindStart, Room: room, Start: &trace.Start{Alias: "#ops", Agents: []string{"agent-a", "agent-b"}}},
		trace.Record{Seq: 2, Time: at, Kind: trace.KindEvent, Room: room, Event: &trace.Event{ID: "$alarm", Sender: "@ori:hs1", Type: "m.room.message", MsgType: "m.text",
			Text: "svc-a is slow, @agent-a can you look?", Woke: []trace.Wake{{Agent: "agent-a", Thread: "$alarm", Session: sess, Why: trace.WhyMention}}, Decision: &trace.Decision{}}},
		trace.Record{Seq: 3, Kind: trace.KindPrompt, Room: room, Session: sess, Prompt: &trace.Prompt{Agent: "agent-a", Turn: "$alarm", Trigger: "$alarm", Fresh: true, Text: "ori: svc-a is slow"}},
		trace.Record{Seq: 4, Kind: trace.KindTool, Room: room, Session: sess, Tool: &trace.ToolCall{Agent: "agent-a", Tool: "zooid_read_thread", Args: `{"thread":"$alarm"}`, Result: `{"messages":[]}`}},
		trace.Record{Seq: 5, Kind: trace.KindTask, Room: room, Session: sess, Task: &trace.TaskStep{Step: trace.StepStarted, Agent: "agent-b", Caller: "agent-a", Thread: "$task"}},
		trace.Record{Seq: 6, Kind: trace.KindEvent, Room: room, Event: &trace.Event{ID: "$reply", Sender: "@agent-a:hs1", Type: "m.room.message", Thread: "$alarm", Text: "Deploy 8812 shrank the pool.", Nobody: trace.WhyAgentPost}},
		trace.Record{Seq: 7, Kind: trace.KindTurnEnd, Room: room, Session: sess, TurnEnd: &trace.TurnEnd{Agent: "agent-a", Turn: "$alarm", Stop: "end_turn"}},
		trace.Record{Seq: 8, Kind: trace.KindEvent, Room: room, Event: &trace.Event{ID: "$evil", Sender: "@ori:hs1", Type: "m.room.message", Text: rec.Text(2), Nobody: trace.WhyNotNotified}},
		trace.Record{Seq: 9, Kind: trace.KindEvent, Room: room, Event: &trace.Event{ID: "$task", Sender: "@agent-a:hs1", Type: "m.room.message", Text: "Task for agent-b: check svc-b", Nobody: trace.WhyAgentPost,
			Decision: &trace.Decision{TaskRoot: "agent-b"}}},
		trace.Record{Seq: 10, Kind: trace.KindTask, Room: room, Session: "agent-b|!ops:hs1|$task", Task: &trace.TaskStep{Step: trace.StepClosed, Agent: "agent-b", Thread: "$task", Status: "completed"}},
	}
	for _, r := range recs {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		rec.Trace = append(rec.Trace, b)
	}
	return rec
}

func render(t testing.TB, diff trace.Diff) string {
	t.Helper()
	run, err := FromRecording(fixtureRecording(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	run.Diff = diff
	var b bytes.Buffer
	if err := Write(&b, "replay of <fixture>", run); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestHostileTextIsEscaped(t *testing.T) {
	out := render(t, nil)
	for _, raw := range []string{"<script>window.pwned", "<img src=x", "<b>incident</b>", "<fixture>"} {
		if strings.Contains(out, raw) {
			t.Errorf("page holds %q unescaped", raw)
		}
	}
	for _, esc := range []string{"&lt;script&gt;window.pwned=1&lt;/script&gt;", "&lt;b&gt;incident&lt;/b&gt;"} {
		if !strings.Contains(out, esc) {
			t.Errorf("page lacks the escaped %q", esc)
		}
	}
	if n := strings.Count(out, "<script>"); n != 1 {
		t.Errorf("page has %d script elements, want only its own", n)
	}
}

func TestTraceAttachesToTheTimeline(t *testing.T) {
	run, err := FromRecording(fixtureRecording(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := len(run.Rooms[0].Events); got != 5 {
		t.Fatalf("%d events, want the recording's 5 (each matched to its trace event)", got)
	}
	if run.Rooms[0].Events[1].Thread != "$alarm" || run.Rooms[0].Events[1].ID != "$reply" {
		t.Errorf("reply is %+v, want id $reply in thread $alarm", run.Rooms[0].Events[1])
	}
	rv := buildRun(0, run)
	items := rv.Rooms[0].Items
	if len(items) != 3 {
		t.Fatalf("%d top-level items, want 3 (alarm, the hostile one, the task root)", len(items))
	}
	alarm := items[0]
	if alarm.Decision != "woke agent-a (mention)" || len(alarm.Replies) != 1 || len(alarm.Turns) != 1 {
		t.Fatalf("alarm: decision %q, %d replies, %d turns", alarm.Decision, len(alarm.Replies), len(alarm.Turns))
	}
	turn := alarm.Turns[0]
	if turn.End != "end_turn" || len(turn.Steps) != 2 || turn.Steps[0].Title != "zooid_read_thread" {
		t.Fatalf("turn %+v", turn)
	}
	task := items[2]
	if turn.Steps[1].Link != task.Anchor || task.TaskOf != turn.Anchor {
		t.Errorf("task step links %q, task root %q; task root links back %q, turn %q", turn.Steps[1].Link, task.Anchor, task.TaskOf, turn.Anchor)
	}
	if task.Decision != "woke nobody (agent_post); task root of agent-b" {
		t.Errorf("task root: decision %q", task.Decision)
	}
	if len(task.Notes) != 1 || task.Notes[0] != "closed for agent-b: completed" {
		t.Errorf("task root notes %q", task.Notes)
	}
	if alarm.Agent || !alarm.Replies[0].Agent {
		t.Errorf("agents marked wrong: ori %v, agent-a %v", alarm.Agent, alarm.Replies[0].Agent)
	}
}

func TestDivergencesAreHighlightedWhereTheyHappened(t *testing.T) {
	diff := trace.Diff{{Room: "#ops", Stream: "routing", What: `event $reply from @agent-a:hs1 in thread $alarm "Deploy": want woke nobody (agent_post); got woke agent-b (mention)`},
		{Room: "#ops", Stream: "session agent-c", What: "unexpected: prompt"}}
	rv := buildRun(0, mustRun(t, diff))
	reply := rv.Rooms[0].Items[0].Replies[0]
	if len(reply.Diverges) != 1 || !rv.Rooms[0].Items[0].RepliesDiverge {
		t.Fatalf("the reply's divergence is not on it: %+v", reply)
	}
	if len(rv.Diffs) != 2 || rv.Diffs[0].Anchor != reply.Anchor || rv.Diffs[1].Anchor != rv.Rooms[0].Anchor {
		t.Errorf("summary links %+v, want the reply's anchor %q then the room's", rv.Diffs, reply.Anchor)
	}
	out := render(t, diff)
	if !strings.Contains(out, `class="thread diverges" open`) {
		t.Errorf("the thread holding a divergence is not open")
	}
}

func mustRun(t *testing.T, diff trace.Diff) Run {
	run, err := FromRecording(fixtureRecording(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	run.Diff = diff
	return run
}

// A harness recording's trace spells mentions and senders as prefixed user
// ids ("@zs-agent-a:localhost") where the recording has names ("@agent-a"):
// each recorded event is still joined to its trace event and shown once, the
// trace's joins (not in the recording) once beside them.
func TestEachEventShowsOnce(t *testing.T) {
	rec, err := recording.Load("../../scenarios/ops-routing-traced.json")
	if err != nil {
		t.Fatal(err)
	}
	run, err := FromRecording(rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	events := run.Rooms[0].Events
	joins := 0
	for _, e := range events {
		if e.Type == "m.room.member" {
			joins++
		} else if !strings.HasPrefix(e.ID, "$") {
			t.Errorf("recorded event %q from %s has no trace event id (%q): not joined to its trace", e.Text, e.Sender, e.ID)
		}
	}
	if got, want := len(events), len(rec.Events)+joins; got != want {
		t.Fatalf("%d events shown, want the recording's %d and %d joins", got, len(rec.Events), joins)
	}
}

func TestSameEventRule(t *testing.T) {
	rec, err := recording.Parse(strings.NewReader(`{"version": 2, "members": ["ori", {"name": "planner", "role": "agent"}],
		"events": [{"sender": "ori", "ts": "2026-03-02T09:00:00Z", "content": {"body": "@planner look at svc-a"}},
		           {"sender": "planner", "ts": "2026-03-02T09:00:01Z", "content": {"body": "a long answer about svc-a"}}]}`), "t.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		j    int
		te   trace.Event
		want bool
	}{
		{0, trace.Event{Sender: "@ori:localhost", Type: "m.room.message", Text: "@planner:localhost look at svc-a"}, true},
		{0, trace.Event{Sender: "@ori:localhost", Type: "m.room.message", Text: "@zs-planner:localhost look at svc-a"}, true},
		{0, trace.Event{Sender: "@ori:localhost", Type: "m.room.message", Text: "@planner look at svc-a"}, true},
		{0, trace.Event{Sender: "@ori:localhost", Type: "m.room.message", Text: "@planner look at svc-b"}, false},
		{0, trace.Event{Sender: "@mia:localhost", Type: "m.room.message", Text: "@planner look at svc-a"}, false},
		{1, trace.Event{Sender: "@zs-planner:localhost", Type: "m.room.message", Text: "a long", TextSize: 25}, true},
		{1, trace.Event{Sender: "@zs-planner:localhost", Type: "m.room.message"}, true},
		{1, trace.Event{Sender: "@zs-planner:localhost", Type: "m.room.member"}, false},
	} {
		if got := sameEvent(rec, tc.j, &tc.te); got != tc.want {
			t.Errorf("event %d vs %+v: %v, want %v", tc.j, tc.te, got, tc.want)
		}
	}
}
