package fakehs

import (
	"context"
	"testing"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

func TestDisplayNameUpdatesMemberEvents(t *testing.T) {
	s := New(t)
	ctx := context.Background()
	alice := newClient(t, s, "alice")
	room := mustCreateRoom(t, alice, &mautrix.ReqCreateRoom{})
	if err := alice.SetDisplayName(ctx, "Alice A."); err != nil {
		t.Fatal(err)
	}
	prof, err := alice.GetDisplayName(ctx, alice.UserID)
	if err != nil || prof.DisplayName != "Alice A." {
		t.Fatalf("displayname %+v %v", prof, err)
	}
	var member event.MemberEventContent
	if err := alice.StateEvent(ctx, room, event.StateMember, string(alice.UserID), &member); err != nil {
		t.Fatal(err)
	}
	if member.Displayname != "Alice A." || member.Membership != event.MembershipJoin {
		t.Fatalf("member event after rename: %+v", member)
	}
	bob := newClient(t, s, "bob")
	wantError(t, rawGet(t, s, bob.AccessToken, "/_matrix/client/v3/profile/@nobody:localhost/displayname"), 404, "M_NOT_FOUND")
	err = rawSetOtherName(t, s, bob.AccessToken, alice.UserID)
	if err != nil {
		t.Fatal(err)
	}
}

func rawSetOtherName(t *testing.T, s *Server, tok string, other id.UserID) error {
	t.Helper()
	wantError(t, rawDo(t, s, "PUT", tok, "/_matrix/client/v3/profile/"+string(other)+"/displayname", `{"displayname":"x"}`), 403, "M_FORBIDDEN")
	return nil
}

func TestStatePowerLevelsAndInviteSync(t *testing.T) {
	s := New(t)
	ctx := context.Background()
	alice, bob := newClient(t, s, "alice"), newClient(t, s, "bob")
	room := mustCreateRoom(t, alice, &mautrix.ReqCreateRoom{Name: "first"})
	since := mustSync(t, bob, "", "")
	if _, err := alice.InviteUser(ctx, room, &mautrix.ReqInviteUser{UserID: bob.UserID}); err != nil {
		t.Fatal(err)
	}
	inv := mustSync(t, bob, since.NextBatch, "")
	ir := inv.Rooms.Invite[room]
	if ir == nil || len(ir.State.Events) == 0 {
		t.Fatalf("invite missing from sync: %+v", inv.Rooms)
	}
	mustJoin(t, bob, room)
	// bob (level 0) may not rename the room (m.room.name needs 50); alice may.
	_, err := bob.SendStateEvent(ctx, room, event.StateRoomName, "", map[string]string{"name": "bob's"})
	if st, code := httpStatus(err); st != 403 || code != "M_FORBIDDEN" {
		t.Fatalf("unprivileged state: %d %s", st, code)
	}
	if _, err := alice.SendStateEvent(ctx, room, event.StateRoomName, "", map[string]string{"name": "second"}); err != nil {
		t.Fatal(err)
	}
	var name event.RoomNameEventContent
	if err := bob.StateEvent(ctx, room, event.StateRoomName, "", &name); err != nil || name.Name != "second" {
		t.Fatalf("name %+v %v", name, err)
	}
	all, err := bob.State(ctx, room)
	if err != nil || all[event.StatePowerLevels][""] == nil || len(all[event.StateMember]) != 2 {
		t.Fatalf("full state: %v %v", all, err)
	}
	rooms, err := bob.JoinedRooms(ctx)
	if err != nil || len(rooms.JoinedRooms) != 1 || rooms.JoinedRooms[0] != room {
		t.Fatalf("joined rooms %+v %v", rooms, err)
	}
	if _, err := bob.LeaveRoom(ctx, room); err != nil {
		t.Fatal(err)
	}
	left := mustSync(t, bob, inv.NextBatch, "")
	if lr := left.Rooms.Leave[room]; lr == nil || len(lr.Timeline.Events) == 0 {
		t.Fatalf("left room missing from sync: %+v", left.Rooms)
	}
	// Membership through the state endpoint: a per-room display name, then a kick.
	if _, err := bob.JoinRoom(ctx, string(room), nil); err == nil {
		t.Fatal("rejoining an invite-only room after leaving should be refused")
	}
	if _, err := alice.SendStateEvent(ctx, room, event.StateMember, string(alice.UserID),
		map[string]string{"membership": "join", "displayname": "Room Alice"}); err != nil {
		t.Fatal(err)
	}
	joined, err := alice.JoinedMembers(ctx, room)
	if err != nil || joined.Joined[alice.UserID].DisplayName != "Room Alice" {
		t.Fatalf("per-room name: %+v %v", joined, err)
	}
	_, err = alice.SendStateEvent(ctx, room, event.StateMember, string(bob.UserID), map[string]string{"membership": "join"})
	if st, _ := httpStatus(err); st != 403 {
		t.Fatalf("joining someone else: %d", st)
	}
	// Alias directory round trip.
	if _, err := alice.CreateAlias(ctx, "#extra:localhost", room); err != nil {
		t.Fatal(err)
	}
	res, err := bob.ResolveAlias(ctx, "#extra:localhost")
	if err != nil || res.RoomID != room {
		t.Fatalf("resolve alias %+v %v", res, err)
	}
}

func TestCreateRoomInitialStateReplacesPresetDefaults(t *testing.T) {
	s := New(t)
	ctx := context.Background()
	alice, bob := newClient(t, s, "alice"), newClient(t, s, "bob")
	room, err := alice.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", InitialState: []*event.Event{{
		Type: event.StateJoinRules, StateKey: new(string),
		Content: event.Content{Parsed: &event.JoinRulesEventContent{JoinRule: event.JoinRulePublic}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	joinRules := 0
	for _, e := range s.Events(room.RoomID) {
		if e.Type == event.StateJoinRules {
			joinRules++
		}
	}
	if joinRules != 1 {
		t.Fatalf("%d join_rules events, want the initial_state one only", joinRules)
	}
	if _, err := bob.JoinRoom(ctx, string(room.RoomID), nil); err != nil {
		t.Fatalf("join a room made public by initial_state: %v", err)
	}
	wantError(t, rawDo(t, s, "POST", alice.AccessToken, "/_matrix/client/v3/createRoom",
		`{"initial_state":[{"type":"m.room.topic","state_key":"","content":"not an object"}]}`), 400, "M_BAD_JSON")
}
