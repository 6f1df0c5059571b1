package fakehs

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

func threadReply(parent id.EventID) string {
	return `{"msgtype":"m.text","body":"r","m.relates_to":{"rel_type":"m.thread","event_id":"` + string(parent) + `"}}`
}

// TestRelationsAreValidatedOnSend pins Synapse's _validate_event_relation.
func TestRelationsAreValidatedOnSend(t *testing.T) {
	s := New(t)
	alice := newClient(t, s, "alice")
	room := mustCreateRoom(t, alice, &mautrix.ReqCreateRoom{})
	other := mustCreateRoom(t, alice, &mautrix.ReqCreateRoom{})
	root := sendText(t, alice, room, "root")
	foreign := sendText(t, alice, other, "elsewhere")
	base := "/_matrix/client/v3/rooms/" + string(room) + "/send/m.room.message/"
	var reply struct {
		EventID id.EventID `json:"event_id"`
	}
	decode(t, rawDo(t, s, "PUT", alice.AccessToken, base+"t1", threadReply(root)), http.StatusOK, &reply)
	wantError(t, rawDo(t, s, "PUT", alice.AccessToken, base+"t2", threadReply(reply.EventID)), 400, "M_UNKNOWN")
	wantError(t, rawDo(t, s, "PUT", alice.AccessToken, base+"t3", threadReply("$unknown")), 400, "M_UNKNOWN")
	wantError(t, rawDo(t, s, "PUT", alice.AccessToken, base+"t4", threadReply(foreign)), 400, "M_UNKNOWN")
	wantError(t, rawDo(t, s, "PUT", alice.AccessToken, base+"t5",
		`{"body":"* e","m.relates_to":{"rel_type":"m.replace","event_id":"$unknown"}}`), 400, "M_UNKNOWN")
	// State events go through the same check.
	wantError(t, rawDo(t, s, "PUT", alice.AccessToken, "/_matrix/client/v3/rooms/"+string(room)+"/state/dev.zooid.x/k",
		`{"m.relates_to":{"rel_type":"m.reference","event_id":"$unknown"}}`), 400, "M_UNKNOWN")
	// A bare reply is no relation and is not checked.
	decode(t, rawDo(t, s, "PUT", alice.AccessToken, base+"t6",
		`{"body":"b","m.relates_to":{"m.in_reply_to":{"event_id":"$unknown"}}}`), http.StatusOK, nil)
	var threads struct {
		Chunk []*event.Event `json:"chunk"`
	}
	decode(t, rawGet(t, s, alice.AccessToken, "/_matrix/client/v1/rooms/"+string(room)+"/threads"), http.StatusOK, &threads)
	if len(threads.Chunk) != 1 || threads.Chunk[0].ID != root {
		t.Fatalf("threads after refused nested reply: %+v", threads.Chunk)
	}
	if th := threads.Chunk[0].Unsigned.Relations.GetThread(); th == nil || th.Count != 1 {
		t.Fatalf("thread summary %+v, want one reply", th)
	}
}

// TestSeedRefusesNestedThreads keeps imports to what a send could make.
func TestSeedRefusesNestedThreads(t *testing.T) {
	s := New(t)
	alice := id.UserID("@alice:localhost")
	_, err := s.ImportRoom(RoomSeed{Creator: alice, Events: []SeedEvent{
		{Sender: alice, Content: map[string]any{"body": "root"}, ThreadRoot: -1},
		{Sender: alice, Content: map[string]any{"body": "reply"}, ThreadRoot: 0},
		{Sender: alice, Content: map[string]any{"body": "nested"}, ThreadRoot: 1},
	}})
	if err == nil {
		t.Fatal("a seeded thread rooted at a thread reply was accepted")
	}
}

// TestLeaveTypingAndErrorCodes pins the smaller Synapse answers.
func TestLeaveTypingAndErrorCodes(t *testing.T) {
	s := New(t)
	alice, bob, carol := newClient(t, s, "alice"), newClient(t, s, "bob"), newClient(t, s, "carol")
	room := mustCreateRoom(t, alice, &mautrix.ReqCreateRoom{Preset: "public_chat"})
	mustJoin(t, bob, room)
	rpath := "/_matrix/client/v3/rooms/" + string(room)
	decode(t, rawDo(t, s, "POST", bob.AccessToken, rpath+"/leave", "{}"), http.StatusOK, nil)
	n := len(s.Events(room))
	decode(t, rawDo(t, s, "POST", bob.AccessToken, rpath+"/leave", "{}"), http.StatusOK, nil)
	if got := len(s.Events(room)); got != n {
		t.Fatalf("a second leave added %d events", got-n)
	}
	wantError(t, rawDo(t, s, "POST", carol.AccessToken, rpath+"/leave", "{}"), 403, "M_FORBIDDEN")
	wantError(t, rawDo(t, s, "POST", carol.AccessToken, "/_matrix/client/v3/rooms/!nope:localhost/leave", "{}"), 404, "M_UNKNOWN")

	typing := `{"typing":true,"timeout":1000}`
	decode(t, rawDo(t, s, "PUT", alice.AccessToken, rpath+"/typing/"+urlQuery(string(alice.UserID)), typing), http.StatusOK, nil)
	wantError(t, rawDo(t, s, "PUT", alice.AccessToken, rpath+"/typing/"+urlQuery(string(bob.UserID)), typing), 400, "M_FORBIDDEN")
	wantError(t, rawDo(t, s, "PUT", carol.AccessToken, rpath+"/typing/"+urlQuery(string(carol.UserID)), typing), 403, "M_FORBIDDEN")

	tok := alice.AccessToken
	wantError(t, rawGet(t, s, tok, "/_matrix/client/v3/profile/@nobody:localhost"), 404, "M_UNKNOWN")
	wantError(t, rawDo(t, s, "POST", tok, "/_matrix/client/v3/join/!nope:localhost", "{}"), 404, "M_UNKNOWN")
	wantError(t, rawDo(t, s, "POST", tok, "/_matrix/client/v3/rooms/!nope:localhost/join", "{}"), 404, "M_UNKNOWN")
	wantError(t, rawDo(t, s, "POST", tok, "/_matrix/client/v3/createRoom", `{"preset":"bogus"}`), 400, "M_BAD_JSON")
	wantError(t, rawGet(t, s, tok, "/_matrix/client/v3/sync?since=garbage"), 400, "M_UNKNOWN")
	wantError(t, rawGet(t, s, tok, "/_matrix/client/v3/sync?filter=42"), 400, "M_INVALID_PARAM")
	wantError(t, rawGet(t, s, tok, "/_matrix/client/v3/sync?filter=abc"), 400, "M_INVALID_PARAM")
	wantError(t, rawGet(t, s, tok, "/_matrix/client/v1/rooms/"+string(room)+"/relations/$nope"), 404, "M_UNKNOWN")
}

// TestTransactionsHaveNoEphemeral: Synapse sends "ephemeral" only to
// appservices that opted in, which fakehs does not support.
func TestTransactionsHaveNoEphemeral(t *testing.T) {
	var mu sync.Mutex
	var bodies []map[string]json.RawMessage
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, _ := io.ReadAll(r.Body)
		var body map[string]json.RawMessage
		if err := json.Unmarshal(data, &body); err != nil {
			t.Errorf("transaction body %s: %v", data, err)
		}
		mu.Lock()
		bodies = append(bodies, body)
		mu.Unlock()
		_, _ = w.Write([]byte("{}"))
	}))
	t.Cleanup(hs.Close)
	s := New(t, WithAppservice(testRegistration(hs.URL)))
	cli := asClient(t, s, "@zooid:localhost")
	if _, err := cli.CreateRoom(context.Background(), &mautrix.ReqCreateRoom{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for s.Pending("zooid") > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) == 0 {
		t.Fatal("no transaction pushed")
	}
	for _, b := range bodies {
		if _, ok := b["ephemeral"]; ok {
			t.Fatalf("transaction carries ephemeral: %v", b)
		}
		if _, ok := b["events"]; !ok {
			t.Fatalf("transaction without events: %v", b)
		}
	}
}

// TestDefaultRoomVersion11: Synapse creates version 11 rooms, whose create
// event has no `creator`.
func TestDefaultRoomVersion11(t *testing.T) {
	s := New(t)
	ctx := context.Background()
	alice := newClient(t, s, "alice")
	room := mustCreateRoom(t, alice, &mautrix.ReqCreateRoom{})
	var create map[string]any
	if err := alice.StateEvent(ctx, room, event.StateCreate, "", &create); err != nil {
		t.Fatal(err)
	}
	if create["room_version"] != "11" || create["creator"] != nil {
		t.Fatalf("create content %v, want room_version 11 without creator", create)
	}
	old := mustCreateRoom(t, alice, &mautrix.ReqCreateRoom{RoomVersion: "10"})
	if err := alice.StateEvent(ctx, old, event.StateCreate, "", &create); err != nil {
		t.Fatal(err)
	}
	if create["creator"] != string(alice.UserID) {
		t.Fatalf("a version 10 room's create content %v lacks the creator", create)
	}
}

// TestEditAndRedactionBundles: the latest edit by the original sender is
// bundled as m.replace, a redacted edit stops counting, and a redacted
// event carries unsigned.redacted_because.
func TestEditAndRedactionBundles(t *testing.T) {
	s := New(t)
	ctx := context.Background()
	alice, bob := newClient(t, s, "alice"), newClient(t, s, "bob")
	room := mustCreateRoom(t, alice, &mautrix.ReqCreateRoom{Preset: "public_chat"})
	mustJoin(t, bob, room)
	orig := sendText(t, alice, room, "orig")
	edit := func(c *mautrix.Client, body string) id.EventID {
		resp, err := c.SendMessageEvent(ctx, room, event.EventMessage, map[string]any{
			"msgtype": "m.text", "body": "* " + body, "m.new_content": map[string]any{"msgtype": "m.text", "body": body},
			"m.relates_to": map[string]any{"rel_type": "m.replace", "event_id": orig},
		})
		if err != nil {
			t.Fatal(err)
		}
		return resp.EventID
	}
	first := edit(alice, "one")
	second := edit(alice, "two")
	edit(bob, "bob's")
	latest := func() id.EventID {
		ev, err := bob.GetEvent(ctx, room, orig)
		if err != nil {
			t.Fatal(err)
		}
		if e := ev.Unsigned.Relations.GetLatestEdit(); e != nil {
			return e.ID
		}
		return ""
	}
	if got := latest(); got != second {
		t.Fatalf("bundled edit %s, want %s", got, second)
	}
	red, err := alice.RedactEvent(ctx, room, second, mautrix.ReqRedact{Reason: "oops"})
	if err != nil {
		t.Fatal(err)
	}
	if got := latest(); got != first {
		t.Fatalf("after redacting the latest edit the bundle is %s, want %s", got, first)
	}
	ev, err := bob.GetEvent(ctx, room, second)
	if err != nil {
		t.Fatal(err)
	}
	if rb := ev.Unsigned.RedactedBecause; rb == nil || rb.ID != red.EventID || rb.Content.Raw["reason"] != "oops" {
		t.Fatalf("redacted_because = %+v, want %s", rb, red.EventID)
	}
}
