package conformance

import (
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// relatesTo is the content of an event relating to parent with relType.
func relatesTo(relType string, parent id.EventID, body string) map[string]any {
	c := map[string]any{"m.relates_to": map[string]any{"rel_type": relType, "event_id": parent}}
	if body != "" {
		c["msgtype"], c["body"] = "m.text", body
	}
	return c
}

// testRelations pins relation bundles and /relations?recurse=true (recurse.go) as Synapse
// serves them.
func (s *suite) testRelations(t *testing.T) {
	t.Parallel()

	t.Run("ReferenceBundledNextToThread", func(t *testing.T) {
		t.Parallel()
		alice, room := s.aliceAlone(t, "refbundle")
		root := s.sendText(t, alice, room, s.label(t, 1)[0])
		ref1 := s.send(t, alice, room, event.EventMessage, relatesTo("m.reference", root, "ref one"))
		reply := s.sendThreadReply(t, alice, room, root, "in the thread")
		ref2 := s.send(t, alice, room, event.EventMessage, relatesTo("m.reference", root, "ref two"))
		// Synapse bundles the ids of the references, oldest first, beside the thread summary.
		check := func(what string, ev gjson.Result) {
			t.Helper()
			rels := ev.Get("unsigned.m\\.relations")
			MustEqualStrings(t, what+": bundled references", jsonEventIDs(rels.Get("m\\.reference.chunk").Array()), []string{string(ref1), string(ref2)})
			MatchJSON(t, what+": bundled thread", rels, KeyEqual("m\\.thread.count", 1), KeyEqual("m\\.thread.latest_event.event_id", string(reply)))
		}
		eventually(t, 10*time.Second, "the references to be bundled", func() (bool, string) {
			ev := alice.MustDo(t, "GET", CS("v3", "rooms", string(room), "event", string(root)), nil)
			n := len(ev.Get("unsigned.m\\.relations.m\\.reference.chunk").Array())
			return n == 2, ev.Raw
		})
		check("GET /event", alice.MustDo(t, "GET", CS("v3", "rooms", string(room), "event", string(root)), nil))
		msgs := alice.MustDo(t, "GET", CS("v3", "rooms", string(room), "messages"), nil, WithQuery("dir", "b"), WithQuery("limit", "10"))
		for _, ev := range msgs.Get("chunk").Array() {
			if ev.Get("event_id").String() == string(root) {
				check("/messages", ev)
			}
		}
	})

	t.Run("Recurse", s.testRecurse)
}
