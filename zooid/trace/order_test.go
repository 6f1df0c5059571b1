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

// TestCompareCallerWokenInEitherOrder: two tasks that end at once wake their
// caller in either order (the results race to the homeserver); the caller's
// session pairs each prompt with the same prompt wherever it is, so the
// other order is no difference, its posts and turn ends following. A result
// prompt whose text changed is still one difference, naming both texts.
func TestCompareCallerWokenInEitherOrder(t *testing.T) {
	mk := func(p string, swap bool, textB string) *trace.Trace {
		room := id.RoomID("!r" + p + ":x")
		e0 := id.EventID("$e0" + p + "aaaaaaaaaa")
		s := "p|" + string(room) + "|" + string(e0)
		ta, tb := "internal.A"+p+"AAAAAAAAAAAAAAAAAAAAAAAAAA", "internal.B"+p+"BBBBBBBBBBBBBBBBBBBBBBBBBB"
		a := []trace.Record{
			{Kind: trace.KindPrompt, Session: s, Prompt: &trace.Prompt{Agent: "p", Turn: ta, Text: "Task for a ended: complete\n\nsvc-a is clean"}},
			{Kind: trace.KindPost, Post: &trace.Post{ID: id.EventID("$pa" + p + "aaaaaaaaaa"), Sender: "@p:x", Type: "m.room.message", MsgType: "m.notice", Thread: e0, Text: "noted a", TxnID: "zooid.a" + p + "aaaaaaaaaaaaaaaaaaaaaaaaaa"}},
			{Kind: trace.KindTurnEnd, Session: s, TurnEnd: &trace.TurnEnd{Agent: "p", Turn: ta, Stop: "end_turn"}},
		}
		b := []trace.Record{
			{Kind: trace.KindPrompt, Session: s, Prompt: &trace.Prompt{Agent: "p", Turn: tb, Text: textB}},
			{Kind: trace.KindPost, Post: &trace.Post{ID: id.EventID("$pb" + p + "aaaaaaaaaa"), Sender: "@p:x", Type: "m.room.message", MsgType: "m.notice", Thread: e0, Text: "noted b", TxnID: "zooid.b" + p + "bbbbbbbbbbbbbbbbbbbbbbbbbb"}},
			{Kind: trace.KindTurnEnd, Session: s, TurnEnd: &trace.TurnEnd{Agent: "p", Turn: tb, Stop: "end_turn"}},
		}
		recs := []trace.Record{{Kind: trace.KindStart, Start: &trace.Start{Alias: "#ops:x"}},
			{Kind: trace.KindEvent, Event: &trace.Event{ID: e0, Sender: "@ori:x", Type: "m.room.message", Text: "@p go", Woke: []trace.Wake{{Agent: "p", Thread: e0, Session: s, Why: "mention"}}}}}
		if swap {
			recs = append(append(recs, b...), a...)
		} else {
			recs = append(append(recs, a...), b...)
		}
		for i := range recs {
			recs[i].Room = room
			recs[i].Seq = uint64(i + 1)
		}
		return &trace.Trace{Rooms: []trace.Room{{ID: room, Alias: "#ops:x", Records: recs}}}
	}
	const b = "Task for b ended: complete\n\nsvc-b is clean"
	if d := trace.Compare(mk("A", false, b), mk("B", true, b)); len(d) != 0 {
		t.Fatalf("a caller woken with two results in the other order: %d differences, want none:\n%s", len(d), d)
	}
	d := trace.Compare(mk("A", false, b), mk("B", true, "Task for b ended: failed\n\nno access"))
	if len(d) != 1 || !strings.Contains(d[0].What, `want "Task for b ended: complete`) || !strings.Contains(d[0].What, `got "Task for b ended: failed`) {
		t.Fatalf("a changed result prompt, woken in the other order: want the one difference naming both texts, got %d:\n%s", len(d), d)
	}
}
