package conformance

import (
	"slices"
	"testing"

	"github.com/tidwall/gjson"
)

// testState pins what state events carry and lazy-loaded members, as Synapse serves them.
func (s *suite) testState(t *testing.T) {
	t.Parallel()

	t.Run("ReplacedStateCarriesPrevContent", func(t *testing.T) {
		t.Parallel()
		alice, room := s.aliceAlone(t, "prevcontent")
		topic := CS("v3", "rooms", string(room), "state", "m.room.topic")
		first := alice.MustDo(t, "PUT", topic, map[string]any{"topic": "one"}).Get("event_id").String()
		second := alice.MustDo(t, "PUT", topic, map[string]any{"topic": "two"}).Get("event_id").String()
		msgs := alice.MustDo(t, "GET", CS("v3", "rooms", string(room), "messages"), nil, WithQuery("dir", "b"), WithQuery("limit", "2"))
		chunk := msgs.Get("chunk").Array()
		MustEqualStrings(t, "newest events", jsonEventIDs(chunk), []string{second, first})
		// Synapse keeps the replaced state's content, sender and id in unsigned.
		MatchJSON(t, "the second topic", chunk[0].Get("unsigned"), KeyEqual("prev_content.topic", "one"),
			KeyEqual("prev_sender", string(alice.UserID)), KeyEqual("replaces_state", first))
		if u := chunk[1].Get("unsigned"); u.Get("prev_content").Exists() || u.Get("replaces_state").Exists() {
			t.Fatalf("the first topic replaced nothing but says it did: %s", u.Raw)
		}
	})

	t.Run("LazyLoadedMembersInMessages", func(t *testing.T) {
		t.Parallel()
		alice := s.registerUser(t, "lazya")
		bob := s.registerUser(t, "lazyb")
		carol := s.registerUser(t, "lazyc")
		room := s.publicRoomWith(t, alice, carol, bob)
		l := s.label(t, 2)
		s.sendText(t, bob, room, l[0])
		s.sendText(t, alice, room, l[1])
		get := func(filter string) gjson.Result {
			q := []ReqOpt{WithQuery("dir", "b"), WithQuery("limit", "2")}
			if filter != "" {
				q = append(q, WithQuery("filter", filter))
			}
			return alice.MustDo(t, "GET", CS("v3", "rooms", string(room), "messages"), nil, q...)
		}
		// Synapse answers a lazy_load_members filter with the member events of the page's
		// senders in `state` (carol, who sent nothing on the page, is left out); without it,
		// no `state`.
		lazy := get(`{"lazy_load_members":true}`)
		var members []string
		for _, ev := range lazy.Get("state").Array() {
			if ev.Get("type").String() != "m.room.member" {
				t.Fatalf("lazy-loaded state holds a %s event: %s", ev.Get("type").String(), lazy.Raw)
			}
			members = append(members, ev.Get("state_key").String())
		}
		slices.Sort(members)
		want := []string{string(alice.UserID), string(bob.UserID)}
		slices.Sort(want)
		MustEqualStrings(t, "lazy-loaded members of the page's senders", members, want)
		if st := get("").Get("state"); len(st.Array()) != 0 {
			t.Fatalf("/messages without lazy_load_members has state: %s", st.Raw)
		}
	})
}
