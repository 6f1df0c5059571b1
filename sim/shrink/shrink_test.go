package shrink

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/recording"
	"github.com/zooid-dev/zooid/zooid/trace"
)

// busyRoom builds a recording of n events with its trace: humans talk, now
// and then mention agent-a or agent-b (each mention a traced turn: prompt,
// tool call, the agent's reply posted in the mention's thread, turn end),
// reply in threads, react. Event bug is "@agent-b is svc-q up?" in the
// thread of an incident root; it returns its index.
func busyRoom(t testing.TB, n int) (*recording.Recording, int) {
	t.Helper()
	humans := []string{"ori", "mia", "lev", "noa", "tal"}
	var b strings.Builder
	b.WriteString(`{"version": 2, "name": "ops", "room": "#ops", "members": [` +
		`{"name": "agent-a", "role": "agent", "rooms": ["#ops"], "trigger": "mention"},` +
		`{"name": "agent-b", "role": "agent", "rooms": ["#ops"], "trigger": "mention"}`)
	for _, h := range humans {
		fmt.Fprintf(&b, `, %q`, h)
	}
	b.WriteString(`], "events": [`)
	type ev struct {
		sender, body string
		thread       int
		reacts       int
	}
	var evs []ev
	var roots []int
	bug := -1
	for len(evs) < n {
		i := len(evs)
		h := humans[i%len(humans)]
		switch {
		case bug < 0 && i >= n/2 && i+3 <= n:
			root := len(evs)
			evs = append(evs, ev{sender: "noa", body: "incident on svc-q", thread: -1, reacts: -1})
			bug = len(evs)
			evs = append(evs, ev{sender: "mia", body: "@agent-b is svc-q up?", thread: root, reacts: -1})
			evs = append(evs, ev{sender: "agent-b", body: "svc-q is up.", thread: root, reacts: -1})
		case i%7 == 0:
			roots = append(roots, i)
			agent := []string{"agent-a", "agent-b"}[(i/7)%2]
			evs = append(evs, ev{sender: h, body: fmt.Sprintf("@%s please look at item %d", agent, i), thread: -1, reacts: -1})
			evs = append(evs, ev{sender: agent, body: fmt.Sprintf("item %d looks fine.", i), thread: i, reacts: -1})
		case i%5 == 0 && len(roots) > 0:
			evs = append(evs, ev{sender: h, body: fmt.Sprintf("thanks, noted %d", i), thread: roots[len(roots)-1], reacts: -1})
		case i%11 == 0 && i > 0:
			evs = append(evs, ev{sender: h, reacts: i - 1, thread: -1})
		default:
			evs = append(evs, ev{sender: h, body: fmt.Sprintf("status update %d", i), thread: -1, reacts: -1})
		}
	}
	evs = evs[:n]
	room := id.RoomID("!ops:hs1")
	lines := []any{trace.Header{Format: "zooid-trace", Version: 1, Room: room, Segment: 1},
		trace.Record{Kind: trace.KindStart, Room: room, Start: &trace.Start{Alias: "#ops", Agents: []string{"agent-a", "agent-b"}}}}
	at := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	type turn struct {
		agent, sess string
		trigger     id.EventID
	}
	open := map[string]turn{}
	for i, e := range evs {
		if i > 0 {
			b.WriteString(",\n")
		}
		ts := at.Add(time.Duration(i) * time.Second).Format(time.RFC3339)
		eid := id.EventID(fmt.Sprintf("$ev%04d", i))
		if e.reacts >= 0 {
			fmt.Fprintf(&b, `{"sender": %q, "ts": %q, "reacts_to": %d, "key": "👍"}`, e.sender, ts, e.reacts)
			lines = append(lines, trace.Record{Kind: trace.KindEvent, Room: room, Event: &trace.Event{ID: eid, Sender: id.UserID("@" + e.sender + ":hs1"), Type: "m.reaction", Nobody: trace.WhyNotMessage}})
			continue
		}
		thread := ""
		var tid id.EventID
		if e.thread >= 0 {
			thread = fmt.Sprintf(`, "thread": %d`, e.thread)
			tid = id.EventID(fmt.Sprintf("$ev%04d", e.thread))
		}
		fmt.Fprintf(&b, `{"sender": %q, "ts": %q, "content": {"msgtype": "m.text", "body": %q}%s}`, e.sender, ts, e.body, thread)
		rec := trace.Event{ID: eid, Sender: id.UserID("@" + e.sender + ":hs1"), Type: "m.room.message", MsgType: "m.text", Thread: tid, Text: e.body}
		var starts []turn
		if strings.HasPrefix(e.sender, "agent-") {
			rec.Nobody = trace.WhyAgentPost
			// The agent's reply ends the turn it belongs to.
			if tr, ok := open[e.sender]; ok {
				lines = append(lines, trace.Record{Kind: trace.KindPost, Room: room, Post: &trace.Post{ID: eid, Sender: rec.Sender, Type: "m.room.message", MsgType: "m.notice", Thread: tid, Text: e.body, TxnID: "zooid.1"}})
				lines = append(lines, trace.Record{Kind: trace.KindEvent, Room: room, Event: &rec})
				lines = append(lines, trace.Record{Kind: trace.KindTurnEnd, Room: room, Session: tr.sess, TurnEnd: &trace.TurnEnd{Agent: tr.agent, Turn: string(tr.trigger), Stop: "end_turn"}})
				delete(open, e.sender)
				continue
			}
		} else if m := regexp.MustCompile(`@(agent-[ab])`).FindStringSubmatch(e.body); m != nil {
			root := eid
			if tid != "" {
				root = tid
			}
			tr := turn{agent: m[1], sess: m[1] + "|" + string(room) + "|" + string(root), trigger: eid}
			rec.Woke = []trace.Wake{{Agent: m[1], Thread: root, Session: tr.sess, Why: trace.WhyMention}}
			starts = append(starts, tr)
		} else {
			rec.Nobody = trace.WhyNotNotified
		}
		lines = append(lines, trace.Record{Kind: trace.KindEvent, Room: room, Event: &rec})
		for _, tr := range starts {
			open[tr.agent] = tr
			lines = append(lines, trace.Record{Kind: trace.KindPrompt, Room: room, Session: tr.sess, Prompt: &trace.Prompt{Agent: tr.agent, Turn: string(eid), Trigger: eid, Text: e.body}})
			lines = append(lines, trace.Record{Kind: trace.KindTool, Room: room, Session: tr.sess, Tool: &trace.ToolCall{Agent: tr.agent, Tool: "zooid_read_thread", Args: `{}`, Result: `{}`}})
		}
	}
	b.WriteString("]}")
	rec, err := recording.Parse(strings.NewReader(b.String()), "busy.json")
	if err != nil {
		t.Fatal(err)
	}
	for seq, l := range lines {
		if r, ok := l.(trace.Record); ok {
			r.Seq = uint64(seq)
			l = r
		}
		raw, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		rec.Trace = append(rec.Trace, raw)
	}
	return rec, bug
}

// routeToday is a stand-in for replaying through today's daemon: it routes
// each traced event of the recording by its mentions of configured agents,
// with a bug — a mention of agent-b in a thread about svc-q wakes nobody —
// and diffs that with the recorded decisions, as trace.Compare would.
func routeToday(t testing.TB, rec *recording.Recording) trace.Diff {
	t.Helper()
	// Every candidate is a valid recording: it writes and loads back.
	var buf bytes.Buffer
	if err := rec.Write(&buf); err != nil {
		t.Fatal(err)
	}
	if _, err := recording.Parse(&buf, "candidate.json"); err != nil {
		t.Fatalf("a candidate is not a valid recording: %v", err)
	}
	var diff trace.Diff
	for _, raw := range rec.Trace {
		var r trace.Record
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		if r.Event == nil || r.Event.Type != "m.room.message" || strings.HasPrefix(string(r.Event.Sender), "@agent-") {
			continue
		}
		var want, got []string
		for _, w := range r.Event.Woke {
			want = append(want, w.Agent)
		}
		for name := range rec.Agents {
			if strings.Contains(r.Event.Text, "@"+name) && !(name == "agent-b" && r.Event.Thread != "" && strings.Contains(r.Event.Text, "svc-q")) {
				got = append(got, name)
			}
		}
		slices.Sort(got)
		if !slices.Equal(want, got) {
			diff = append(diff, trace.Difference{Room: "#ops", Stream: "routing",
				What: fmt.Sprintf("event %s from %s %q: want woke %v; got woke %v", r.Event.ID, r.Event.Sender, r.Event.Text, want, got)})
		}
	}
	return diff
}

func TestShrinkA500EventRecording(t *testing.T) {
	rec, bug := busyRoom(t, 500)
	if len(rec.Events) != 500 {
		t.Fatalf("%d events", len(rec.Events))
	}
	original := routeToday(t, rec)
	if len(original) != 1 || !strings.Contains(original[0].What, "is svc-q up?") {
		t.Fatalf("the busy room diverges as %v; want once, at the svc-q mention", original)
	}
	start := time.Now()
	res, err := Recording(context.Background(), rec, func(_ context.Context, c *recording.Recording) (bool, error) {
		return SameWay(original, routeToday(t, c)), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	got := res.Recording
	t.Logf("500 events → %d events, %d members, %d trace lines; %d candidates replayed, %d cached, in %s",
		len(got.Events), len(got.Members), len(got.Trace), res.Tests, res.Cached, took)
	var texts []string
	for i := range got.Events {
		texts = append(texts, got.Events[i].Sender+": "+got.Text(i))
	}
	want := []string{"noa: incident on svc-q", "mia: @agent-b is svc-q up?"}
	if !slices.Equal(texts, want) {
		t.Errorf("shrunk to %q, want %q (the thread root and the mention, event %d)", texts, want, bug)
	}
	if !res.Minimal || res.Unknown != 0 || res.Units != 2 {
		t.Errorf("minimal %v (%d single removals unknown), %d units; want 1-minimal, 0 unknown, 2 units", res.Minimal, res.Unknown, res.Units)
	}
	if got.Events[1].Thread != 0 {
		t.Errorf("the mention is no longer in the root's thread: %+v", got.Events[1])
	}
	slices.Sort(got.Members)
	if !slices.Equal(got.Members, []string{"agent-b", "mia", "noa"}) {
		t.Errorf("members %v, want agent-b, mia, noa", got.Members)
	}
	if d := routeToday(t, got); !SameWay(original, d) {
		t.Errorf("the shrunk recording diverges as %v", d)
	}
	// Its trace holds the start, the two events and agent-b's turn for the mention (its reply, a removable event, gone), nothing else.
	var kinds []string
	for _, raw := range got.Trace {
		var r trace.Record
		_ = json.Unmarshal(raw, &r)
		kinds = append(kinds, string(r.Kind))
	}
	if !slices.Equal(kinds, []string{"", "start", "event", "event", "prompt", "tool", "turn_end"}) {
		t.Errorf("trace kinds %v", kinds)
	}
}

func TestSameWayMasksRunIDs(t *testing.T) {
	a := trace.Diff{{Room: "#ops", Stream: "session agent-b in thread $abc:hs1", What: `event $x1:hs1 in !r:hs1 "hi": want woke agent-b (mention); got woke nobody (nobody_addressed)`}}
	b := trace.Diff{{Room: "#ops", Stream: "session agent-b in thread $zzz:hs2", What: `event $y2:hs2 in !q:hs2 "hi": want woke agent-b (mention); got woke nobody (nobody_addressed)`},
		{Room: "#ops", Stream: "routing", What: "missing: prompt"}}
	if !SameWay(a, b[:1]) {
		t.Errorf("same difference on other ids is not the same way")
	}
	// One more difference is another failure: the shrunk recording would
	// show what the input did not.
	if SameWay(a, b) {
		t.Errorf("a diff with one more difference counted as the same way")
	}
	c := trace.Diff{{Room: "#ops", Stream: "session agent-b in thread $zzz:hs2", What: `event $y2:hs2 in !q:hs2 "hi": want woke agent-b (mention); got woke agent-a (mention)`}}
	if SameWay(a, c) {
		t.Errorf("another decision counted as the same way")
	}
	if SameWay(a, nil) || SameWay(nil, b) {
		t.Errorf("no diff is never the same way")
	}
}

func TestRemovingAnAgentTakesItOutOfTheTrace(t *testing.T) {
	rec, _ := busyRoom(t, 60)
	g, err := newGraph(rec)
	if err != nil {
		t.Fatal(err)
	}
	var members []int
	for i, m := range rec.Members {
		if m != "agent-a" {
			members = append(members, i)
		}
	}
	c, _ := g.candidate(members, seq(len(rec.Events)))
	if _, ok := c.Agents["agent-a"]; ok {
		t.Fatal("agent-a still configured")
	}
	for i := range c.Events {
		if c.Events[i].Sender == "agent-a" {
			t.Fatalf("agent-a's post %d kept", i)
		}
	}
	for _, raw := range c.Trace {
		if strings.Contains(string(raw), `"agent-a"`) || strings.Contains(string(raw), "agent-a|") {
			t.Errorf("trace line still names agent-a: %s", raw)
		}
	}
	if d := routeToday(t, c); len(d) != 1 {
		t.Errorf("without agent-a the room diverges as %v; want only the svc-q mention", d)
	}
}

// TestATaskIsOneUnit: in a recording made by the harness (a delegation from
// planner to coder and its result, a restart), the task — the turn that
// delegated and the event that triggered it, the root, the assignee's reply
// and dev.zooid.thread_result in its thread, the notice in the caller's
// thread and the caller's turn on the result — is one unit, and removing
// the root alone removes all of it from the events and the trace: no
// candidate keeps a delegation without its root or a result prompt without
// its task.
func TestATaskIsOneUnit(t *testing.T) {
	rec, err := recording.Load("../../scenarios/busy-ops-traced.json")
	if err != nil {
		t.Fatal(err)
	}
	g, err := newGraph(rec)
	if err != nil {
		t.Fatal(err)
	}
	var units [][]string
	for _, u := range g.units {
		var texts []string
		for _, i := range u {
			texts = append(texts, fmt.Sprintf("%d %s: %.24s", i, rec.Events[i].Sender, rec.Text(i)))
		}
		units = append(units, texts)
	}
	want := [][]string{
		{"0 ori: @planner please check sv"}, {"1 planner: looking at svc-a"},
		{"2 ori: @planner harness-barrier"}, {"3 planner: ok"},
		{"4 mia: and svc-b too"}, {"5 planner: ok"},
		{"6 ori: @planner go on (2)", "7 planner: @coder audit svc-a", "8 coder: svc-a is clean", "9 coder: ",
			"10 coder: Task for coder (thread $", "11 planner: ok"},
		{"12 ori: @planner harness-barrier"}, {"13 planner: ok"},
		{"14 ori: @coder is svc-c up?"}, {"15 coder: ok"},
	}
	if !slices.EqualFunc(units, want, slices.Equal) {
		t.Errorf("units\n%q\nwant\n%q", units, want)
	}
	root := 7
	var rest []int
	for i := range rec.Events {
		if i != root {
			rest = append(rest, i)
		}
	}
	c, _ := g.candidate(seq(len(rec.Members)), rest)
	var texts []string
	for i := range c.Events {
		texts = append(texts, c.Events[i].Sender+": "+c.Text(i))
	}
	wantTexts := []string{"ori: @planner please check svc-a", "planner: looking at svc-a", "ori: @planner harness-barrier 1", "planner: ok",
		"mia: and svc-b too", "planner: ok", "ori: @planner harness-barrier 3", "planner: ok", "ori: @coder is svc-c up?", "coder: ok"}
	if !slices.Equal(texts, wantTexts) {
		t.Errorf("without the task root the candidate keeps\n%q\nwant\n%q", texts, wantTexts)
	}
	taskThread := g.traceID[root]
	for _, raw := range c.Trace {
		s := string(raw)
		if strings.Contains(s, taskThread) || strings.Contains(s, "go on (2)") || strings.Contains(s, "A task you delegated has ended") || strings.Contains(s, `"kind":"task"`) {
			t.Errorf("the candidate's trace keeps a part of the task: %.200s", s)
		}
	}
}

// TestARestartKeepsWhatItInterrupted: in a recording made by the harness
// with the daemon SIGKILLed while coder's turn on "@coder deploy svc-a"
// hung, that mention, the dev.zooid.error and the notice the restarted
// daemon posted of the cut turn are one unit (a replay's restart posts
// them again whatever the candidate holds); planner's turn after is not.
func TestARestartKeepsWhatItInterrupted(t *testing.T) {
	rec, err := recording.Load("../../scenarios/ops-midturn-traced.json")
	if err != nil {
		t.Fatal(err)
	}
	g, err := newGraph(rec)
	if err != nil {
		t.Fatal(err)
	}
	if want := [][]int{{0, 1, 2}, {3}, {4}}; !slices.EqualFunc(g.units, want, slices.Equal) {
		t.Errorf("units %v, want %v", g.units, want)
	}
	if typ := rec.Events[1].Type; typ != "dev.zooid.error" || !strings.Contains(rec.Text(2), "interrupted by a daemon restart") {
		t.Errorf("events 1 and 2 are %q and %q, not the error and the notice", typ, rec.Text(2))
	}
}
