package conformance

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"
)

// redact redacts evt in room as c through the client-server API and returns the response.
func (s *suite) redact(t testing.TB, c *Client, room id.RoomID, evt id.EventID, txn string) *Response {
	t.Helper()
	return c.Do(t, "PUT", CS("v3", "rooms", string(room), "redact", string(evt), txn), map[string]any{})
}

// threadSummary is the bundled m.thread of root as GET /event shows it (not Exists when none).
func threadSummary(t testing.TB, c *Client, room id.RoomID, root id.EventID) gjson.Result {
	t.Helper()
	ev := c.MustDo(t, "GET", CS("v3", "rooms", string(room), "event", string(root)), nil)
	return ev.Get("unsigned.m\\.relations.m\\.thread")
}

// summaryIs says whether sum counts n replies with latest as its latest event.
func summaryIs(sum gjson.Result, n int, latest id.EventID) (bool, string) {
	ok := sum.Get("count").Int() == int64(n) && sum.Get("latest_event.event_id").String() == string(latest)
	return ok, fmt.Sprintf("summary %s, want count %d and latest %s", sum.Raw, n, latest)
}

// mustRedact redacts evt in room as c with a fresh txn id and fails unless the homeserver
// answers 200.
func (s *suite) mustRedact(t testing.TB, c *Client, room id.RoomID, evt id.EventID) {
	t.Helper()
	MustStatus(t, s.redact(t, c, room, evt, "conf-"+randomID(6)), http.StatusOK, "")
}

// awaitSummary waits until GET /event shows root's bundled thread summary counting n replies
// with latest as its latest event.
func awaitSummary(t testing.TB, c *Client, room id.RoomID, root id.EventID, n int, latest id.EventID, what string) {
	t.Helper()
	eventually(t, 10*time.Second, what, func() (bool, string) {
		return summaryIs(threadSummary(t, c, room, root), n, latest)
	})
}

// testRedactions pins what a redaction does to threads, as Synapse does it: a redacted event
// loses its relation, so a redacted reply leaves its thread everywhere the thread is shown.
func (s *suite) testRedactions(t *testing.T) {
	t.Parallel()

	t.Run("RedactedReplyLeavesItsThread", func(t *testing.T) {
		t.Parallel()
		alice, bob, room := s.aliceAndBob(t, "redthr", "redthrb")
		l := s.label(t, 1)
		root := s.sendText(t, alice, room, l[0])
		r1 := s.sendThreadReply(t, bob, room, root, "one")
		r2 := s.sendThreadReply(t, alice, room, root, "two")
		r3 := s.sendThreadReply(t, alice, room, root, "three")
		awaitSummary(t, alice, room, root, 3, r3, "the summary to count three replies")

		// Synapse drops the redacted reply from /relations (no content-less stand-in), counts
		// one reply fewer and makes the reply before it the latest, on the root and in /threads.
		s.mustRedact(t, alice, room, r3)
		awaitSummary(t, bob, room, root, 2, r2, "the summary to fall back to the second reply")
		rels := relationsPages(t, bob, room, root, mautrix.DirectionForward, 10)
		MustEqualStrings(t, "thread replies after redacting the latest", eventIDs(rels), []string{string(r1), string(r2)})
		_, roots := threadsPages(t, bob, room, 10)
		if len(roots) != 1 {
			t.Fatalf("/threads after a redaction lists %d roots, want 1", len(roots))
		}
		if ok, detail := summaryIs(roots[0].Get("unsigned.m\\.relations.m\\.thread"), 2, r2); !ok {
			t.Fatalf("/threads root: %s", detail)
		}

		// A reply in the middle goes the same way; the latest stays.
		s.mustRedact(t, bob, room, r1)
		awaitSummary(t, alice, room, root, 1, r2, "the summary to count one reply")
		rels = relationsPages(t, alice, room, root, mautrix.DirectionBackward, 10)
		MustEqualStrings(t, "thread replies after redacting the first", eventIDs(rels), []string{string(r2)})

		// With its last reply redacted the root is a plain message again: no summary, and it
		// leaves /threads.
		s.mustRedact(t, alice, room, r2)
		eventually(t, 10*time.Second, "the summary to go", func() (bool, string) {
			sum := threadSummary(t, alice, room, root)
			return !sum.Exists(), "summary " + sum.Raw
		})
		if ids, _ := threadsPages(t, alice, room, 10); len(ids) != 0 {
			t.Fatalf("/threads still lists %q after every reply was redacted", ids)
		}
		if rels := relationsPages(t, alice, room, root, mautrix.DirectionForward, 10); len(rels) != 0 {
			t.Fatalf("relations of a thread whose replies are all redacted: %q", eventIDs(rels))
		}
	})

	t.Run("RedactedLatestReplyMovesTheThreadBack", func(t *testing.T) {
		t.Parallel()
		alice, room := s.aliceAlone(t, "redorder")
		l := s.label(t, 2)
		a := s.sendText(t, alice, room, l[0])
		b := s.sendText(t, alice, room, l[1])
		s.sendThreadReply(t, alice, room, a, "a1")
		s.sendThreadReply(t, alice, room, b, "b1")
		a2 := s.sendThreadReply(t, alice, room, a, "a2")
		want := []string{string(a), string(b)}
		awaitThreads(t, alice, room, 10, "thread a to lead /threads", want)
		// Synapse orders /threads by the latest reply left: redacting a's newest reply puts
		// it behind b again.
		s.mustRedact(t, alice, room, a2)
		want = []string{string(b), string(a)}
		awaitThreads(t, alice, room, 10, "thread b to lead /threads", want)
	})

	t.Run("RedactingAnUnknownEvent", func(t *testing.T) {
		t.Parallel()
		alice, room := s.aliceAlone(t, "redunknown")
		other := s.createRoom(t, alice, nil)
		l := s.label(t, 2)
		before := s.sendText(t, alice, room, l[0])
		// Synapse accepts a redaction of an event it does not know (200 with an event id, the
		// same one for a repeated txn id) but shows that redaction nowhere: not in /messages,
		// not by GET /event.
		txn := "conf-" + randomID(6)
		unknown := id.EventID("$conformance-no-such-event-" + s.runID)
		res := s.redact(t, alice, room, unknown, txn)
		MatchResponse(t, "redacting an unknown event", res, KeyNonEmptyString("event_id"))
		redID := res.JSON().Get("event_id").String()
		again := s.redact(t, alice, room, unknown, txn)
		MatchResponse(t, "the same redaction again", again, KeyEqual("event_id", redID))
		ExpectStatus(t, alice.Do(t, "GET", CS("v3", "rooms", string(room), "event", redID), nil), http.StatusNotFound, "M_NOT_FOUND")
		s.sendText(t, alice, room, l[1])
		resp := page(t, alice, room, "", mautrix.DirectionBackward, nil, 3)
		got := eventIDs(resp.Chunk)
		if slices.Contains(got, redID) || len(got) < 2 || got[1] != string(before) {
			t.Fatalf("newest events after redacting an unknown event: %q; want the two messages next to each other, no %s", got, redID)
		}
		// An event of another room is refused instead: 400 M_UNKNOWN.
		foreign := s.sendText(t, alice, other, "foreign-"+l[0])
		ExpectStatus(t, s.redact(t, alice, room, foreign, "conf-"+randomID(6)), http.StatusBadRequest, "M_UNKNOWN")
		ev := alice.MustDo(t, "GET", CS("v3", "rooms", string(other), "event", string(foreign)), nil)
		MatchJSON(t, "the foreign event after the refused redaction", ev, KeyEqual("content.body", "foreign-"+l[0]))
	})
}
