package conformance

import (
	"net/http"
	"slices"
	"testing"

	"github.com/tidwall/gjson"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// relTree is a room whose events the test named, read back through /relations by names so a
// failure shows which event is missing or out of place rather than two lists of ids.
type relTree struct {
	s     *suite
	c     *Client
	room  id.RoomID
	names map[string]string // event id → name
}

func (s *suite) newRelTree(t *testing.T, name string) *relTree {
	t.Helper()
	alice, room := s.aliceAlone(t, name)
	return &relTree{s: s, c: alice, room: room, names: map[string]string{}}
}

// add sends content of type evType and names the event.
func (r *relTree) add(t *testing.T, name string, evType event.Type, content map[string]any) id.EventID {
	t.Helper()
	evt := r.s.send(t, r.c, r.room, evType, content)
	r.names[string(evt)] = name
	return evt
}

func (r *relTree) text(t *testing.T, name string) id.EventID {
	t.Helper()
	return r.add(t, name, event.EventMessage, map[string]any{"msgtype": "m.text", "body": name})
}

func (r *relTree) rel(t *testing.T, name, relType string, parent id.EventID) id.EventID {
	t.Helper()
	return r.add(t, name, event.EventMessage, relatesTo(relType, parent, name))
}

func (r *relTree) react(t *testing.T, name string, evType event.Type, parent id.EventID) id.EventID {
	t.Helper()
	// The key is the name: Synapse refuses a second annotation with the same key, type and sender.
	return r.add(t, name, evType, map[string]any{
		"m.relates_to": map[string]any{"rel_type": "m.annotation", "event_id": parent, "key": name}})
}

func (r *relTree) edit(t *testing.T, name string, parent id.EventID) id.EventID {
	t.Helper()
	return r.add(t, name, event.EventMessage, map[string]any{
		"msgtype": "m.text", "body": "* " + name,
		"m.new_content": map[string]any{"msgtype": "m.text", "body": name},
		"m.relates_to":  map[string]any{"rel_type": "m.replace", "event_id": parent}})
}

// path is /relations of parent, narrowed by a rel_type and an event type when given.
func (r *relTree) path(parent id.EventID, filters ...string) string {
	return CS("v1", append([]string{"rooms", string(r.room), "relations", string(parent)}, filters...)...)
}

// named names the events of a chunk; an event the test did not send shows as its id.
func (r *relTree) named(chunk gjson.Result) []string {
	out := []string{}
	for _, ev := range chunk.Array() {
		evt := ev.Get("event_id").String()
		if n, ok := r.names[evt]; ok {
			evt = n
		}
		out = append(out, evt)
	}
	return out
}

// expect reads path with q and records a failure unless its chunk is want, in order.
func (r *relTree) expect(t *testing.T, what, path string, want []string, q ...ReqOpt) gjson.Result {
	t.Helper()
	res := r.c.MustDo(t, "GET", path, nil, q...)
	ExpectEqualStrings(t, what, r.named(res.Get("chunk")), want)
	return res
}

// pages reads path with q and follows next_batch until a page has none, and names each page's
// events. A page without next_batch is the last: a homeserver that hands out one more token
// before an empty page shows that page as [].
func (r *relTree) pages(t *testing.T, path string, q ...ReqOpt) [][]string {
	t.Helper()
	var out [][]string
	from := ""
	for range 20 {
		opts := q
		if from != "" {
			opts = append(append([]ReqOpt{}, q...), WithQuery("from", from))
		}
		res := r.c.MustDo(t, "GET", path, nil, opts...)
		out = append(out, r.named(res.Get("chunk")))
		if from = res.Get("next_batch").String(); from == "" {
			return out
		}
	}
	t.Fatalf("%s: still a next_batch after 20 pages: %q", path, out)
	return nil
}

func mustEqualPages(t *testing.T, what string, got, want [][]string) {
	t.Helper()
	flat := func(pp [][]string) []string {
		var out []string
		for _, p := range pp {
			out = append(out, "|")
			out = append(out, p...)
		}
		return out
	}
	ExpectEqualStrings(t, what+" (pages split by |)", flat(got), flat(want))
}

// testRecurse pins /relations?recurse=true as Synapse serves it. Synapse follows every
// relation from the event down to five relations deep (the event's own relations and four
// more levels) whatever the filters say, and only then applies the rel_type and event_type
// filters, to each event's own relation and type, ordered and paged like direct relations.
// Here Synapse and the spec part: the spec (v1.10, MSC3981) leaves out an event whose only
// path to the given event runs through an event the filter does not match, so by the spec a
// reaction on an m.reference is no m.annotation relation of the reference's parent; Synapse
// returns it, and the suite follows Synapse. Its recursion_depth says 3 whatever the depth.
func (s *suite) testRecurse(t *testing.T) {
	t.Parallel()

	t.Run("FollowsRelationsOfRelations", func(t *testing.T) {
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
		// With recurse Synapse adds relations of relations, in stream order either way, and
		// reports its depth limit as 3.
		all := get(base, WithQuery("dir", "f"), WithQuery("recurse", "true"))
		MustEqualStrings(t, "relations with recurse, dir=f", jsonEventIDs(all.Get("chunk").Array()),
			[]string{string(ref), string(reply), string(reaction), string(refOfRef)})
		MatchJSON(t, "recursion depth", all, KeyEqual("recursion_depth", 3))
		back := get(base, WithQuery("recurse", "true"))
		MustEqualStrings(t, "relations with recurse, dir=b", jsonEventIDs(back.Get("chunk").Array()),
			[]string{string(refOfRef), string(reaction), string(reply), string(ref)})
		refs := get(base+"/m.reference", WithQuery("dir", "f"), WithQuery("recurse", "true"))
		MustEqualStrings(t, "m.reference relations with recurse", jsonEventIDs(refs.Get("chunk").Array()), []string{string(ref), string(refOfRef)})
	})

	// Reactions (and an edit, and a chain of references) hanging off an m.reference, beside a
	// thread: what each filter, direction and page size of a recursive read returns.
	t.Run("ThroughAReference", func(t *testing.T) {
		t.Parallel()
		r := s.newRelTree(t, "recurseref")
		custom := event.Type{Type: "dev.zooid.conformance", Class: event.MessageEventType}
		root := r.text(t, s.label(t, 1)[0])
		t1 := r.rel(t, "t1", "m.thread", root)
		ref := r.rel(t, "ref", "m.reference", root)
		r.react(t, "a1", event.EventReaction, ref)
		r.rel(t, "t2", "m.thread", root)
		r.react(t, "a2", event.EventReaction, ref)
		r.edit(t, "edit", ref)
		r.react(t, "a3", event.EventReaction, root)
		r.react(t, "at1", event.EventReaction, t1)
		// A chain of references: r2 is two relations from the root, r7 seven.
		chain := []id.EventID{ref}
		for _, n := range []string{"r2", "r3", "r4", "r5", "r6", "r7"} {
			chain = append(chain, r.rel(t, n, "m.reference", chain[len(chain)-1]))
		}
		r.react(t, "ar2", event.EventReaction, chain[1])
		r.react(t, "ac", custom, ref)

		base := r.path(root)
		all := []string{"t1", "ref", "a1", "t2", "a2", "edit", "a3", "at1", "r2", "r3", "r4", "r5", "ar2", "ac"}
		f, b, many := WithQuery("dir", "f"), WithQuery("dir", "b"), WithQuery("limit", "50")
		rec := WithQuery("recurse", "true")

		r.expect(t, "direct", base, []string{"t1", "ref", "t2", "a3"}, f, many)
		r.expect(t, "recurse=false", base, []string{"t1", "ref", "t2", "a3"}, f, many, WithQuery("recurse", "false"))
		// r6 and r7 are six and seven relations away: past Synapse's depth.
		got := r.expect(t, "recurse, dir=f", base, all, f, many, rec)
		MatchJSON(t, "recursion depth", got, KeyEqual("recursion_depth", 3))
		back := slices.Clone(all)
		slices.Reverse(back)
		r.expect(t, "recurse, dir=b", base, back, b, many, rec)
		r.expect(t, "the unstable recurse parameter", base, all, f, many, WithQuery("org.matrix.msc3981.recurse", "true"))
		// The filters pick from everything the recursion met, through any relation.
		r.expect(t, "recurse, m.annotation", r.path(root, "m.annotation"), []string{"a1", "a2", "a3", "at1", "ar2", "ac"}, f, many, rec)
		r.expect(t, "recurse, m.annotation of m.reaction", r.path(root, "m.annotation", "m.reaction"),
			[]string{"a1", "a2", "a3", "at1", "ar2"}, f, many, rec)
		r.expect(t, "recurse, m.reference", r.path(root, "m.reference"), []string{"ref", "r2", "r3", "r4", "r5"}, f, many, rec)
		r.expect(t, "recurse, m.thread", r.path(root, "m.thread"), []string{"t1", "t2"}, f, many, rec)
		r.expect(t, "recurse, m.replace", r.path(root, "m.replace"), []string{"edit"}, f, many, rec)
		r.expect(t, "m.annotation, direct", r.path(root, "m.annotation"), []string{"a3"}, f, many)
		// The depth counts from the event asked about: from ref, r6 is five relations away.
		r.expect(t, "recurse from the reference", r.path(ref), []string{"a1", "a2", "edit", "r2", "r3", "r4", "r5", "r6", "ar2", "ac"}, f, many, rec)

		// Without dir and limit: the newest five, and a next_batch.
		first := r.expect(t, "recurse, defaults", base, []string{"ac", "ar2", "r5", "r4", "r3"}, rec)
		MatchJSON(t, "recurse, defaults", first, KeyNonEmptyString("next_batch"))
		// Pages hold limit matching events; a page is the last (no next_batch) once no
		// matching event is left, even when it is full.
		mustEqualPages(t, "recurse, dir=f, limit=4", r.pages(t, base, f, rec, WithQuery("limit", "4")),
			[][]string{{"t1", "ref", "a1", "t2"}, {"a2", "edit", "a3", "at1"}, {"r2", "r3", "r4", "r5"}, {"ar2", "ac"}})
		mustEqualPages(t, "recurse, dir=b, limit=4", r.pages(t, base, b, rec, WithQuery("limit", "4")),
			[][]string{{"ac", "ar2", "r5", "r4"}, {"r3", "r2", "at1", "a3"}, {"edit", "a2", "t2", "a1"}, {"ref", "t1"}})
		mustEqualPages(t, "recurse, m.annotation, dir=f, limit=3", r.pages(t, r.path(root, "m.annotation"), f, rec, WithQuery("limit", "3")),
			[][]string{{"a1", "a2", "a3"}, {"at1", "ar2", "ac"}})
		mustEqualPages(t, "recurse, m.annotation, dir=b, limit=1", r.pages(t, r.path(root, "m.annotation"), b, rec, WithQuery("limit", "1")),
			[][]string{{"ac"}, {"ar2"}, {"at1"}, {"a3"}, {"a2"}, {"a1"}})
		mustEqualPages(t, "m.thread, direct, dir=f, limit=1", r.pages(t, r.path(root, "m.thread"), f, WithQuery("limit", "1")),
			[][]string{{"t1"}, {"t2"}})

		// recurse is a boolean parameter: only "true" and "false" (either spelling) pass.
		for _, q := range [][]ReqOpt{
			{WithQuery("recurse", "1")},
			{WithQuery("recurse", "")},
			{WithQuery("recurse", "True")},
			{WithQuery("recurse", "false"), WithQuery("org.matrix.msc3981.recurse", "yes")},
		} {
			ExpectStatus(t, r.c.Do(t, "GET", base, nil, q...), http.StatusBadRequest, "M_INVALID_PARAM")
		}
	})

	// A redacted event loses its own relation, so a recursive read no longer reaches it or what
	// hangs off it. Relations of a redacted event leave out every m.replace (its own edits and,
	// with recurse, those of anything below it), and Synapse drops them from a page after
	// fetching limit+1 events: a page can come back short and without next_batch although
	// events are left (a Synapse quirk the suite pins, since fakehs follows Synapse).
	// Every read comes after the redactions: Synapse caches /relations per event and a
	// redaction refreshes the cache of its parent only, so a read from the root made before
	// redacting x would go on showing x.
	t.Run("OfARedactedEvent", func(t *testing.T) {
		t.Parallel()
		r := s.newRelTree(t, "recurseredact")
		root := r.text(t, s.label(t, 1)[0])
		r.react(t, "a", event.EventReaction, root)
		r.edit(t, "e", root)
		r.react(t, "b", event.EventReaction, root)
		ref := r.rel(t, "ref", "m.reference", root)
		r.edit(t, "eref", ref)
		r.react(t, "aref", event.EventReaction, ref)
		x := r.rel(t, "x", "m.reference", ref)
		r.react(t, "ax", event.EventReaction, x)
		r.s.mustRedact(t, r.c, r.room, x)
		r.s.mustRedact(t, r.c, r.room, root)

		f, b, many := WithQuery("dir", "f"), WithQuery("dir", "b"), WithQuery("limit", "50")
		rec := WithQuery("recurse", "true")
		r.expect(t, "direct", r.path(root), []string{"a", "b", "ref"}, f, many)
		r.expect(t, "recurse", r.path(root), []string{"a", "b", "ref", "aref"}, f, many, rec)
		r.expect(t, "m.replace", r.path(root, "m.replace"), []string{}, f, many, rec)
		// The reference is not redacted: its edit shows; x, redacted, is gone with its reaction.
		r.expect(t, "recurse from the reference", r.path(ref), []string{"eref", "aref"}, f, many, rec)
		// x's reaction still relates to x.
		r.expect(t, "relations of the redacted x", r.path(x), []string{"ax"}, f, many)
		// Pages of one: [a, e] fetched, e dropped, one left: no next_batch, b and ref unread.
		mustEqualPages(t, "recurse, dir=f, limit=1", r.pages(t, r.path(root), f, rec, WithQuery("limit", "1")),
			[][]string{{"a"}})
		// Backwards [ref, b] gives ref and a next_batch; then [b, e] gives b alone and ends.
		mustEqualPages(t, "direct, dir=b, limit=1", r.pages(t, r.path(root), b, WithQuery("limit", "1")),
			[][]string{{"ref"}, {"b"}})
	})
}
