package history_test

// Members, room info, rooms and send_message over the busy world, moved here
// from zooid/mcpserver with the other history behaviour tests: they call the
// tools through tools.Call, as mcpserver does, without the MCP transport.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/busyroom"
	"github.com/zooid-dev/zooid/fakehs"
	"github.com/zooid-dev/zooid/zooid/tools"
)

func TestMembersRoomInfoRooms(t *testing.T) {
	w := newWorld(t, 20, 2, 1)
	w.start(t, w.HS.URL())
	cl := w.session(w.caller("agent-a", w.Busy.RoomID))
	text, _ := callTool(t, cl, tools.GetMembers, nil)
	ms := decodeAs[tools.MembersResult](t, text).Members
	if len(ms) != 3 {
		t.Fatalf("members %+v", ms)
	}
	for _, m := range ms {
		name, isAgent := busyroom.AgentOf(m.ID)
		if m.IsAgent != isAgent || m.AgentName != name || m.Name == "" {
			t.Fatalf("member %+v", m)
		}
	}
	text, _ = callTool(t, cl, tools.GetRoomInfo, nil)
	if ri := decodeAs[tools.RoomInfo](t, text); ri.ID != w.Busy.RoomID || ri.Name != "Busy room" || ri.Transport != "matrix" {
		t.Fatalf("room info %+v", ri)
	}
	text, _ = callTool(t, cl, tools.GetRooms, nil)
	rs := decodeAs[tools.RoomsResult](t, text).Rooms
	var ids []id.RoomID
	for _, r := range rs {
		ids = append(ids, r.ID)
	}
	if len(rs) != 2 || !slices.Contains(ids, w.Busy.RoomID) || !slices.Contains(ids, w.Other.RoomID) {
		t.Fatalf("rooms %+v", rs)
	}

	// agent-b is joined to the secret room too, but not bound to it: neither
	// listed nor a target.
	clB := w.session(w.caller("agent-b", w.Busy.RoomID))
	text, _ = callTool(t, clB, tools.GetRooms, nil)
	ids = nil
	for _, r := range decodeAs[tools.RoomsResult](t, text).Rooms {
		ids = append(ids, r.ID)
	}
	if !slices.Equal(ids, []id.RoomID{w.Busy.RoomID, w.Other.RoomID}) {
		t.Fatalf("agent-b's rooms %v, want its binding [busy other]", ids)
	}
	text, isErr := callTool(t, clB, tools.SendMessage, map[string]any{"room": string(w.Secret.RoomID), "text": "unbound"})
	if !isErr {
		t.Fatalf("posted to a joined but unbound room: %s", text)
	}
	mustPrefix(t, text, "not_in_room: ")

	// A session bound to a room the agent is not in reads nothing.
	cl2 := w.session(w.caller("agent-a", w.Secret.RoomID))
	for _, tool := range []string{tools.GetHistory, tools.GetRecentThreads, tools.GetMembers, tools.GetRoomInfo} {
		text, isErr := callTool(t, cl2, tool, nil)
		if !isErr || strings.Contains(text, "secret root") {
			t.Fatalf("%s in a room the agent is not in: %s", tool, text)
		}
		mustPrefix(t, text, "forbidden: ")
	}
}

func TestSendMessage(t *testing.T) {
	w := newWorld(t, 40, 3, 1)
	w.start(t, w.HS.URL())
	cl := w.session(w.caller("agent-a", w.Busy.RoomID))
	root := w.Threads()[0]
	var latest id.EventID
	for _, m := range w.Want {
		if m.Thread == root.ID || m.ID == root.ID {
			latest = m.ID
		}
	}
	find := func(room id.RoomID, eid id.EventID) *event.Event {
		for _, e := range w.HS.Events(room) {
			if e.ID == eid {
				return e
			}
		}
		t.Fatalf("event %s not in %s", eid, room)
		return nil
	}

	text, isErr := callTool(t, cl, tools.SendMessage, map[string]any{"room": string(w.Busy.RoomID), "thread_id": string(root.ID), "text": "in thread, cc @agent-b:localhost"})
	if isErr {
		t.Fatal(text)
	}
	res := decodeAs[tools.SendResult](t, text)
	if res.ThreadID != root.ID {
		t.Fatalf("result %+v", res)
	}
	e := find(w.Busy.RoomID, res.EventID)
	_ = e.Content.ParseRaw(e.Type)
	mc := e.Content.AsMessage()
	if e.Sender != agentA || mc.MsgType != event.MsgNotice || mc.Body != "in thread, cc @agent-b:localhost" ||
		mc.RelatesTo == nil || mc.RelatesTo.Type != event.RelThread || mc.RelatesTo.EventID != root.ID ||
		!mc.RelatesTo.IsFallingBack || mc.RelatesTo.InReplyTo == nil || mc.RelatesTo.InReplyTo.EventID != latest {
		t.Fatalf("thread post %+v relates %+v", mc, mc.RelatesTo)
	}
	if mc.Mentions == nil || !slices.Equal(mc.Mentions.UserIDs, []id.UserID{agentB}) {
		t.Fatalf("mentions %+v", mc.Mentions)
	}

	text, isErr = callTool(t, cl, tools.SendMessage, map[string]any{"room": "#other", "text": "hello other"})
	if isErr {
		t.Fatal(text)
	}
	res = decodeAs[tools.SendResult](t, text)
	e = find(w.Other.RoomID, res.EventID)
	_ = e.Content.ParseRaw(e.Type)
	if mc := e.Content.AsMessage(); res.ThreadID != "" || mc.RelatesTo != nil || mc.Body != "hello other" || e.Sender != agentA {
		t.Fatalf("top-level post %+v", mc)
	}

	for _, tc := range []struct {
		args   map[string]any
		prefix string
	}{
		{map[string]any{"room": string(w.Secret.RoomID), "text": "let me in"}, "not_in_room: "},
		{map[string]any{"room": "#secret:localhost", "text": "let me in"}, "not_in_room: "},
		{map[string]any{"room": "#secret", "text": "let me in"}, "not_in_room: "},
		{map[string]any{"room": "other", "text": "no sign"}, "invalid_argument: "},
		{map[string]any{"room": "#nowhere:localhost", "text": "hello"}, "not_in_room: "},
		{map[string]any{"room": string(w.Other.RoomID), "thread_id": string(root.ID), "text": "wrong room"}, "not_found: "},
	} {
		text, isErr := callTool(t, cl, tools.SendMessage, tc.args)
		if !isErr {
			t.Fatalf("%v: accepted: %s", tc.args, text)
		}
		mustPrefix(t, text, tc.prefix)
	}
	for _, e := range w.HS.Events(w.Secret.RoomID) {
		if e.Sender == agentA {
			t.Fatal("agent-a posted into a room it is not in")
		}
	}
}

// zooid_get_room_info sends its membership check and its name read together:
// with the membership read held by the homeserver, the name read still
// arrives. The call then waits for the check: cancelled while it is held,
// it fails with the check's error, and returns only after the name read ended
// (no goroutine outlives the call).
func TestRoomInfoReadsMembershipAndNameTogether(t *testing.T) {
	w := newWorld(t, 4, 1, 1)
	w.start(t, w.HS.URL())
	const (
		memberPath = "/_matrix/client/v3/rooms/*/state/m.room.member/*"
		namePath   = "/_matrix/client/v3/rooms/*/state/m.room.name/"
	)
	held := w.HS.InjectFault(fakehs.Fault{Method: "GET", PathPattern: memberPath, Hold: true, Count: 1})
	type outcome struct {
		info tools.RoomInfo
		err  error
	}
	o := cancelOnceHeld(t, func(ctx context.Context) outcome {
		info, err := w.hist.RoomInfo(ctx, w.caller("agent-a", w.Busy.RoomID))
		return outcome{info, err}
	}, func() bool { return held.Hits() > 0 && w.HS.Requests("GET", namePath) > 0 }, func() string {
		return fmt.Sprintf("membership reads held %d, name reads %d: the name was not read while the membership read was held", held.Hits(), w.HS.Requests("GET", namePath))
	})
	if o.err == nil || !errors.Is(o.err, context.Canceled) {
		t.Fatalf("room info cancelled during its membership check: %+v, %v; want the check's context.Canceled", o.info, o.err)
	}
	// Unheld, the same call answers with the name.
	info, err := w.hist.RoomInfo(context.Background(), w.caller("agent-a", w.Busy.RoomID))
	if err != nil || info.Name != "Busy room" || info.ID != w.Busy.RoomID {
		t.Fatalf("room info: %+v, %v", info, err)
	}
}

// zooid_get_rooms reads its rooms' names concurrently: with every name read
// held by the homeserver, both rooms' reads arrive (one after the other, the
// second would wait for the first forever). Cancelled while they are held,
// the call fails with context.Canceled instead of answering with names it
// could not read, and returns only after every read ended (no goroutine
// outlives the call).
func TestRoomsReadsNamesTogether(t *testing.T) {
	w := newWorld(t, 4, 1, 1)
	w.start(t, w.HS.URL())
	held := w.HS.InjectFault(fakehs.Fault{Method: "GET", PathPattern: "/_matrix/client/v3/rooms/*/state/m.room.name/", Hold: true, Count: 2})
	type outcome struct {
		rooms []tools.RoomInfo
		err   error
	}
	o := cancelOnceHeld(t, func(ctx context.Context) outcome {
		rooms, err := w.hist.Rooms(ctx, w.caller("agent-a", w.Busy.RoomID))
		return outcome{rooms, err}
	}, func() bool { return held.Hits() == 2 }, func() string {
		return fmt.Sprintf("name reads held %d of the 2 rooms': the names were read one after the other", held.Hits())
	})
	if !errors.Is(o.err, context.Canceled) {
		t.Fatalf("rooms cancelled during its name reads: %+v, %v; want context.Canceled", o.rooms, o.err)
	}
	// Unheld, the same call answers with both names, in binding order.
	rooms, err := w.hist.Rooms(context.Background(), w.caller("agent-a", w.Busy.RoomID))
	if err != nil {
		t.Fatalf("rooms: %v", err)
	}
	var got []string
	for _, r := range rooms {
		got = append(got, string(r.ID)+"="+r.Name)
	}
	want := []string{string(w.Busy.RoomID) + "=Busy room", string(w.Other.RoomID) + "=Other room"}
	if !slices.Equal(got, want) {
		t.Fatalf("rooms %v, want %v", got, want)
	}
}

// cancelOnceHeld runs call while the homeserver holds reads (a fakehs Hold
// fault), waits until held says every read the test expects has arrived,
// then cancels the call's context and returns what the call returned. The
// call returning before that, or held staying false for 10 s (notHeld says
// what was missing), fails the test; either way the deferred cancel ends
// the held reads, so the call's goroutine ends with the test.
func cancelOnceHeld[T any](t *testing.T, call func(ctx context.Context) T, held func() bool, notHeld func() string) T {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan T, 1)
	go func() { done <- call(ctx) }() // owner: cancelOnceHeld; ends once cancel ends the held reads
	deadline := time.Now().Add(10 * time.Second)
	for !held() {
		select {
		case o := <-done:
			t.Fatalf("the call returned %+v while the homeserver held its reads", o)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal(notHeld())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	return <-done
}
