package conformance

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

var onlyMessages = &mautrix.FilterPart{Types: []event.Type{event.EventMessage}}

// page is one /messages call through mautrix, failing the test on error.
func page(t testing.TB, c *Client, room id.RoomID, from string, dir mautrix.Direction, filter *mautrix.FilterPart, limit int) *mautrix.RespMessages {
	t.Helper()
	resp, err := c.Mautrix(t).Messages(context.Background(), room, from, "", dir, filter, limit)
	if err != nil {
		t.Fatalf("mautrix Messages(%s, from=%q, dir=%c, limit=%d): %v", room, from, dir, limit, err)
	}
	if len(resp.Chunk) > limit {
		t.Fatalf("Messages(limit=%d) returned %d events", limit, len(resp.Chunk))
	}
	for _, ev := range resp.Chunk {
		if ev.RoomID != "" && ev.RoomID != room {
			t.Fatalf("Messages(%s) returned event %s of room %s", room, ev.ID, ev.RoomID)
		}
		if err := ev.Content.ParseRaw(ev.Type); err != nil && ev.Type == event.EventMessage {
			t.Fatalf("parsing %s content of %s: %v", ev.Type.Type, ev.ID, err)
		}
	}
	return resp
}

func (s *suite) testMessages(t *testing.T) {
	t.Parallel()

	t.Run("BackwardPaginationNoGapsWhileMessagesArrive", func(t *testing.T) {
		t.Parallel()
		alice, room := s.aliceAlone(t, "pageb")
		want := s.label(t, 7)
		s.sendTexts(t, alice, room, want)
		var got []*event.Event
		from := "" // no from: the end of the timeline, as the daemon's first page does
		for i := 0; i < 20; i++ {
			resp := page(t, alice, room, from, mautrix.DirectionBackward, onlyMessages, 3)
			got = append(got, resp.Chunk...)
			// New messages after the first page must not show up in a backward walk, nor shift it.
			s.sendText(t, alice, room, "late-"+want[0]+"-"+string(rune('a'+i)))
			if len(resp.Chunk) == 0 || resp.End == "" {
				break
			}
			from = resp.End
		}
		rev := slices.Clone(want)
		slices.Reverse(rev)
		MustEqualStrings(t, "backward pages, newest first", bodies(got), rev)
	})

	t.Run("ForwardPaginationNoGapsWhileMessagesArrive", func(t *testing.T) {
		t.Parallel()
		alice, room := s.aliceAlone(t, "pagef")
		labels := s.label(t, 8)
		s.sendTexts(t, alice, room, labels[:5])
		var got []*event.Event
		// No from with dir=f: the start of the timeline (spec v1.3+; Synapse supports it).
		from := ""
		late := labels[5:]
		for i := 0; i < 30; i++ {
			resp := page(t, alice, room, from, mautrix.DirectionForward, onlyMessages, 2)
			got = append(got, resp.Chunk...)
			if len(late) > 0 {
				// Arrivals after our position must be reached by walking on, exactly once.
				s.sendText(t, alice, room, late[0])
				late = late[1:]
			}
			if resp.End != "" {
				from = resp.End
			} else if len(resp.Chunk) > 0 {
				t.Fatalf("a dir=f page with events has no end token, so forward reading cannot go on (page %d: %q)", i, bodies(resp.Chunk))
			}
			if len(resp.Chunk) == 0 && len(late) == 0 {
				break
			}
		}
		MustEqualStrings(t, "forward pages, oldest first", bodies(got), labels)
	})

	t.Run("LimitIsHonoured", func(t *testing.T) {
		t.Parallel()
		alice, room := s.aliceAlone(t, "limit")
		want := s.label(t, 5)
		s.sendTexts(t, alice, room, want)
		resp := page(t, alice, room, "", mautrix.DirectionBackward, onlyMessages, 2)
		MustEqualStrings(t, "limit=2 newest first", bodies(resp.Chunk), []string{want[4], want[3]})
		if resp.End == "" {
			t.Fatalf("a full page with more history left has no end token")
		}
		// Without a filter the limit counts every event, state included.
		all := page(t, alice, room, "", mautrix.DirectionBackward, nil, 4)
		if len(all.Chunk) != 4 {
			t.Fatalf("limit=4 without filter returned %d events", len(all.Chunk))
		}
	})

	t.Run("FilteredPagesAreFull", func(t *testing.T) {
		t.Parallel()
		alice, room := s.aliceAlone(t, "fullpage")
		noise := event.Type{Type: "dev.zooid.conformance.noise", Class: event.MessageEventType}
		want := s.label(t, 4)
		for _, b := range want {
			s.sendText(t, alice, room, b)
			for i := 0; i < 3; i++ {
				s.send(t, alice, room, noise, map[string]any{"n": i})
			}
		}
		// The filter applies before the limit: pages are full while matching events remain,
		// so a short page is never mistaken for the end by a reader counting events.
		p1 := page(t, alice, room, "", mautrix.DirectionBackward, onlyMessages, 2)
		MustEqualStrings(t, "first filtered page", bodies(p1.Chunk), []string{want[3], want[2]})
		if p1.End == "" {
			t.Fatalf("first filtered page has no end token")
		}
		p2 := page(t, alice, room, p1.End, mautrix.DirectionBackward, onlyMessages, 2)
		MustEqualStrings(t, "second filtered page", bodies(p2.Chunk), []string{want[1], want[0]})
		// Synapse gives the page holding the first matching event an `end` too; only the empty
		// page after it has none.
		if p2.End == "" {
			t.Fatalf("the filtered page reaching the first message has no end token")
		}
		p3 := page(t, alice, room, p2.End, mautrix.DirectionBackward, onlyMessages, 2)
		MustEqualStrings(t, "page past the first message", bodies(p3.Chunk), nil)
		if p3.End != "" {
			t.Fatalf("the empty page past the first message has end %q", p3.End)
		}
	})

	t.Run("EndTokenAtBothEndsOfTheRoom", func(t *testing.T) {
		t.Parallel()
		alice, room := s.aliceAlone(t, "ends")
		s.sendText(t, alice, room, s.label(t, 1)[0])
		get := func(dir, from string) *Response {
			opts := []ReqOpt{WithQuery("dir", dir), WithQuery("limit", "100")}
			if from != "" {
				opts = append(opts, WithQuery("from", from))
			}
			res := alice.Do(t, "GET", CS("v3", "rooms", string(room), "messages"), nil, opts...)
			MustStatus(t, res, http.StatusOK, "")
			return res
		}
		// The spec says `end` is omitted "when there are no further events"; Synapse still
		// returns it with the page that reaches m.room.create (or the newest event, dir=f) and
		// omits it only on the empty page after. A reader stops on an empty chunk, not on a
		// missing `end`.
		for _, dir := range []string{"b", "f"} {
			first := get(dir, "")
			chunk := first.JSON().Get("chunk").Array()
			edge := chunk[len(chunk)-1].Get("type").String()
			if dir == "b" && edge != "m.room.create" {
				t.Fatalf("dir=b limit=100 of a small room did not reach m.room.create: %s", first)
			}
			end := first.JSON().Get("end")
			if !end.Exists() || end.String() == "" {
				t.Fatalf("dir=%s: the page reaching the edge of the room has no end: %s", dir, first)
			}
			after := get(dir, end.String())
			if n := len(after.JSON().Get("chunk").Array()); n != 0 || after.JSON().Get("end").Exists() {
				t.Fatalf("dir=%s: want an empty chunk without end past the edge, got %d events: %s", dir, n, after)
			}
		}
	})

	t.Run("DefaultDirectionIsForwardsFromTheStart", func(t *testing.T) {
		t.Parallel()
		alice, room := s.aliceAlone(t, "nodir")
		l := s.label(t, 3)
		s.sendTexts(t, alice, room, l)
		// The spec makes dir required; Synapse defaults it to forwards, from the room's start
		// without `from` and from the token with it. (/relations defaults to backwards.)
		get := func(from string) gjson.Result {
			opts := []ReqOpt{WithQuery("limit", "2")}
			if from != "" {
				opts = append(opts, WithQuery("from", from))
			}
			return alice.MustDo(t, "GET", CS("v3", "rooms", string(room), "messages"), nil, opts...)
		}
		var types, texts []string
		from := ""
		for i := 0; i < 20; i++ {
			res := get(from)
			chunk := res.Get("chunk").Array()
			if len(chunk) == 0 {
				break
			}
			for _, ev := range chunk {
				types = append(types, ev.Get("type").String())
				if ev.Get("type").String() == "m.room.message" {
					texts = append(texts, ev.Get("content.body").String())
				}
			}
			from = res.Get("end").String()
		}
		if len(types) == 0 || types[0] != "m.room.create" {
			t.Fatalf("/messages without dir started with %q, want m.room.create first", types)
		}
		MustEqualStrings(t, "messages walked without dir", texts, l)
	})

	t.Run("DepartedUserReadsUpToTheLeave", func(t *testing.T) {
		t.Parallel()
		alice, bob, room := s.aliceAndBob(t, "stayer", "leaver")
		l := s.label(t, 3)
		s.sendText(t, bob, room, l[0])
		before := s.sendText(t, alice, room, l[1])
		bob.MustDo(t, "POST", CS("v3", "rooms", string(room), "leave"), map[string]any{})
		after := s.sendText(t, alice, room, l[2])
		// Synapse (history_visibility "shared") lets a former member read history up to the
		// leave: a backward walk from the present starts at the leave event. It does NOT cap
		// dir=f: a forward walk shows a former member events after the leave (a known Synapse
		// gap; fakehs stops at the leave), so this suite pins only dir=b and /event.
		resp := page(t, bob, room, "", mautrix.DirectionBackward, onlyMessages, 10)
		MustEqualStrings(t, "a departed member's history", bodies(resp.Chunk), []string{l[1], l[0]})
		all := page(t, bob, room, "", mautrix.DirectionBackward, nil, 1)
		if len(all.Chunk) != 1 || all.Chunk[0].Type != event.StateMember || all.Chunk[0].GetStateKey() != string(bob.UserID) {
			t.Fatalf("a departed member's newest readable event is not their leave: %+v", all.Chunk)
		}
		bob.MustDo(t, "GET", CS("v3", "rooms", string(room), "event", string(before)), nil)
		ExpectStatus(t, bob.Do(t, "GET", CS("v3", "rooms", string(room), "event", string(after)), nil), http.StatusNotFound, "M_NOT_FOUND")

		// Leaving again is a no-op: Synapse answers 200 {} and sends no second leave event.
		MatchResponse(t, "second leave", bob.Do(t, "POST", CS("v3", "rooms", string(room), "leave"), map[string]any{}))
		members := page(t, alice, room, "", mautrix.DirectionBackward, &mautrix.FilterPart{Types: []event.Type{event.StateMember}}, 10)
		leaves := 0
		for _, ev := range members.Chunk {
			_ = ev.Content.ParseRaw(ev.Type) // an "already parsed" error is fine
			if ev.GetStateKey() == string(bob.UserID) && ev.Content.AsMember().Membership == event.MembershipLeave {
				leaves++
			}
		}
		if leaves != 1 {
			t.Fatalf("want exactly one leave event of %s, got %d", bob.UserID, leaves)
		}
		// Leaving a room never joined is 403; an unknown room is 404 M_UNKNOWN "Not a known room".
		carol := s.registerUser(t, "neverin")
		ExpectStatus(t, carol.Do(t, "POST", CS("v3", "rooms", string(room), "leave"), map[string]any{}), http.StatusForbidden, "M_FORBIDDEN")
		ghost := "!conformance-no-such-room-" + s.runID + ":" + s.target.ServerName
		ExpectStatus(t, carol.Do(t, "POST", CS("v3", "rooms", ghost, "leave"), map[string]any{}), http.StatusNotFound, "M_UNKNOWN")
	})

	t.Run("FiltersTypesNotTypesSenders", func(t *testing.T) {
		t.Parallel()
		alice, bob, room := s.aliceAndBob(t, "filta", "filtb")
		l, custom := s.sendMixedTypesAndSenders(t, alice, bob, room)

		types := page(t, alice, room, "", mautrix.DirectionForward, &mautrix.FilterPart{Types: []event.Type{custom}}, 50)
		MustEqualStrings(t, "types filter", bodies(types.Chunk), []string{l[1], l[3]})

		notTypes := page(t, alice, room, "", mautrix.DirectionForward,
			&mautrix.FilterPart{NotTypes: []event.Type{event.StateMember, event.StateCreate, event.StatePowerLevels,
				event.StateJoinRules, event.StateHistoryVisibility, event.StateGuestAccess, event.StateRoomName, event.EventMessage}}, 50)
		MustEqualStrings(t, "not_types filter", bodies(notTypes.Chunk), []string{l[1], l[3]})

		senders := page(t, alice, room, "", mautrix.DirectionForward,
			&mautrix.FilterPart{Senders: []id.UserID{bob.UserID}, Types: []event.Type{event.EventMessage, custom}}, 50)
		MustEqualStrings(t, "senders filter", bodies(senders.Chunk), []string{l[1], l[2]})

		// The daemon's filter for "messages only" combined with a sender exclusion.
		notSenders := page(t, alice, room, "", mautrix.DirectionBackward,
			&mautrix.FilterPart{NotSenders: []id.UserID{bob.UserID}, Types: []event.Type{event.EventMessage}}, 50)
		MustEqualStrings(t, "not_senders filter", bodies(notSenders.Chunk), []string{l[0]})
	})

	t.Run("TxnIDIsIdempotent", func(t *testing.T) {
		t.Parallel()
		alice, bob, room := s.aliceAndBob(t, "txn", "txnb")
		body := s.label(t, 1)[0]
		txn := "conf-txn-" + s.runID
		content := map[string]any{"msgtype": "m.text", "body": body}
		first, err := alice.Mautrix(t).SendMessageEvent(context.Background(), room, event.EventMessage, content, mautrix.ReqSendEvent{TransactionID: txn})
		if err != nil {
			t.Fatalf("first send: %v", err)
		}
		second, err := alice.Mautrix(t).SendMessageEvent(context.Background(), room, event.EventMessage, content, mautrix.ReqSendEvent{TransactionID: txn})
		if err != nil {
			t.Fatalf("resend with the same txn id: %v", err)
		}
		if first.EventID != second.EventID {
			t.Fatalf("same txn id gave two events: %s and %s", first.EventID, second.EventID)
		}
		raw := alice.MustDo(t, "PUT", CS("v3", "rooms", string(room), "send", "m.room.message", txn), content)
		MatchJSON(t, "raw resend", raw, KeyEqual("event_id", string(first.EventID)))

		// Txn ids are scoped to the sender's device: another user's same id is a new event.
		other, err := bob.Mautrix(t).SendMessageEvent(context.Background(), room, event.EventMessage, content, mautrix.ReqSendEvent{TransactionID: txn})
		if err != nil {
			t.Fatalf("bob's send with alice's txn id: %v", err)
		}
		if other.EventID == first.EventID {
			t.Fatalf("another user's send with the same txn id returned alice's event %s", first.EventID)
		}
		resp := page(t, alice, room, "", mautrix.DirectionBackward, onlyMessages, 50)
		MustEqualStrings(t, "one event per (device, txn id)", eventIDs(resp.Chunk), []string{string(other.EventID), string(first.EventID)})
	})

	t.Run("NonMemberIsForbidden", func(t *testing.T) {
		t.Parallel()
		alice := s.registerUser(t, "member")
		eve := s.registerUser(t, "outsider")
		room := s.createRoom(t, alice, nil)
		rootID := s.sendText(t, alice, room, s.label(t, 1)[0])
		ExpectStatus(t, eve.Do(t, "GET", CS("v3", "rooms", string(room), "messages"), nil, WithQuery("dir", "b")), http.StatusForbidden, "M_FORBIDDEN")
		ExpectStatus(t, eve.Do(t, "PUT", CS("v3", "rooms", string(room), "send", "m.room.message", "conf-"+randomID(6)),
			map[string]any{"msgtype": "m.text", "body": "intrusion"}), http.StatusForbidden, "M_FORBIDDEN")
		ExpectStatus(t, eve.Do(t, "GET", CS("v3", "rooms", string(room), "joined_members"), nil), http.StatusForbidden, "M_FORBIDDEN")
		ExpectStatus(t, eve.Do(t, "GET", CS("v3", "rooms", string(room), "state"), nil), http.StatusForbidden, "M_FORBIDDEN")
		ExpectStatus(t, eve.Do(t, "GET", CS("v1", "rooms", string(room), "threads"), nil), http.StatusForbidden, "M_FORBIDDEN")
		ExpectStatus(t, eve.Do(t, "GET", CS("v1", "rooms", string(room), "relations", string(rootID), "m.thread"), nil), http.StatusForbidden, "M_FORBIDDEN")
		// Synapse hides single events from non-members as not found rather than forbidden.
		ExpectStatus(t, eve.Do(t, "GET", CS("v3", "rooms", string(room), "event", string(rootID)), nil), http.StatusNotFound, "M_NOT_FOUND")
		// A room that does not exist looks the same as one the user is not in (Synapse).
		ghost := "!conformance-no-such-room-" + s.runID + ":" + s.target.ServerName
		ExpectStatus(t, alice.Do(t, "GET", CS("v3", "rooms", ghost, "messages"), nil, WithQuery("dir", "b")), http.StatusForbidden, "M_FORBIDDEN")
		ExpectStatus(t, alice.Do(t, "PUT", CS("v3", "rooms", ghost, "send", "m.room.message", "conf-"+randomID(6)),
			map[string]any{"msgtype": "m.text", "body": "nowhere"}), http.StatusForbidden, "M_FORBIDDEN")
		// The refused send must not have left an event behind.
		resp := page(t, alice, room, "", mautrix.DirectionBackward, onlyMessages, 10)
		for _, ev := range resp.Chunk {
			if ev.Sender == eve.UserID {
				t.Fatalf("a refused send left event %s behind", ev.ID)
			}
		}
	})

	t.Run("EventLookupIsScopedToTheRoom", func(t *testing.T) {
		t.Parallel()
		alice, room := s.aliceAlone(t, "evlookup")
		other := s.createRoom(t, alice, nil)
		l := s.label(t, 2)
		evID := s.sendText(t, alice, room, l[0])
		foreign := s.sendText(t, alice, other, l[1])
		ev, err := alice.Mautrix(t).GetEvent(context.Background(), room, evID)
		if err != nil || ev.ID != evID || ev.Sender != alice.UserID || ev.Content.Raw["body"] != l[0] {
			t.Fatalf("mautrix GetEvent(%s) = %+v, %v", evID, ev, err)
		}
		// The daemon checks that a thread_id belongs to the room by looking it up there.
		ExpectStatus(t, alice.Do(t, "GET", CS("v3", "rooms", string(room), "event", string(foreign)), nil), http.StatusNotFound, "M_NOT_FOUND")
		ExpectStatus(t, alice.Do(t, "GET", CS("v3", "rooms", string(room), "event", "$conformance-no-such-event-"+s.runID), nil), http.StatusNotFound, "M_NOT_FOUND")
		ExpectStatus(t, alice.Do(t, "GET", CS("v3", "rooms", "!conformance-no-such-room-"+s.runID+":"+s.target.ServerName, "event", string(evID)), nil),
			http.StatusNotFound, "M_NOT_FOUND")
		// Synapse answers relations of another room's event, or of an unknown one, with 404
		// M_UNKNOWN ("Unknown parent event."), not M_NOT_FOUND.
		ExpectStatus(t, alice.Do(t, "GET", CS("v1", "rooms", string(room), "relations", string(foreign), "m.thread"), nil), http.StatusNotFound, "M_UNKNOWN")
		ExpectStatus(t, alice.Do(t, "GET", CS("v1", "rooms", string(room), "relations", "$conformance-no-such-event-"+s.runID), nil), http.StatusNotFound, "M_UNKNOWN")
	})

	t.Run("EditAndRedactionBundles", func(t *testing.T) {
		t.Parallel()
		alice, bob, room := s.aliceAndBob(t, "editor", "othereditor")
		l := s.label(t, 2)
		edit := func(c *Client, orig id.EventID, body string) id.EventID {
			return s.send(t, c, room, event.EventMessage, map[string]any{
				"msgtype": "m.text", "body": "* " + body, "m.new_content": map[string]any{"msgtype": "m.text", "body": body},
				"m.relates_to": map[string]any{"rel_type": "m.replace", "event_id": orig},
			})
		}
		orig := s.sendText(t, alice, room, l[0])
		edit(alice, orig, "first edit")
		latest := edit(alice, orig, "second edit")
		edit(bob, orig, "not the sender's") // Synapse bundles only the original sender's edits
		// Synapse bundles the whole latest edit in unsigned.m.relations.m.replace and leaves the
		// original content as sent (Matrix 1.7, MSC3925).
		ev := alice.MustDo(t, "GET", CS("v3", "rooms", string(room), "event", string(orig)), nil)
		MatchJSON(t, "edited event", ev, KeyEqual("content.body", l[0]),
			KeyEqual("unsigned.m\\.relations.m\\.replace.event_id", string(latest)),
			KeyEqual("unsigned.m\\.relations.m\\.replace.content.m\\.new_content.body", "second edit"))
		got, err := alice.Mautrix(t).GetEvent(context.Background(), room, orig)
		if err != nil || got.Unsigned.Relations.GetLatestEdit() == nil || got.Unsigned.Relations.GetLatestEdit().ID != latest {
			t.Fatalf("mautrix GetEvent(%s) latest edit = %+v, %v; want %s", orig, got, err, latest)
		}
		// A redacted edit no longer counts; the one before it is bundled again.
		if _, err := alice.Mautrix(t).RedactEvent(context.Background(), room, latest); err != nil {
			t.Fatalf("redacting the latest edit: %v", err)
		}
		eventually(t, 10*time.Second, "the bundle to fall back to the first edit", func() (bool, string) {
			ev := alice.MustDo(t, "GET", CS("v3", "rooms", string(room), "event", string(orig)), nil)
			body := ev.Get("unsigned.m\\.relations.m\\.replace.content.m\\.new_content.body").String()
			return body == "first edit", ev.Raw
		})

		// A redacted event keeps its type and empty content, and says what redacted it.
		doomed := s.sendText(t, alice, room, l[1])
		red, err := alice.Mautrix(t).RedactEvent(context.Background(), room, doomed, mautrix.ReqRedact{Reason: "conformance"})
		if err != nil {
			t.Fatalf("redacting: %v", err)
		}
		ev = bob.MustDo(t, "GET", CS("v3", "rooms", string(room), "event", string(doomed)), nil)
		MatchJSON(t, "redacted event", ev, KeyEqual("type", "m.room.message"),
			KeyEqual("unsigned.redacted_because.event_id", string(red.EventID)),
			KeyEqual("unsigned.redacted_because.type", "m.room.redaction"),
			KeyEqual("unsigned.redacted_because.content.reason", "conformance"))
		if n := len(ev.Get("content").Map()); n != 0 {
			t.Fatalf("redacted message keeps content: %s", ev.Raw)
		}
	})

	t.Run("SyncTokenStartsMessagesPagination", func(t *testing.T) {
		t.Parallel()
		alice, room := s.aliceAlone(t, "synctok")
		l := s.label(t, 3)
		s.sendTexts(t, alice, room, l)
		// The spec lets a /sync next_batch start /messages; the daemon resumes history there.
		nb := alice.MustDo(t, "GET", CS("v3", "sync"), nil, WithQuery("timeout", "0"), WithQuery("filter", `{"room":{"timeline":{"limit":1}}}`)).Get("next_batch").String()
		s.sendText(t, alice, room, "after-"+l[2])
		resp := page(t, alice, room, nb, mautrix.DirectionBackward, onlyMessages, 2)
		MustEqualStrings(t, "backward from a sync token", bodies(resp.Chunk), []string{l[2], l[1]})
	})

	t.Run("MessagesRawShape", func(t *testing.T) {
		t.Parallel()
		alice, room := s.aliceAlone(t, "shape")
		body := s.label(t, 1)[0]
		evID := s.sendText(t, alice, room, body)
		filter, _ := json.Marshal(map[string]any{"types": []string{"m.room.message"}})
		res := alice.MustDo(t, "GET", CS("v3", "rooms", string(room), "messages"), nil,
			WithQuery("dir", "b"), WithQuery("limit", "1"), WithQuery("filter", string(filter)))
		MatchJSON(t, "/messages", res, KeyNonEmptyString("start"), KeyPresent("chunk"))
		ev := res.Get("chunk.0")
		MatchJSON(t, "/messages event", ev,
			KeyEqual("event_id", string(evID)), KeyEqual("room_id", string(room)), KeyEqual("sender", string(alice.UserID)),
			KeyEqual("type", "m.room.message"), KeyEqual("content.body", body), KeyPresent("origin_server_ts"))
	})
}
