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

// degradedRoom is a room on a Degraded server (no visibility delay unless
// asked) with a thread root, a reply, an edit of the root and a reaction.
func degradedRoom(t *testing.T, p Profile) (s *Server, ali *mautrix.Client, room id.RoomID, root, reply id.EventID) {
	t.Helper()
	s = New(t, WithProfile(p))
	ali = newClient(t, s, "ali")
	room = mustCreateRoom(t, ali, &mautrix.ReqCreateRoom{Preset: "public_chat"})
	root = sendText(t, ali, room, "root")
	ctx := context.Background()
	resp, err := ali.SendMessageEvent(ctx, room, event.EventMessage, &event.MessageEventContent{
		MsgType: event.MsgText, Body: "reply", RelatesTo: (&event.RelatesTo{}).SetThread(root, root)})
	if err != nil {
		t.Fatal(err)
	}
	reply = resp.EventID
	if _, err := ali.SendMessageEvent(ctx, room, event.EventMessage, &event.MessageEventContent{
		MsgType: event.MsgText, Body: "* root2", NewContent: &event.MessageEventContent{MsgType: event.MsgText, Body: "root2"},
		RelatesTo: (&event.RelatesTo{}).SetReplace(root)}); err != nil {
		t.Fatal(err)
	}
	if _, err := ali.SendReaction(ctx, room, root, "👍"); err != nil {
		t.Fatal(err)
	}
	return s, ali, room, root, reply
}

func noDelay() Profile { p := Degraded; p.VisibilityDelay = 0; return p }

func TestDegradedHasNoThreadsEndpointNorBundles(t *testing.T) {
	s, ali, room, root, _ := degradedRoom(t, noDelay())
	wantError(t, rawGet(t, s, ali.AccessToken, v1+"/rooms/"+string(room)+"/threads"), http.StatusNotFound, "M_UNRECOGNIZED")
	evt, err := ali.GetEvent(context.Background(), room, root)
	if err != nil {
		t.Fatal(err)
	}
	if evt.Unsigned.Relations != nil {
		t.Fatalf("bundled aggregations on a degraded server: %+v", evt.Unsigned.Relations)
	}
}

func TestDegradedIgnoresRelationFilters(t *testing.T) {
	_, ali, room, root, reply := degradedRoom(t, noDelay())
	resp, err := ali.GetRelations(context.Background(), room, root, &mautrix.ReqGetRelations{RelationType: event.RelThread, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	// The reply, the edit and the reaction: the m.thread path filter is ignored.
	if len(resp.Chunk) != 3 || resp.Chunk[2].ID != reply {
		t.Fatalf("relations of the root: %d events, want 3 with the reply oldest", len(resp.Chunk))
	}
}

func TestDegradedFiltersAfterTheLimit(t *testing.T) {
	_, ali, room, _, _ := degradedRoom(t, noDelay())
	msgs := &mautrix.FilterPart{Types: []event.Type{event.EventMessage}}
	// The newest event is the reaction: a page of one holds no message.
	resp, err := ali.Messages(context.Background(), room, "", "", mautrix.DirectionBackward, msgs, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Chunk) != 0 || resp.End != "" {
		t.Fatalf("page of 1 filtered after the limit: %d events, end %q; want none and no end", len(resp.Chunk), resp.End)
	}
	resp, err = ali.Messages(context.Background(), room, "", "", mautrix.DirectionBackward, msgs, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Chunk) != 1 || resp.End == "" {
		t.Fatalf("page of 2: %d events, end %q; want the edit and an end", len(resp.Chunk), resp.End)
	}
}

func TestDegradedServesHistoryToNonMembers(t *testing.T) {
	s, _, room, root, _ := degradedRoom(t, noDelay())
	bob := newClient(t, s, "bob")
	if _, err := bob.Messages(context.Background(), room, "", "", mautrix.DirectionBackward, nil, 10); err != nil {
		t.Fatalf("non-member /messages: %v", err)
	}
	if _, err := bob.GetRelations(context.Background(), room, root, &mautrix.ReqGetRelations{}); err != nil {
		t.Fatalf("non-member /relations: %v", err)
	}
	// Other reads still need membership.
	if _, err := bob.JoinedMembers(context.Background(), room); err == nil {
		t.Fatal("non-member read joined_members")
	}
}

func TestDegradedShowsNewEventsAfterTheDelay(t *testing.T) {
	p := Degraded
	p.VisibilityDelay = 300 * time.Millisecond
	s := New(t, WithProfile(p))
	ali := newClient(t, s, "ali")
	room := mustCreateRoom(t, ali, &mautrix.ReqCreateRoom{Preset: "public_chat"})
	time.Sleep(p.VisibilityDelay) // let the room's own events show
	sent := time.Now()
	eid := sendText(t, ali, room, "late")
	ctx := context.Background()
	for {
		resp, err := ali.Messages(ctx, room, "", "", mautrix.DirectionBackward, nil, 1)
		if err != nil {
			t.Fatal(err)
		}
		_, evErr := ali.GetEvent(ctx, room, eid)
		seen := len(resp.Chunk) == 1 && resp.Chunk[0].ID == eid
		if seen != (evErr == nil) && time.Since(sent) < p.VisibilityDelay-50*time.Millisecond {
			t.Fatalf("/messages and /event disagree %v after the send", time.Since(sent))
		}
		if seen {
			if d := time.Since(sent); d < p.VisibilityDelay {
				t.Fatalf("visible %v after the send, before the %v delay", d, p.VisibilityDelay)
			}
			return
		}
		if time.Since(sent) > 5*time.Second {
			t.Fatal("never visible")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestRequestsAreCounted(t *testing.T) {
	s, ali, room, _, _ := degradedRoom(t, noDelay())
	before := s.Requests("GET", "/_matrix/client/v3/rooms/*/messages")
	for range 3 {
		if _, err := ali.Messages(context.Background(), room, "", "", mautrix.DirectionBackward, nil, 1); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Requests("GET", "/_matrix/client/v3/rooms/*/messages") - before; got != 3 {
		t.Fatalf("counted %d /messages requests, want 3", got)
	}
	if got := s.Requests("PUT", "/_matrix/client/v3/rooms/*/send/*/*"); got != 4 {
		t.Fatalf("counted %d sends, want 4 (root, reply, edit, reaction)", got)
	}
}

// RequestsAs tells an appservice's requests as each of its users apart from
// the people's, whatever the path.
func TestRequestsAsAnAppserviceUser(t *testing.T) {
	s := New(t, WithAppservice(testRegistration("")))
	ctx := context.Background()
	ali := newClient(t, s, "ali")
	room := mustCreateRoom(t, ali, &mautrix.ReqCreateRoom{Preset: "public_chat"})
	bots := map[id.UserID]*mautrix.Client{}
	for _, uid := range []id.UserID{"@agent-a:localhost", "@agent-b:localhost"} {
		bots[uid] = asClient(t, s, uid)
		if _, _, err := bots[uid].Register(ctx, &mautrix.ReqRegister[any]{Username: uid.Localpart(), Type: mautrix.AuthTypeAppservice, InhibitLogin: true}); err != nil {
			t.Fatal(err)
		}
		if _, err := bots[uid].JoinRoomByID(ctx, room); err != nil {
			t.Fatal(err)
		}
	}
	read := func(cli *mautrix.Client, n int) {
		for range n {
			if _, err := cli.Messages(ctx, room, "", "", mautrix.DirectionBackward, nil, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	read(ali, 1)
	read(bots["@agent-a:localhost"], 2)
	read(bots["@agent-b:localhost"], 3)
	const messages = "/_matrix/client/v3/rooms/*/messages"
	for _, c := range []struct {
		as   []id.UserID
		want int
	}{
		{[]id.UserID{"@agent-a:localhost"}, 2},
		{[]id.UserID{"@agent-b:localhost"}, 3},
		{[]id.UserID{"@agent-a:localhost", "@agent-b:localhost"}, 5},
		{[]id.UserID{"@ali:localhost"}, 0}, // ali asks with her own token, not as an appservice
	} {
		if got := s.RequestsAs("GET", messages, c.as...); got != c.want {
			t.Errorf("RequestsAs(GET, messages, %v) = %d, want %d", c.as, got, c.want)
		}
	}
	if got := s.Requests("GET", messages); got != 6 {
		t.Errorf("Requests(GET, messages) = %d, want 6", got)
	}
}
