package fakehs

import (
	"context"
	"net/http"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// seedThreads imports a room: event 0 and 3 are roots; 1, 2 reply to 0; 4 replies to 3; 5 is top-level.
func seedThreads(t *testing.T, s *Server, alice, bob id.UserID) *ImportedRoom {
	t.Helper()
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	msg := func(body string) map[string]any {
		return map[string]any{"msgtype": "m.text", "body": body, "m.mentions": map[string]any{"user_ids": []string{string(bob)}}}
	}
	imp, err := s.ImportRoom(RoomSeed{Creator: alice, Name: "seeded", AliasLocalpart: "seeded", Members: []id.UserID{bob},
		Events: []SeedEvent{
			{Sender: alice, Content: msg("root A"), Timestamp: ts, ThreadRoot: -1},
			{Sender: bob, Content: msg("A1"), Timestamp: ts.Add(time.Second), ThreadRoot: 0},
			{Sender: bob, Content: msg("A2"), Timestamp: ts.Add(2 * time.Second), ThreadRoot: 0},
			{Sender: bob, Content: msg("root B"), Timestamp: ts.Add(3 * time.Second), ThreadRoot: -1},
			{Sender: bob, Content: msg("B1"), Timestamp: ts.Add(4 * time.Second), ThreadRoot: 3},
			{Sender: alice, Content: msg("top"), Timestamp: ts.Add(5 * time.Second), ThreadRoot: -1},
		}})
	if err != nil {
		t.Fatal(err)
	}
	return imp
}

func TestImportedThreadsRelationsAndAggregations(t *testing.T) {
	s := New(t)
	ctx := context.Background()
	aliceID, aliceTok, err := s.RegisterUser("alice", "Alice")
	if err != nil {
		t.Fatal(err)
	}
	bobID, bobTok, err := s.RegisterUser("bob", "Bob")
	if err != nil {
		t.Fatal(err)
	}
	imp := seedThreads(t, s, aliceID, bobID)
	alice, _ := mautrix.NewClient(s.URL(), aliceID, aliceTok)

	// /threads: B had the latest activity, so it comes first.
	type threadsResp struct {
		Chunk []struct {
			EventID  id.EventID `json:"event_id"`
			Unsigned struct {
				Relations struct {
					Thread struct {
						Count        int  `json:"count"`
						Participated bool `json:"current_user_participated"`
						Latest       struct {
							EventID id.EventID `json:"event_id"`
						} `json:"latest_event"`
					} `json:"m.thread"`
				} `json:"m.relations"`
			} `json:"unsigned"`
		} `json:"chunk"`
		NextBatch string `json:"next_batch"`
	}
	var threads threadsResp
	decode(t, rawGet(t, s, aliceTok, "/_matrix/client/v1/rooms/"+string(imp.RoomID)+"/threads?limit=1"), 200, &threads)
	if len(threads.Chunk) != 1 || threads.Chunk[0].EventID != imp.EventIDs[3] || threads.NextBatch == "" {
		t.Fatalf("threads page 1: %+v", threads)
	}
	th := threads.Chunk[0].Unsigned.Relations.Thread
	if th.Count != 1 || th.Latest.EventID != imp.EventIDs[4] || th.Participated {
		t.Fatalf("thread B aggregation for alice: %+v", th)
	}
	next := threads.NextBatch
	threads = threadsResp{}
	decode(t, rawGet(t, s, aliceTok, "/_matrix/client/v1/rooms/"+string(imp.RoomID)+"/threads?limit=5&from="+next), 200, &threads)
	if len(threads.Chunk) != 1 || threads.Chunk[0].EventID != imp.EventIDs[0] || threads.NextBatch != "" {
		t.Fatalf("threads page 2: %+v", threads)
	}
	if th := threads.Chunk[0].Unsigned.Relations.Thread; th.Count != 2 || !th.Participated || th.Latest.EventID != imp.EventIDs[2] {
		t.Fatalf("thread A aggregation: %+v", th)
	}
	threads = threadsResp{}
	decode(t, rawGet(t, s, aliceTok, "/_matrix/client/v1/rooms/"+string(imp.RoomID)+"/threads?include=participated"), 200, &threads)
	if len(threads.Chunk) != 1 || threads.Chunk[0].EventID != imp.EventIDs[0] {
		t.Fatalf("participated threads: %+v", threads)
	}

	// A new reply over HTTP bumps thread A to the top.
	reply := map[string]any{"msgtype": "m.text", "body": "A3",
		"m.relates_to": map[string]any{"rel_type": "m.thread", "event_id": imp.EventIDs[0]}}
	sent, err := alice.SendMessageEvent(ctx, imp.RoomID, event.EventMessage, reply)
	if err != nil {
		t.Fatal(err)
	}
	threads = threadsResp{}
	decode(t, rawGet(t, s, aliceTok, "/_matrix/client/v1/rooms/"+string(imp.RoomID)+"/threads"), 200, &threads)
	if len(threads.Chunk) != 2 || threads.Chunk[0].EventID != imp.EventIDs[0] || threads.Chunk[0].Unsigned.Relations.Thread.Count != 3 {
		t.Fatalf("after reply: %+v", threads)
	}

	// /relations pages the thread oldest-last by default (dir=b).
	rel, err := alice.GetRelations(ctx, imp.RoomID, imp.EventIDs[0], &mautrix.ReqGetRelations{RelationType: event.RelThread, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(rel.Chunk) != 2 || rel.Chunk[0].ID != sent.EventID || rel.Chunk[1].ID != imp.EventIDs[2] || rel.NextBatch == "" {
		t.Fatalf("relations page 1: %d %q", len(rel.Chunk), rel.NextBatch)
	}
	rel2, err := alice.GetRelations(ctx, imp.RoomID, imp.EventIDs[0], &mautrix.ReqGetRelations{RelationType: event.RelThread, Limit: 2, From: rel.NextBatch})
	if err != nil {
		t.Fatal(err)
	}
	if len(rel2.Chunk) != 1 || rel2.Chunk[0].ID != imp.EventIDs[1] || rel2.NextBatch != "" {
		t.Fatalf("relations page 2: %d %q", len(rel2.Chunk), rel2.NextBatch)
	}

	// /messages with not_rel_types hides thread replies; the root carries its aggregation;
	// timestamps and m.mentions come back as imported.
	var msgs struct {
		Chunk []struct {
			EventID id.EventID     `json:"event_id"`
			TS      int64          `json:"origin_server_ts"`
			Content map[string]any `json:"content"`
			Unsig   map[string]any `json:"unsigned"`
		} `json:"chunk"`
	}
	filter := `{"types":["m.room.message"],"org.matrix.msc3874.not_rel_types":["m.thread"]}`
	decode(t, rawGet(t, s, bobTok, "/_matrix/client/v3/rooms/"+string(imp.RoomID)+"/messages?dir=f&limit=10&filter="+urlQuery(filter)), 200, &msgs)
	if len(msgs.Chunk) != 3 || msgs.Chunk[0].EventID != imp.EventIDs[0] || msgs.Chunk[1].EventID != imp.EventIDs[3] || msgs.Chunk[2].EventID != imp.EventIDs[5] {
		t.Fatalf("top-level messages: %+v", msgs.Chunk)
	}
	if msgs.Chunk[0].TS != time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixMilli() {
		t.Fatalf("imported timestamp %d", msgs.Chunk[0].TS)
	}
	if _, ok := msgs.Chunk[0].Content["m.mentions"]; !ok {
		t.Fatalf("m.mentions lost: %v", msgs.Chunk[0].Content)
	}
	rels, _ := msgs.Chunk[0].Unsig["m.relations"].(map[string]any)
	if rels == nil || rels["m.thread"] == nil {
		t.Fatalf("root without bundled thread: %v", msgs.Chunk[0].Unsig)
	}
	// related_by_rel_types keeps only thread roots; senders narrows.
	filter = `{"related_by_rel_types":["m.thread"],"senders":["` + string(bobID) + `"]}`
	msgs.Chunk = nil
	decode(t, rawGet(t, s, bobTok, "/_matrix/client/v3/rooms/"+string(imp.RoomID)+"/messages?filter="+urlQuery(filter)), 200, &msgs)
	if len(msgs.Chunk) != 1 || msgs.Chunk[0].EventID != imp.EventIDs[3] {
		t.Fatalf("related_by_rel_types: %+v", msgs.Chunk)
	}
}

func TestMessagesPaginationStableUnderConcurrentSends(t *testing.T) {
	s := New(t)
	ctx := context.Background()
	alice := newClient(t, s, "alice")
	room := mustCreateRoom(t, alice, &mautrix.ReqCreateRoom{})
	want := sendNumbered(t, alice, room, 30)
	filter := &mautrix.FilterPart{Types: []event.Type{event.EventMessage}}
	var got []id.EventID
	from := ""
	for page := 0; ; page++ {
		resp, err := alice.Messages(ctx, room, from, "", mautrix.DirectionBackward, filter, 7)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range resp.Chunk {
			got = append(got, e.ID)
		}
		if page == 0 {
			sendText(t, alice, room, "newer, must not appear in this walk")
		}
		if resp.End == "" {
			break
		}
		from = resp.End
	}
	if len(got) != len(want) {
		t.Fatalf("walked %d events, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[len(want)-1-i] {
			t.Fatalf("event %d is %s, want %s", i, got[i], want[len(want)-1-i])
		}
	}
}

func TestBadInput(t *testing.T) {
	s := New(t)
	ctx := context.Background()
	alice := newClient(t, s, "alice")
	room := mustCreateRoom(t, alice, &mautrix.ReqCreateRoom{})
	other := mustCreateRoom(t, alice, &mautrix.ReqCreateRoom{})
	sendText(t, alice, other, "secret")
	tok := alice.AccessToken
	base := "/_matrix/client/v3/rooms/" + string(room)
	wantError(t, rawDo(t, s, "PUT", tok, base+"/send/m.room.message/x1", "{not json"), 400, "M_NOT_JSON")
	wantError(t, rawDo(t, s, "PUT", tok, base+"/send/m.room.message/x2", "[1,2]"), 400, "M_BAD_JSON")
	// Synapse refuses non-canonical JSON values in event content.
	wantError(t, rawDo(t, s, "PUT", tok, base+"/send/m.room.message/x3", `{"body":"x","n":1.5}`), 400, "M_BAD_JSON")
	wantError(t, rawDo(t, s, "PUT", tok, base+"/send/m.room.message/x4", `{"n":9007199254740992}`), 400, "M_BAD_JSON")
	wantError(t, rawDo(t, s, "POST", tok, "/_matrix/client/v3/createRoom", `{"name":5}`), 400, "M_BAD_JSON")
	wantError(t, rawGet(t, s, tok, "/_matrix/client/v3/no/such/endpoint"), 404, "M_UNRECOGNIZED")
	wantError(t, rawDo(t, s, "DELETE", tok, "/_matrix/client/v3/account/whoami", ""), 405, "M_UNRECOGNIZED")
	wantError(t, rawGet(t, s, "", "/_matrix/client/v3/account/whoami"), 401, "M_MISSING_TOKEN")
	wantError(t, rawGet(t, s, "bogus", "/_matrix/client/v3/account/whoami"), 401, "M_UNKNOWN_TOKEN")
	// Synapse answers bad pagination and sync tokens with 400 M_UNKNOWN.
	wantError(t, rawGet(t, s, tok, base+"/messages?from=r12_deadbeefdeadbeef"), 400, "M_UNKNOWN")
	wantError(t, rawGet(t, s, tok, base+"/messages?from=garbage"), 400, "M_UNKNOWN")
	wantError(t, rawGet(t, s, tok, "/_matrix/client/v3/sync?since=r1_00"), 400, "M_UNKNOWN")
	// A genuine token from another room is refused, not used to leak that room's events.
	resp, err := alice.Messages(ctx, other, "", "", mautrix.DirectionBackward, nil, 1)
	if err != nil || resp.End == "" {
		t.Fatalf("other room page: %v %q", err, resp.End)
	}
	wantError(t, rawGet(t, s, tok, base+"/messages?from="+resp.End), 400, "M_UNKNOWN")
	wantError(t, rawGet(t, s, tok, base+"/messages?filter=%7Bnope"), 400, "M_NOT_JSON")
	wantError(t, rawGet(t, s, tok, base+"/event/$nope"), 404, "M_NOT_FOUND")
	wantError(t, rawGet(t, s, tok, "/_matrix/client/v3/rooms/!nope:localhost/messages"), 403, "M_FORBIDDEN")
	// Nothing was stored by the rejected sends.
	for _, e := range s.Events(room) {
		if e.Type == event.EventMessage {
			t.Fatalf("rejected send stored %s", e.ID)
		}
	}
	decode(t, rawGet(t, s, "", "/_matrix/client/versions"), http.StatusOK, nil)
}

func TestMessagesForwardWithTo(t *testing.T) {
	s := New(t)
	ctx := context.Background()
	alice := newClient(t, s, "alice")
	room := mustCreateRoom(t, alice, &mautrix.ReqCreateRoom{})
	ids := sendNumbered(t, alice, room, 6)
	only := &mautrix.FilterPart{Types: []event.Type{event.EventMessage}}
	// A backwards page of 4 ends before ids[2]; use it as the forward stop.
	back, err := alice.Messages(ctx, room, "", "", mautrix.DirectionBackward, only, 4)
	if err != nil {
		t.Fatal(err)
	}
	var got []id.EventID
	from := ""
	for {
		resp, err := alice.Messages(ctx, room, from, back.End, mautrix.DirectionForward, only, 1)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Chunk) == 0 {
			if resp.End != "" {
				t.Fatalf("empty page with end %q", resp.End)
			}
			break
		}
		got = append(got, resp.Chunk[0].ID)
		from = resp.End
	}
	if len(got) != 2 || got[0] != ids[0] || got[1] != ids[1] {
		t.Fatalf("forward walk up to `to`: %v, want %v", got, ids[:2])
	}
}

func TestContextAroundEvent(t *testing.T) {
	s := New(t)
	ctx := context.Background()
	alice := newClient(t, s, "alice")
	room := mustCreateRoom(t, alice, &mautrix.ReqCreateRoom{})
	ids := sendNumbered(t, alice, room, 7)
	only := &mautrix.FilterPart{Types: []event.Type{event.EventMessage}}
	resp, err := alice.Context(ctx, room, ids[3], only, 4)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Event.ID != ids[3] || len(resp.EventsBefore) != 2 || resp.EventsBefore[0].ID != ids[2] ||
		len(resp.EventsAfter) != 2 || resp.EventsAfter[1].ID != ids[5] {
		t.Fatalf("context: event %s before %d after %d", resp.Event.ID, len(resp.EventsBefore), len(resp.EventsAfter))
	}
	// end continues forward right after the context window.
	more, err := alice.Messages(ctx, room, resp.End, "", mautrix.DirectionForward, only, 5)
	if err != nil || len(more.Chunk) != 1 || more.Chunk[0].ID != ids[6] {
		t.Fatalf("after context end: %+v %v", more, err)
	}
}
