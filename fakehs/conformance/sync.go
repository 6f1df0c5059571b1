package conformance

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// timelineBodies returns content.body of the room's timeline events in a /sync response.
func timelineBodies(res gjson.Result, room id.RoomID) []string {
	var out []string
	for _, ev := range field(res.Get("rooms.join"), string(room)).Get("timeline.events").Array() {
		out = append(out, ev.Get("content.body").String())
	}
	return out
}

func (s *suite) testSync(t *testing.T) {
	t.Parallel()

	t.Run("InitialThenLongPollWakesThenSince", func(t *testing.T) {
		t.Parallel()
		alice, bob, room := s.aliceAndBob(t, "sync", "syncb")
		l := s.label(t, 2)
		s.sendText(t, bob, room, l[0])
		filter := `{"room":{"timeline":{"limit":10,"types":["m.room.message"]}}}`

		initial := alice.MustDo(t, "GET", CS("v3", "sync"), nil, WithQuery("filter", filter), WithQuery("timeout", "0"))
		MatchJSON(t, "initial sync", initial, KeyNonEmptyString("next_batch"))
		if got := timelineBodies(initial, room); !slices.Contains(got, l[0]) {
			t.Fatalf("initial sync timeline of %s = %q, want it to contain %q: %s", room, got, l[0], truncate(initial.Raw, 2000))
		}
		since := initial.Get("next_batch").String()

		const pollTimeout = 20 * time.Second
		type result struct {
			res *Response
			err error
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*pollTimeout)
		defer cancel()
		start := time.Now()
		var seen []string
		first := true
		for !slices.Contains(seen, l[1]) {
			done := make(chan result, 1)
			go func(since string) {
				res, err := alice.DoCtx(ctx, "GET", CS("v3", "sync"), nil, WithQuery("filter", filter), WithQuery("since", since),
					WithQuery("timeout", strconv.Itoa(int(pollTimeout/time.Millisecond))), WithTimeout(pollTimeout+10*time.Second))
				done <- result{res, err}
			}(since)
			if first {
				// Give the long poll time to be parked before the message that must wake it.
				time.Sleep(time.Second)
				s.sendText(t, bob, room, l[1])
				first = false
			}
			r := <-done
			if r.err != nil {
				t.Fatalf("long-poll sync: %v", r.err)
			}
			if r.res.StatusCode != 200 {
				t.Fatalf("long-poll sync: %s", r.res)
			}
			body := r.res.JSON()
			seen = append(seen, timelineBodies(body, room)...)
			since = body.Get("next_batch").String()
			if since == "" {
				t.Fatalf("incremental sync without next_batch: %s", r.res)
			}
			if time.Since(start) > pollTimeout-2*time.Second {
				t.Fatalf("the long poll was not woken by the new message (waited %s, saw %q)", time.Since(start), seen)
			}
		}
		MustEqualStrings(t, "incremental timelines after since", seen, []string{l[1]})

		// A long poll with nothing new ends normally with a token to go on from.
		again := alice.MustDo(t, "GET", CS("v3", "sync"), nil, WithQuery("filter", filter), WithQuery("since", since), WithQuery("timeout", "500"))
		if got := timelineBodies(again, room); len(got) != 0 {
			t.Fatalf("sync since the last next_batch repeated %q", got)
		}
		MatchJSON(t, "idle long poll", again, KeyNonEmptyString("next_batch"))
	})

	t.Run("UploadedFilterThroughMautrix", func(t *testing.T) {
		t.Parallel()
		alice, bob, room := s.aliceAndBob(t, "filtsync", "filtsyncb")
		l, _ := s.sendMixedTypesAndSenders(t, alice, bob, room)

		cli := alice.Mautrix(t)
		created, err := cli.CreateFilter(context.Background(), &mautrix.Filter{Room: &mautrix.RoomFilter{
			Timeline: &mautrix.FilterPart{Limit: 20, Types: []event.Type{event.EventMessage}},
		}})
		if err != nil || created.FilterID == "" {
			t.Fatalf("mautrix CreateFilter: %+v, %v", created, err)
		}
		resp, err := cli.SyncRequest(context.Background(), 0, "", created.FilterID, false, "")
		if err != nil {
			t.Fatalf("mautrix SyncRequest with filter %s: %v", created.FilterID, err)
		}
		joined, ok := resp.Rooms.Join[room]
		if !ok {
			t.Fatalf("sync has no joined room %s", room)
		}
		MustEqualStrings(t, "timeline with types filter", bodies(joined.Timeline.Events), []string{l[0], l[2]})
		if resp.NextBatch == "" {
			t.Fatalf("mautrix sync response without next_batch")
		}

		inline, _ := json.Marshal(map[string]any{"room": map[string]any{"rooms": []id.RoomID{room}, "timeline": map[string]any{
			"limit": 20, "senders": []id.UserID{bob.UserID}, "not_types": []string{"m.room.member"},
		}}})
		res := alice.MustDo(t, "GET", CS("v3", "sync"), nil, WithQuery("filter", string(inline)), WithQuery("timeout", "0"))
		MustEqualStrings(t, "timeline with senders+not_types filter", timelineBodies(res, room), []string{l[1], l[2]})
	})

	t.Run("LimitedTimelineGapFilledFromPrevBatch", func(t *testing.T) {
		t.Parallel()
		alice, bob, room := s.aliceAndBob(t, "gap", "gapb")
		filter := `{"room":{"timeline":{"limit":2,"types":["m.room.message"]}}}`
		initial := alice.MustDo(t, "GET", CS("v3", "sync"), nil, WithQuery("filter", filter), WithQuery("timeout", "0"))
		l := s.label(t, 5)
		s.sendTexts(t, bob, room, l)
		res := alice.MustDo(t, "GET", CS("v3", "sync"), nil, WithQuery("filter", filter),
			WithQuery("since", initial.Get("next_batch").String()), WithQuery("timeout", "0"))
		tl := field(res.Get("rooms.join"), string(room)).Get("timeline")
		MustEqualStrings(t, "limited timeline", timelineBodies(res, room), l[3:])
		MatchJSON(t, "limited timeline", tl, KeyEqual("limited", true), KeyNonEmptyString("prev_batch"))

		// The daemon's sync intake fills the gap backwards from prev_batch: no gaps, no repeats.
		var gap []*event.Event
		from := tl.Get("prev_batch").String()
		for i := 0; i < 20; i++ {
			resp := page(t, alice, room, from, mautrix.DirectionBackward, onlyMessages, 2)
			gap = append(gap, resp.Chunk...)
			if len(resp.Chunk) == 0 || resp.End == "" {
				break
			}
			from = resp.End
		}
		MustEqualStrings(t, "gap from prev_batch, newest first", bodies(gap), []string{l[2], l[1], l[0]})
	})

	t.Run("InviteAppearsInSync", func(t *testing.T) {
		t.Parallel()
		alice := s.registerUser(t, "syncinv")
		bob := s.registerUser(t, "syncinvb")
		room := s.createRoom(t, alice, map[string]any{"preset": "private_chat"})
		before := bob.MustDo(t, "GET", CS("v3", "sync"), nil, WithQuery("timeout", "0"))
		alice.MustDo(t, "POST", CS("v3", "rooms", string(room), "invite"), map[string]any{"user_id": bob.UserID})
		var inv gjson.Result
		eventually(t, 10*time.Second, "invite in sync", func() (bool, string) {
			res := bob.MustDo(t, "GET", CS("v3", "sync"), nil, WithQuery("since", before.Get("next_batch").String()), WithQuery("timeout", "1000"))
			inv = field(res.Get("rooms.invite"), string(room))
			return inv.Exists(), truncate(res.Raw, 1000)
		})
		found := false
		for _, ev := range inv.Get("invite_state.events").Array() {
			if ev.Get("type").String() == "m.room.member" && ev.Get("state_key").String() == string(bob.UserID) {
				found = true
				MatchJSON(t, "invite member event", ev, KeyEqual("content.membership", "invite"), KeyEqual("sender", string(alice.UserID)))
			}
		}
		if !found {
			t.Fatalf("invite_state lacks bob's m.room.member: %s", inv.Raw)
		}
	})

	t.Run("JoinedRoomSummary", func(t *testing.T) {
		t.Parallel()
		alice := s.registerUser(t, "summa")
		bob := s.registerUser(t, "summb")
		carol := s.registerUser(t, "summc")
		room := s.publicRoomWith(t, alice, carol, bob)
		s.sendTexts(t, bob, room, s.label(t, 3))
		sync := func(filter string) gjson.Result {
			res := alice.MustDo(t, "GET", CS("v3", "sync"), nil, WithQuery("timeout", "0"), WithQuery("filter", filter))
			return field(res.Get("rooms.join"), string(room))
		}
		// Synapse always sends a summary object, empty unless members are lazy-loaded; then it
		// counts the members and names up to five heroes, other members in the order they came.
		plain := sync(`{"room":{"timeline":{"limit":2}}}`)
		if sum := plain.Get("summary"); !sum.IsObject() || len(sum.Map()) != 0 {
			t.Fatalf("summary without lazy-loading: %s", truncate(plain.Raw, 2000))
		}
		lazy := sync(`{"room":{"timeline":{"limit":2},"state":{"lazy_load_members":true}}}`)
		MatchJSON(t, "lazy-loaded summary", lazy.Get("summary"), KeyEqual("m\\.joined_member_count", 3), KeyEqual("m\\.invited_member_count", 0))
		var heroes []string
		for _, h := range lazy.Get("summary.m\\.heroes").Array() {
			heroes = append(heroes, h.String())
		}
		MustEqualStrings(t, "heroes", heroes, []string{string(carol.UserID), string(bob.UserID)})
	})

	t.Run("LeftRoomHasAccountData", func(t *testing.T) {
		t.Parallel()
		_, bob, room := s.aliceAndBob(t, "leftad", "leftadb")
		before := bob.MustDo(t, "GET", CS("v3", "sync"), nil, WithQuery("timeout", "0"))
		bob.MustDo(t, "POST", CS("v3", "rooms", string(room), "leave"), map[string]any{})
		var left gjson.Result
		eventually(t, 10*time.Second, "the left room in an incremental sync", func() (bool, string) {
			res := bob.MustDo(t, "GET", CS("v3", "sync"), nil, WithQuery("since", before.Get("next_batch").String()), WithQuery("timeout", "1000"))
			left = field(res.Get("rooms.leave"), string(room))
			return left.Exists(), truncate(res.Raw, 1000)
		})
		// Synapse gives a left room the same sections as a joined one's account data.
		if ad := left.Get("account_data.events"); !ad.IsArray() {
			t.Fatalf("left room without account_data.events: %s", left.Raw)
		}
	})
}
