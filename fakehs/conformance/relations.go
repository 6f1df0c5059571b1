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

// testRelations pins relation bundles and /relations?recurse=true as Synapse serves them.
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

	t.Run("RecurseFollowsRelationsOfRelations", func(t *testing.T) {
		t.Parallel()
		alice, room := s.aliceAlone(t, "recurse")
		root := s.sendText(t, alice, room, s.label(t, 1)[0])
		ref := s.send(t, alice, room, event.EventMessage, relatesTo("m.reference", root, "ref"))
		reply := s.sendThreadReply(t, alice, room, root, "reply")
		reaction := s.send(t, alice, room, event.EventReaction, map[string]any{
			"m.relates_to": map[string]any{"rel_type": "m.annotation", "event_id": reply, "key": "👍"}})
		refOfRef := s.send(t, alice, room, event.EventMessage, relatesTo("m.reference", ref, "ref of ref"))
		get := func(path string, q ...ReqOpt) gjson.Result {
			return alice.MustDo(t, "GET", path, nil, append(q, WithQuery("limit", "10"))...)
		}
		base := CS("v1", "rooms", string(room), "relations", string(root))
		// Without recurse only direct children, and no recursion_depth.
		direct := get(base, WithQuery("dir", "f"))
		MustEqualStrings(t, "direct relations", jsonEventIDs(direct.Get("chunk").Array()), []string{string(ref), string(reply)})
		if direct.Get("recursion_depth").Exists() {
			t.Errorf("recursion_depth without recurse: %s", direct.Raw)
		}
		// With recurse Synapse adds relations of relations (up to 3 levels), in stream order
		// either way, and reports its depth limit, 3.
		all := get(base, WithQuery("dir", "f"), WithQuery("recurse", "true"))
		MustEqualStrings(t, "relations with recurse, dir=f", jsonEventIDs(all.Get("chunk").Array()),
			[]string{string(ref), string(reply), string(reaction), string(refOfRef)})
		MatchJSON(t, "recursion depth", all, KeyEqual("recursion_depth", 3))
		back := get(base, WithQuery("recurse", "true"))
		MustEqualStrings(t, "relations with recurse, dir=b", jsonEventIDs(back.Get("chunk").Array()),
			[]string{string(refOfRef), string(reaction), string(reply), string(ref)})
		// A relation type applies at every level.
		refs := get(base+"/m.reference", WithQuery("dir", "f"), WithQuery("recurse", "true"))
		MustEqualStrings(t, "m.reference relations with recurse", jsonEventIDs(refs.Get("chunk").Array()), []string{string(ref), string(refOfRef)})
	})
}
