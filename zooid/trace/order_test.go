package trace_test

import (
	"strings"
	"testing"

	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/trace"
)

// TestCompareTurnsEndingInEitherOrder: two turns of one agent running at
// once, in two threads, that end together — their posts, turn ends and the
// posts' events in one order in want and the other in got, with the same
// text in both threads — compare equal: each stream pairs records by
// identity before position, and the ids pair through the threads. A changed
// post in one of them is still a difference.
func TestCompareTurnsEndingInEitherOrder(t *testing.T) {
	mk := func(p string, swap bool, text2 string) *trace.Trace {
		room := id.RoomID("!r" + p + ":x")
		e1, e2 := id.EventID("$e1"+p+"aaaaaaaaaa"), id.EventID("$e2"+p+"aaaaaaaaaa")
		p1, p2 := id.EventID("$p1"+p+"aaaaaaaaaa"), id.EventID("$p2"+p+"aaaaaaaaaa")
		s1, s2 := "a|"+string(room)+"|"+string(e1), "a|"+string(room)+"|"+string(e2)
		recs := []trace.Record{
			{Kind: trace.KindStart, Start: &trace.Start{Alias: "#ops:x"}},
			{Kind: trace.KindEvent, Event: &trace.Event{ID: e1, Sender: "@ori:x", Type: "m.room.message", Text: "@a one", Woke: []trace.Wake{{Agent: "a", Thread: e1, Session: s1, Why: "mention"}}}},
			{Kind: trace.KindEvent, Event: &trace.Event{ID: e2, Sender: "@ori:x", Type: "m.room.message", Text: "@a two", Woke: []trace.Wake{{Agent: "a", Thread: e2, Session: s2, Why: "mention"}}}},
			{Kind: trace.KindPrompt, Session: s1, Prompt: &trace.Prompt{Agent: "a", Turn: string(e1), Trigger: e1, Text: "one"}},
			{Kind: trace.KindPrompt, Session: s2, Prompt: &trace.Prompt{Agent: "a", Turn: string(e2), Trigger: e2, Text: "two"}},
		}
		end1 := []trace.Record{
			{Kind: trace.KindPost, Post: &trace.Post{ID: p1, Sender: "@a:x", Type: "m.room.message", MsgType: "m.notice", Thread: e1, Text: "ok", TxnID: "t1"}},
			{Kind: trace.KindTurnEnd, Session: s1, TurnEnd: &trace.TurnEnd{Agent: "a", Turn: string(e1), Stop: "end_turn"}},
		}
		end2 := []trace.Record{
			{Kind: trace.KindPost, Post: &trace.Post{ID: p2, Sender: "@a:x", Type: "m.room.message", MsgType: "m.notice", Thread: e2, Text: text2, TxnID: "t2"}},
			{Kind: trace.KindTurnEnd, Session: s2, TurnEnd: &trace.TurnEnd{Agent: "a", Turn: string(e2), Stop: "end_turn"}},
		}
		ev1 := trace.Record{Kind: trace.KindEvent, Event: &trace.Event{ID: p1, Sender: "@a:x", Type: "m.room.message", MsgType: "m.notice", Thread: e1, Text: "ok", Nobody: "agent_post"}}
		ev2 := trace.Record{Kind: trace.KindEvent, Event: &trace.Event{ID: p2, Sender: "@a:x", Type: "m.room.message", MsgType: "m.notice", Thread: e2, Text: text2, Nobody: "agent_post"}}
		if swap {
			recs = append(append(append(recs, end2...), end1...), ev2, ev1)
		} else {
			recs = append(append(append(recs, end1...), end2...), ev1, ev2)
		}
		for i := range recs {
			recs[i].Room = room
			recs[i].Seq = uint64(i + 1)
		}
		return &trace.Trace{Rooms: []trace.Room{{ID: room, Alias: "#ops:x", Records: recs}}}
	}
	if d := trace.Compare(mk("A", false, "ok"), mk("B", true, "ok")); len(d) != 0 {
		t.Fatalf("two turns ending in the other order: %d differences, want none:\n%s", len(d), d)
	}
	d := trace.Compare(mk("A", false, "ok"), mk("B", true, "not ok"))
	if len(d) == 0 {
		t.Fatal("a changed post of one of two concurrent turns compared equal")
	}
	for _, x := range d {
		if !strings.Contains(x.What, `"not ok"`) {
			t.Errorf("a difference that does not name the changed post: %s", x)
		}
	}
}
