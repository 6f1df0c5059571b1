package conformance

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/zevent"
)

// relationsPages walks /v1/.../relations/{root}/m.thread in dir with limit through mautrix.
func relationsPages(t testing.TB, c *Client, room id.RoomID, root id.EventID, dir mautrix.Direction, limit int) []*event.Event {
	t.Helper()
	var all []*event.Event
	from := ""
	for i := 0; i < 50; i++ {
		resp, err := c.Mautrix(t).GetRelations(context.Background(), room, root, &mautrix.ReqGetRelations{
			RelationType: event.RelThread, Dir: dir, From: from, Limit: limit,
		})
		if err != nil {
			t.Fatalf("mautrix GetRelations(%s, dir=%c, from=%q): %v", root, dir, from, err)
		}
		if len(resp.Chunk) > limit {
			t.Fatalf("relations limit=%d returned %d", limit, len(resp.Chunk))
		}
		all = append(all, resp.Chunk...)
		if resp.NextBatch == "" {
			return all
		}
		from = resp.NextBatch
	}
	t.Fatalf("relations of %s never ended", root)
	return nil
}

// threadsPages walks /v1/rooms/{id}/threads with limit and returns the root event ids in order
// and the raw root events.
func threadsPages(t testing.TB, c *Client, room id.RoomID, limit int) ([]string, []gjson.Result) {
	t.Helper()
	var ids []string
	var roots []gjson.Result
	from := ""
	for i := 0; i < 50; i++ {
		opts := []ReqOpt{WithQuery("limit", strconv.Itoa(limit))}
		if from != "" {
			opts = append(opts, WithQuery("from", from))
		}
		res := c.MustDo(t, "GET", CS("v1", "rooms", string(room), "threads"), nil, opts...)
		chunk := res.Get("chunk").Array()
		if len(chunk) > limit {
			t.Fatalf("threads limit=%d returned %d: %s", limit, len(chunk), res.Raw)
		}
		ids = append(ids, jsonEventIDs(chunk)...)
		roots = append(roots, chunk...)
		from = res.Get("next_batch").String()
		if from == "" {
			return ids, roots
		}
	}
	t.Fatalf("threads of %s never ended", room)
	return nil, nil
}

// awaitThreads waits until a /threads walk in pages of limit lists exactly the roots want, in
// order (Synapse updates its thread list when a reply is persisted), and returns the raw roots.
func awaitThreads(t testing.TB, c *Client, room id.RoomID, limit int, what string, want []string) []gjson.Result {
	t.Helper()
	var roots []gjson.Result
	eventually(t, 10*time.Second, what, func() (bool, string) {
		var ids []string
		ids, roots = threadsPages(t, c, room, limit)
		return slices.Equal(ids, want), fmt.Sprintf("got %q, want %q", ids, want)
	})
	return roots
}

// threadReplyBody is the raw content of a thread reply to parent, as sendThreadReply sends it.
func threadReplyBody(body string, parent string) map[string]any {
	return map[string]any{
		"msgtype": "m.text",
		"body":    body,
		"m.relates_to": map[string]any{
			"rel_type": "m.thread", "event_id": parent, "is_falling_back": true,
			"m.in_reply_to": map[string]any{"event_id": parent},
		},
	}
}

func (s *suite) testThreads(t *testing.T) {
	t.Parallel()

	t.Run("ThreadCannotStartFromARelation", func(t *testing.T) {
		t.Parallel()
		alice, room := s.aliceAlone(t, "nested")
		l := s.label(t, 1)
		root := s.sendText(t, alice, room, l[0])
		reply := s.sendThreadReply(t, alice, room, root, "reply")
		edit := s.send(t, alice, room, event.EventMessage, map[string]any{
			"msgtype": "m.text", "body": "* edited", "m.new_content": map[string]any{"msgtype": "m.text", "body": "edited"},
			"m.relates_to": map[string]any{"rel_type": "m.replace", "event_id": root},
		})
		// Synapse refuses a thread whose parent has a relation of its own (a thread reply, an
		// edit) with 400 M_UNKNOWN "Cannot start threads from an event with a relation": a
		// reply in a thread names the thread root, never another reply.
		for _, parent := range []id.EventID{reply, edit} {
			res := alice.Do(t, "PUT", CS("v3", "rooms", string(room), "send", "m.room.message", "conf-"+randomID(6)), threadReplyBody("nested", string(parent)))
			ExpectStatus(t, res, http.StatusBadRequest, "M_UNKNOWN")
		}
		awaitThreads(t, alice, room, 10, "the thread list to hold only the root", []string{string(root)})
		rels := relationsPages(t, alice, room, root, mautrix.DirectionForward, 10)
		MustEqualStrings(t, "replies in the thread", eventIDs(rels), []string{string(reply)})
	})

	t.Run("RelationToUnknownEventRefused", func(t *testing.T) {
		t.Parallel()
		alice, room := s.aliceAlone(t, "relunknown")
		other := s.createRoom(t, alice, nil)
		foreign := s.sendText(t, alice, other, s.label(t, 1)[0])
		send := func(content map[string]any) *Response {
			return alice.Do(t, "PUT", CS("v3", "rooms", string(room), "send", "m.room.message", "conf-"+randomID(6)), content)
		}
		// Synapse: 400 M_UNKNOWN "Can't send relation to unknown event", and "Relations must be
		// in the same room" for a parent elsewhere; the daemon must check a thread_id first.
		ExpectStatus(t, send(threadReplyBody("to nothing", "$conformance-no-such-event-"+s.runID)), http.StatusBadRequest, "M_UNKNOWN")
		ExpectStatus(t, send(threadReplyBody("to elsewhere", string(foreign))), http.StatusBadRequest, "M_UNKNOWN")
		// A bare reply (m.in_reply_to, no rel_type) is not a relation and is not checked.
		bare := send(map[string]any{"msgtype": "m.text", "body": "bare reply",
			"m.relates_to": map[string]any{"m.in_reply_to": map[string]any{"event_id": "$conformance-no-such-event-" + s.runID}}})
		ExpectStatus(t, bare, http.StatusOK, "")
		resp := page(t, alice, room, "", mautrix.DirectionBackward, onlyMessages, 10)
		MustEqualStrings(t, "messages stored after refused relations", bodies(resp.Chunk), []string{"bare reply"})
	})

	t.Run("RelationsBothDirectionsPaged", func(t *testing.T) {
		t.Parallel()
		alice, bob, room := s.aliceAndBob(t, "rel", "relb")
		l := s.label(t, 7)
		root := s.sendText(t, alice, room, l[0])
		other := s.sendText(t, alice, room, l[6]) // a second root whose reply must not leak in
		s.sendThreadReply(t, bob, room, other, "other-thread-"+l[6])
		var replies []string
		for i, b := range l[1:6] {
			sender := alice
			if i%2 == 0 {
				sender = bob
			}
			s.sendThreadReply(t, sender, room, root, b)
			replies = append(replies, b)
		}

		fwd := relationsPages(t, bob, room, root, mautrix.DirectionForward, 2)
		MustEqualStrings(t, "thread replies dir=f (root excluded)", bodies(fwd), replies)
		back := relationsPages(t, bob, room, root, mautrix.DirectionBackward, 2)
		rev := slices.Clone(replies)
		slices.Reverse(rev)
		MustEqualStrings(t, "thread replies dir=b", bodies(back), rev)

		// A backward walk started before new replies arrive neither repeats nor returns them,
		// and misses nothing.
		var walked []*event.Event
		from, lastLate := "", ""
		for i := 0; i < 20; i++ {
			resp, err := bob.Mautrix(t).GetRelations(context.Background(), room, root, &mautrix.ReqGetRelations{
				RelationType: event.RelThread, Dir: mautrix.DirectionBackward, From: from, Limit: 2,
			})
			if err != nil {
				t.Fatalf("GetRelations while replies arrive: %v", err)
			}
			walked = append(walked, resp.Chunk...)
			lastLate = fmt.Sprintf("late-%s-%d", l[0], i)
			s.sendThreadReply(t, alice, room, root, lastLate)
			if resp.NextBatch == "" {
				break
			}
			from = resp.NextBatch
		}
		MustEqualStrings(t, "thread replies dir=b while replies arrive", bodies(walked), rev)

		// Default direction is backwards (newest first), per spec and Synapse.
		def := bob.MustDo(t, "GET", CS("v1", "rooms", string(room), "relations", string(root), "m.thread"), nil, WithQuery("limit", "1"))
		MatchJSON(t, "relations default dir", def, KeyEqual("chunk.0.content.body", lastLate), KeyNonEmptyString("next_batch"))
		for _, ev := range fwd {
			if err := ev.Content.ParseRaw(ev.Type); err != nil {
				t.Fatalf("parsing reply %s: %v", ev.ID, err)
			}
			rel := ev.Content.AsMessage().RelatesTo
			if rel == nil || rel.Type != event.RelThread || rel.EventID != root {
				t.Fatalf("reply %s lost its m.thread relation: %+v", ev.ID, ev.Content.Raw)
			}
		}
	})

	t.Run("ThreadsListNewestActivityFirst", func(t *testing.T) {
		t.Parallel()
		alice, room := s.aliceAlone(t, "thr")
		l := s.label(t, 4)
		r1 := s.sendText(t, alice, room, l[0])
		r2 := s.sendText(t, alice, room, l[1])
		r3 := s.sendText(t, alice, room, l[2])
		s.sendText(t, alice, room, l[3]) // a plain message: not a thread
		s.sendThreadReply(t, alice, room, r1, "r1-a")
		s.sendThreadReply(t, alice, room, r2, "r2-a")
		s.sendThreadReply(t, alice, room, r3, "r3-a")
		last := s.sendThreadReply(t, alice, room, r1, "r1-b")

		want := []string{string(r1), string(r3), string(r2)}
		roots := awaitThreads(t, alice, room, 1, "threads list newest activity first", want)
		// Each root carries its bundled thread summary.
		summary := roots[0].Get("unsigned.m\\.relations.m\\.thread")
		MatchJSON(t, "bundled m.thread on the /threads root", summary,
			KeyEqual("count", 2), KeyEqual("latest_event.event_id", string(last)), KeyEqual("latest_event.content.body", "r1-b"))
	})

	t.Run("ThreadsWalkWhileThreadsAreBumped", func(t *testing.T) {
		t.Parallel()
		alice, room := s.aliceAlone(t, "bump")
		l := s.label(t, 4)
		var roots []id.EventID
		for _, b := range l {
			r := s.sendText(t, alice, room, b)
			s.sendThreadReply(t, alice, room, r, "reply-"+b)
			roots = append(roots, r)
		}
		res := alice.MustDo(t, "GET", CS("v1", "rooms", string(room), "threads"), nil, WithQuery("limit", "2"))
		first := jsonEventIDs(res.Get("chunk").Array())
		MustEqualStrings(t, "first /threads page", first, []string{string(roots[3]), string(roots[2])})
		next := res.Get("next_batch").String()
		if next == "" {
			t.Fatalf("first /threads page of 4 threads has no next_batch: %s", res.Raw)
		}
		// Bump a thread already seen and one not yet seen. Synapse's token is a position in
		// "latest activity" order: the walk goes on below it, so a bumped thread is never
		// repeated, and one bumped before it was reached moves above the token and is not
		// returned. A gapless recent-threads view can therefore not rely on /threads paging
		// alone while threads are active.
		s.sendThreadReply(t, alice, room, roots[2], "bump-seen")
		s.sendThreadReply(t, alice, room, roots[0], "bump-unseen")
		rest := alice.MustDo(t, "GET", CS("v1", "rooms", string(room), "threads"), nil, WithQuery("limit", "10"), WithQuery("from", next))
		second := jsonEventIDs(rest.Get("chunk").Array())
		MustEqualStrings(t, "second /threads page after bumps", second, []string{string(roots[1])})
		// A fresh walk shows the new order.
		ids, _ := threadsPages(t, alice, room, 10)
		MustEqualStrings(t, "fresh /threads walk", ids, []string{string(roots[0]), string(roots[2]), string(roots[3]), string(roots[1])})
	})

	t.Run("CustomEventsInThreads", func(t *testing.T) {
		t.Parallel()
		alice, room := s.aliceAlone(t, "custthr")
		l := s.label(t, 1)
		root := s.sendText(t, alice, room, l[0])
		reply := s.sendThreadReply(t, alice, room, root, "reply")
		// The daemon's /clear marker and task results are custom event types in the thread.
		reset := s.send(t, alice, room, zevent.EventSessionReset, map[string]any{
			"m.relates_to": map[string]any{"rel_type": "m.thread", "event_id": root},
		})
		rels := relationsPages(t, alice, room, root, mautrix.DirectionForward, 10)
		MustEqualStrings(t, "thread relations of every type", eventIDs(rels), []string{string(reply), string(reset)})
		if rels[1].Type.Type != zevent.EventSessionReset.Type {
			t.Fatalf("relations returned type %q for the reset marker", rels[1].Type.Type)
		}
		// Synapse counts every event in the thread and makes the custom one the latest.
		awaitSummary(t, alice, room, root, 2, reset, "bundled aggregation with a custom event")
		// Relations filtered by event type, as the daemon reads only messages in a thread.
		typed := alice.MustDo(t, "GET", CS("v1", "rooms", string(room), "relations", string(root), "m.thread", "m.room.message"), nil)
		got := jsonEventIDs(typed.Get("chunk").Array())
		MustEqualStrings(t, "relations filtered to m.room.message", got, []string{string(reply)})
	})

	t.Run("BundledThreadAggregation", func(t *testing.T) {
		t.Parallel()
		alice, bob, room := s.aliceAndBob(t, "agg", "aggb")
		l := s.label(t, 1)
		root := s.sendText(t, alice, room, l[0])
		s.sendThreadReply(t, bob, room, root, "one")
		s.sendThreadReply(t, alice, room, root, "two")
		last := s.sendThreadReply(t, bob, room, root, "three")

		checks := []Check{KeyEqual("count", 3), KeyEqual("latest_event.event_id", string(last)),
			KeyEqual("latest_event.sender", string(bob.UserID)), KeyEqual("latest_event.content.body", "three")}
		const path = "unsigned.m\\.relations.m\\.thread"
		eventually(t, 10*time.Second, "bundled aggregation on /event", func() (bool, string) {
			ev := alice.MustDo(t, "GET", CS("v3", "rooms", string(room), "event", string(root)), nil)
			for _, c := range checks {
				if err := c(ev.Get(path)); err != nil {
					return false, err.Error() + " in " + ev.Raw
				}
			}
			return true, ""
		})

		// Replies are ordinary timeline events too: the daemon's room history reads them from
		// /messages with their relation intact.
		hist := page(t, bob, room, "", mautrix.DirectionForward, onlyMessages, 10)
		MustEqualStrings(t, "room history with thread replies", bodies(hist.Chunk), []string{l[0], "one", "two", "three"})
		for _, ev := range hist.Chunk[1:] {
			if rel := ev.Content.AsMessage().RelatesTo; rel == nil || rel.GetThreadParent() != root {
				t.Fatalf("reply %s in /messages lost its thread relation: %v", ev.ID, ev.Content.Raw)
			}
		}

		// The daemon reads roots from /messages pages, so the bundle must be there too.
		filter := `{"types":["m.room.message"]}`
		msgs := bob.MustDo(t, "GET", CS("v3", "rooms", string(room), "messages"), nil,
			WithQuery("dir", "f"), WithQuery("limit", "10"), WithQuery("filter", filter))
		var found gjson.Result
		for _, ev := range msgs.Get("chunk").Array() {
			if ev.Get("event_id").String() == string(root) {
				found = ev
			}
		}
		if !found.Exists() {
			t.Fatalf("root %s missing from /messages: %s", root, msgs.Raw)
		}
		MatchJSON(t, "bundled m.thread on the /messages root", found.Get(path), checks...)

		// mautrix must expose it to the daemon as parsed relations.
		resp, err := bob.Mautrix(t).Messages(context.Background(), room, "", "", mautrix.DirectionForward, onlyMessages, 10)
		if err != nil {
			t.Fatalf("mautrix Messages: %v", err)
		}
		for _, ev := range resp.Chunk {
			if ev.ID != root {
				continue
			}
			thread := ev.Unsigned.Relations.GetThread()
			if thread == nil || thread.Count != 3 || thread.LatestEvent == nil || thread.LatestEvent.ID != last {
				t.Fatalf("mautrix parsed thread aggregation %+v on root %s; want count 3, latest %s", thread, root, last)
			}
		}
	})
}
