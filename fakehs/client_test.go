package fakehs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// newClient registers a user over HTTP with the UIA dummy flow and returns its client.
func newClient(t *testing.T, s *Server, localpart string) *mautrix.Client {
	t.Helper()
	anon, err := mautrix.NewClient(s.URL(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := anon.RegisterDummy(context.Background(), &mautrix.ReqRegister[any]{Username: localpart, Password: "pw-" + localpart})
	if err != nil {
		t.Fatalf("register %s: %v", localpart, err)
	}
	cli, err := mautrix.NewClient(s.URL(), resp.UserID, resp.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	cli.DeviceID = resp.DeviceID
	return cli
}

func sendText(t *testing.T, cli *mautrix.Client, rid id.RoomID, body string) id.EventID {
	t.Helper()
	resp, err := cli.SendText(context.Background(), rid, body)
	if err != nil {
		t.Fatalf("send %q: %v", body, err)
	}
	return resp.EventID
}

// sendNumbered sends the texts "0" to "n-1" as c into room and returns their ids in order.
func sendNumbered(t *testing.T, c *mautrix.Client, room id.RoomID, n int) []id.EventID {
	t.Helper()
	ids := make([]id.EventID, 0, n)
	for i := range n {
		ids = append(ids, sendText(t, c, room, fmt.Sprint(i)))
	}
	return ids
}

func httpStatus(err error) (int, string) {
	var he mautrix.HTTPError
	if errors.As(err, &he) {
		code := ""
		if he.RespError != nil {
			code = he.RespError.ErrCode
		}
		return he.Response.StatusCode, code
	}
	return 0, ""
}

func TestRegisterLoginWhoami(t *testing.T) {
	s := New(t)
	ctx := context.Background()
	alice := newClient(t, s, "alice")
	who, err := alice.Whoami(ctx)
	if err != nil || who.UserID != "@alice:localhost" || who.DeviceID == "" {
		t.Fatalf("whoami = %+v, %v", who, err)
	}
	anon, _ := mautrix.NewClient(s.URL(), "", "")
	login, err := anon.Login(ctx, &mautrix.ReqLogin{Type: mautrix.AuthTypePassword,
		Identifier: mautrix.UserIdentifier{Type: mautrix.IdentifierTypeUser, User: "alice"}, Password: "pw-alice"})
	if err != nil || login.UserID != "@alice:localhost" || login.AccessToken == "" {
		t.Fatalf("login = %+v, %v", login, err)
	}
	_, err = anon.Login(ctx, &mautrix.ReqLogin{Type: mautrix.AuthTypePassword,
		Identifier: mautrix.UserIdentifier{Type: mautrix.IdentifierTypeUser, User: "alice"}, Password: "wrong"})
	if st, code := httpStatus(err); st != 403 || code != "M_FORBIDDEN" {
		t.Fatalf("bad password: %d %s", st, code)
	}
	_, err = anon.RegisterDummy(ctx, &mautrix.ReqRegister[any]{Username: "alice", Password: "x"})
	if st, code := httpStatus(err); st != 400 || code != "M_USER_IN_USE" {
		t.Fatalf("re-register: %d %s (%v)", st, code, err)
	}
	if _, err := alice.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = alice.Whoami(ctx)
	if st, code := httpStatus(err); st != 401 || code != "M_UNKNOWN_TOKEN" {
		t.Fatalf("after logout: %d %s", st, code)
	}
}

func TestRoomLifecycleAndMessages(t *testing.T) {
	s := New(t)
	ctx := context.Background()
	alice, bob, eve := newClient(t, s, "alice"), newClient(t, s, "bob"), newClient(t, s, "eve")
	created, err := alice.CreateRoom(ctx, &mautrix.ReqCreateRoom{Name: "Ops", RoomAliasName: "ops",
		Preset: "private_chat", Invite: []id.UserID{bob.UserID}})
	if err != nil {
		t.Fatal(err)
	}
	rid := created.RoomID
	if got, ok := s.RoomIDForAlias("#ops:localhost"); !ok || got != rid {
		t.Fatalf("alias -> %s %v", got, ok)
	}
	types := []string{}
	for _, e := range s.Events(rid) {
		types = append(types, e.Type.Type)
	}
	want := []string{"m.room.create", "m.room.member", "m.room.power_levels", "m.room.canonical_alias",
		"m.room.join_rules", "m.room.history_visibility", "m.room.guest_access", "m.room.name", "m.room.member"}
	if len(types) != len(want) {
		t.Fatalf("initial state %v", types)
	}
	for i := range want {
		if types[i] != want[i] {
			t.Fatalf("initial state %v, want %v", types, want)
		}
	}
	// eve is not invited to a private room.
	_, err = eve.JoinRoom(ctx, "#ops:localhost", nil)
	if st, code := httpStatus(err); st != 403 || code != "M_FORBIDDEN" {
		t.Fatalf("uninvited join: %d %s", st, code)
	}
	if _, err := bob.JoinRoom(ctx, "#ops:localhost", nil); err != nil {
		t.Fatal(err)
	}
	var ids []id.EventID
	for _, body := range []string{"one", "two", "three"} {
		ids = append(ids, sendText(t, bob, rid, body))
	}
	// Non-members can neither read nor post.
	_, err = eve.Messages(ctx, rid, "", "", mautrix.DirectionBackward, nil, 10)
	if st, code := httpStatus(err); st != 403 || code != "M_FORBIDDEN" {
		t.Fatalf("non-member read: %d %s", st, code)
	}
	_, err = eve.SendText(ctx, rid, "hi")
	if st, code := httpStatus(err); st != 403 || code != "M_FORBIDDEN" {
		t.Fatalf("non-member send: %d %s", st, code)
	}
	msgs, err := alice.Messages(ctx, rid, "", "", mautrix.DirectionBackward,
		&mautrix.FilterPart{Types: []event.Type{event.EventMessage}}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs.Chunk) != 2 || msgs.Chunk[0].ID != ids[2] || msgs.Chunk[1].ID != ids[1] || msgs.End == "" {
		t.Fatalf("page 1: %d events end=%q", len(msgs.Chunk), msgs.End)
	}
	msgs2, err := alice.Messages(ctx, rid, msgs.End, "", mautrix.DirectionBackward,
		&mautrix.FilterPart{Types: []event.Type{event.EventMessage}}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs2.Chunk) != 1 || msgs2.Chunk[0].ID != ids[0] || msgs2.End == "" {
		t.Fatalf("page 2: %d events end=%q", len(msgs2.Chunk), msgs2.End)
	}
	// As Synapse: the page after the last one is empty and has no end.
	msgs3, err := alice.Messages(ctx, rid, msgs2.End, "", mautrix.DirectionBackward,
		&mautrix.FilterPart{Types: []event.Type{event.EventMessage}}, 2)
	if err != nil || len(msgs3.Chunk) != 0 || msgs3.End != "" {
		t.Fatalf("page 3: %+v %v", msgs3, err)
	}
	ev, err := alice.GetEvent(ctx, rid, ids[1])
	if err != nil || ev.Sender != bob.UserID {
		t.Fatalf("get event: %+v %v", ev, err)
	}
	if err := ev.Content.ParseRaw(ev.Type); err != nil || ev.Content.AsMessage().Body != "two" {
		t.Fatalf("content: %v %s", err, ev.Content.VeryRaw)
	}
	joined, err := alice.JoinedMembers(ctx, rid)
	if err != nil || len(joined.Joined) != 2 {
		t.Fatalf("joined members %+v %v", joined, err)
	}
	if _, err := bob.LeaveRoom(ctx, rid); err != nil {
		t.Fatal(err)
	}
	_, err = bob.SendText(ctx, rid, "after leave")
	if st, _ := httpStatus(err); st != 403 {
		t.Fatalf("send after leave: %d", st)
	}
}

func TestSendTransactionIDIsIdempotent(t *testing.T) {
	s := New(t)
	ctx := context.Background()
	alice := newClient(t, s, "alice")
	room := mustCreateRoom(t, alice, &mautrix.ReqCreateRoom{})
	before := len(s.Events(room))
	content := map[string]any{"msgtype": "m.text", "body": "once"}
	r1, err := alice.SendMessageEvent(ctx, room, event.EventMessage, content, mautrix.ReqSendEvent{TransactionID: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := alice.SendMessageEvent(ctx, room, event.EventMessage, content, mautrix.ReqSendEvent{TransactionID: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	if r1.EventID != r2.EventID || len(s.Events(room)) != before+1 {
		t.Fatalf("txn retry made %s and %s, %d new events", r1.EventID, r2.EventID, len(s.Events(room))-before)
	}
	ev, err := alice.GetEvent(ctx, room, r1.EventID)
	if err != nil || ev.Unsigned.TransactionID != "t1" {
		t.Fatalf("own event transaction_id = %q, %v", ev.Unsigned.TransactionID, err)
	}
}

func TestSyncLongPollWakesOnSend(t *testing.T) {
	s := New(t)
	ctx := context.Background()
	alice, bob := newClient(t, s, "alice"), newClient(t, s, "bob")
	room := mustCreateRoom(t, alice, &mautrix.ReqCreateRoom{Preset: "public_chat"})
	initial := mustSync(t, bob, "", "")
	mustJoin(t, bob, room)
	joinSync := mustSync(t, bob, initial.NextBatch, "")
	jr := joinSync.Rooms.Join[room]
	if jr == nil || len(jr.State.Events)+len(jr.Timeline.Events) == 0 {
		t.Fatalf("joined room missing from sync: %+v", joinSync.Rooms)
	}
	done := make(chan *mautrix.RespSync, 1)
	errc := make(chan error, 1)
	go func() {
		resp, err := bob.SyncRequest(ctx, 10000, joinSync.NextBatch, "", false, "")
		if err != nil {
			errc <- err
			return
		}
		done <- resp
	}()
	time.Sleep(50 * time.Millisecond)
	eid := sendText(t, alice, room, "wake up")
	select {
	case resp := <-done:
		tl := resp.Rooms.Join[room].Timeline
		if len(tl.Events) != 1 || tl.Events[0].ID != eid || tl.Limited {
			t.Fatalf("woken sync timeline %+v", tl)
		}
	case err := <-errc:
		t.Fatal(err)
	case <-time.After(5 * time.Second):
		t.Fatal("long-poll did not wake")
	}
}

func TestSyncLimitedGap(t *testing.T) {
	s := New(t)
	ctx := context.Background()
	alice := newClient(t, s, "alice")
	room := mustCreateRoom(t, alice, &mautrix.ReqCreateRoom{})
	first := mustSync(t, alice, "", "")
	var ids []id.EventID
	for i := 0; i < 15; i++ {
		ids = append(ids, sendText(t, alice, room, "m"))
	}
	filter := `{"room":{"timeline":{"limit":5}}}`
	resp := rawGet(t, s, alice.AccessToken, "/_matrix/client/v3/sync?since="+first.NextBatch+"&filter="+urlQuery(filter))
	var body struct {
		Rooms struct {
			Join map[id.RoomID]struct {
				Timeline struct {
					Events []struct {
						EventID id.EventID `json:"event_id"`
					} `json:"events"`
					Limited   bool   `json:"limited"`
					PrevBatch string `json:"prev_batch"`
				} `json:"timeline"`
			} `json:"join"`
		} `json:"rooms"`
	}
	decode(t, resp, http.StatusOK, &body)
	tl := body.Rooms.Join[room].Timeline
	if !tl.Limited || len(tl.Events) != 5 || tl.Events[4].EventID != ids[14] || tl.PrevBatch == "" {
		t.Fatalf("limited timeline: %+v", tl)
	}
	// prev_batch continues exactly where the timeline starts.
	msgs, err := alice.Messages(ctx, room, tl.PrevBatch, "", mautrix.DirectionBackward, nil, 3)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs.Chunk) != 3 || msgs.Chunk[0].ID != ids[9] {
		t.Fatalf("messages from prev_batch start at %v, want %s", msgs.Chunk[0].ID, ids[9])
	}
}

// The mautrix sync loop (filter upload, long-poll, dispatch) runs against the server.
func TestMautrixSyncLoop(t *testing.T) {
	s := New(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	alice, bob := newClient(t, s, "alice"), newClient(t, s, "bob")
	room := mustCreateRoom(t, alice, &mautrix.ReqCreateRoom{Invite: []id.UserID{bob.UserID}})
	mustJoin(t, bob, room)
	got := make(chan *event.Event, 16)
	syncer := bob.Syncer.(*mautrix.DefaultSyncer)
	syncer.OnEventType(event.EventMessage, func(_ context.Context, ev *event.Event) { got <- ev })
	done := make(chan error, 1)
	go func() { done <- bob.SyncWithContext(ctx) }()
	want := sendText(t, alice, room, "hello over sync")
	deadline := time.After(5 * time.Second)
	for {
		select {
		case ev := <-got:
			if ev.ID != want {
				continue
			}
			if ev.Content.AsMessage().Body != "hello over sync" {
				t.Fatalf("body %q", ev.Content.AsMessage().Body)
			}
			cancel()
			if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
				t.Fatalf("sync loop: %v", err)
			}
			return
		case err := <-done:
			t.Fatalf("sync loop ended: %v", err)
		case <-deadline:
			t.Fatal("message never arrived through the sync loop")
		}
	}
}
