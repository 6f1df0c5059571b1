package conformance

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"maunium.net/go/mautrix/id"
)

func (s *suite) testRooms(t *testing.T) {
	t.Parallel()

	t.Run("UnknownRoomVersionRefused", func(t *testing.T) {
		t.Parallel()
		alice := s.registerUser(t, "roomver")
		// Synapse: 400 M_UNSUPPORTED_ROOM_VERSION "Your homeserver does not support this room
		// version", and no room is made.
		res := alice.Do(t, "POST", CS("v3", "createRoom"), map[string]any{"room_version": "zooid-no-such-version"})
		ExpectStatus(t, res, http.StatusBadRequest, "M_UNSUPPORTED_ROOM_VERSION")
		joined := alice.MustDo(t, "GET", CS("v3", "joined_rooms"), nil)
		MatchJSON(t, "joined rooms after a refused createRoom", joined, KeyEqual("joined_rooms.#", 0))
		room := s.createRoom(t, alice, map[string]any{"room_version": "10"})
		create := alice.MustDo(t, "GET", CS("v3", "rooms", string(room), "state", "m.room.create", ""), nil)
		MatchJSON(t, "create event of a version 10 room", create, KeyEqual("room_version", "10"))
	})

	t.Run("CreateWithAliasResolveAndJoinByAlias", func(t *testing.T) {
		t.Parallel()
		alice := s.registerUser(t, "alias")
		bob := s.registerUser(t, "aliasjoin")
		aliasName := "conf-" + s.localpart("room")
		alias := id.NewRoomAlias(aliasName, s.target.ServerName)
		room := s.createRoom(t, alice, map[string]any{"preset": "public_chat", "room_alias_name": aliasName, "name": "Conformance " + s.runID})

		dir := bob.MustDo(t, "GET", CS("v3", "directory", "room", string(alias)), nil)
		MatchJSON(t, "alias resolution", dir, KeyEqual("room_id", string(room)))
		if _, err := bob.Mautrix(t).ResolveAlias(context.Background(), alias); err != nil {
			t.Fatalf("mautrix ResolveAlias(%s): %v", alias, err)
		}

		joined := bob.MustDo(t, "POST", CS("v3", "join", string(alias)), map[string]any{})
		MatchJSON(t, "join by alias", joined, KeyEqual("room_id", string(room)))

		name := bob.MustDo(t, "GET", CS("v3", "rooms", string(room), "state", "m.room.name", ""), nil)
		MatchJSON(t, "room name state", name, KeyEqual("name", "Conformance "+s.runID))
	})

	t.Run("DuplicateAliasIsRoomInUse", func(t *testing.T) {
		t.Parallel()
		alice := s.registerUser(t, "dupalias")
		aliasName := "conf-" + s.localpart("dup")
		s.createRoom(t, alice, map[string]any{"room_alias_name": aliasName})
		res := alice.Do(t, "POST", CS("v3", "createRoom"), map[string]any{"room_alias_name": aliasName})
		MustStatus(t, res, http.StatusBadRequest, "M_ROOM_IN_USE")
	})

	t.Run("JoinUnknownAliasIsNotFound", func(t *testing.T) {
		t.Parallel()
		alice := s.registerUser(t, "noalias")
		alias := id.NewRoomAlias("conf-missing-"+s.localpart("x"), s.target.ServerName)
		MustStatus(t, alice.Do(t, "GET", CS("v3", "directory", "room", string(alias)), nil), http.StatusNotFound, "M_NOT_FOUND")
		MustStatus(t, alice.Do(t, "POST", CS("v3", "join", string(alias)), map[string]any{}), http.StatusNotFound, "M_NOT_FOUND")
	})

	t.Run("InviteJoinStateMembersLeave", func(t *testing.T) {
		t.Parallel()
		alice := s.registerUser(t, "inviter")
		bob := s.registerUser(t, "invitee")
		carol := s.registerUser(t, "uninvited")
		room := s.createRoom(t, alice, map[string]any{"preset": "private_chat"})

		// A private room refuses a join without an invite.
		MustStatus(t, carol.Do(t, "POST", CS("v3", "join", string(room)), map[string]any{}), http.StatusForbidden, "M_FORBIDDEN")

		alice.MustDo(t, "POST", CS("v3", "rooms", string(room), "invite"), map[string]any{"user_id": bob.UserID})
		member := alice.MustDo(t, "GET", CS("v3", "rooms", string(room), "state", "m.room.member", string(bob.UserID)), nil)
		MatchJSON(t, "invitee membership", member, KeyEqual("membership", "invite"))

		if _, err := bob.Mautrix(t).JoinRoomByID(context.Background(), room); err != nil {
			t.Fatalf("mautrix JoinRoomByID after invite: %v", err)
		}

		jr, err := bob.Mautrix(t).JoinedRooms(context.Background())
		if err != nil || !slices.Contains(jr.JoinedRooms, room) {
			t.Fatalf("joined_rooms of %s = %+v, %v; want it to contain %s", bob.UserID, jr, err, room)
		}

		members, err := alice.Mautrix(t).JoinedMembers(context.Background(), room)
		if err != nil {
			t.Fatalf("mautrix JoinedMembers: %v", err)
		}
		var got []string
		for u := range members.Joined {
			got = append(got, string(u))
		}
		slices.Sort(got)
		want := []string{string(alice.UserID), string(bob.UserID)}
		slices.Sort(want)
		MustEqualStrings(t, "joined_members", got, want)

		state := bob.MustDo(t, "GET", CS("v3", "rooms", string(room), "state"), nil)
		if !state.IsArray() {
			t.Fatalf("GET /state is not an array: %s", state.Raw)
		}
		var kinds []string
		for _, ev := range state.Array() {
			MatchJSON(t, "state event", ev, KeyNonEmptyString("type"), KeyPresent("state_key"), KeyNonEmptyString("event_id"), KeyNonEmptyString("sender"), KeyPresent("content"))
			kinds = append(kinds, ev.Get("type").String()+"|"+ev.Get("state_key").String())
		}
		for _, k := range []string{"m.room.create|", "m.room.power_levels|", "m.room.join_rules|", "m.room.member|" + string(alice.UserID), "m.room.member|" + string(bob.UserID)} {
			if !slices.Contains(kinds, k) {
				t.Fatalf("room state lacks %s; has %q", k, kinds)
			}
		}
		if _, err := bob.Mautrix(t).State(context.Background(), room); err != nil {
			t.Fatalf("mautrix State: %v", err)
		}

		bob.MustDo(t, "POST", CS("v3", "rooms", string(room), "leave"), map[string]any{})
		after := bob.MustDo(t, "GET", CS("v3", "joined_rooms"), nil)
		for _, r := range after.Get("joined_rooms").Array() {
			if r.String() == string(room) {
				t.Fatalf("joined_rooms still lists %s after leave: %s", room, after.Raw)
			}
		}
		MustStatus(t, bob.Do(t, "PUT", CS("v3", "rooms", string(room), "send", "m.room.message", "conf-"+randomID(6)),
			map[string]any{"msgtype": "m.text", "body": "after leave"}), http.StatusForbidden, "M_FORBIDDEN")
		members, err = alice.Mautrix(t).JoinedMembers(context.Background(), room)
		if err != nil {
			t.Fatalf("mautrix JoinedMembers after leave: %v", err)
		}
		if _, ok := members.Joined[bob.UserID]; ok || len(members.Joined) != 1 {
			t.Fatalf("joined_members after %s left = %v", bob.UserID, members.Joined)
		}
	})
}
