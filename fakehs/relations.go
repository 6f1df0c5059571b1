package fakehs

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"sort"

	"maunium.net/go/mautrix/id"
)

// handleRelations serves /v1/rooms/{id}/relations/{event}[/{relType}[/{eventType}]]
// from the per-event children index, paginated by room tokens. With recurse it
// reads relations of relations too (descendants), and the filters pick from
// all of them afterwards, as Synapse does.
func (s *Server) handleRelations(r *http.Request, c *caller) (any, error) {
	rm, upto, err := s.historyRoom(r, c)
	if err != nil {
		return nil, err
	}
	upto = s.visibleUpto(rm, upto)
	parent := s.state.events[id.EventID(r.PathValue("eventId"))]
	if parent == nil || parent.Room != rm || parent.Stream > upto {
		// Synapse: 404 M_UNKNOWN "Unknown parent event."
		return nil, mErr(http.StatusNotFound, "M_UNKNOWN", "Unknown parent event.")
	}
	recurse, err := queryRecurse(r.URL.Query())
	if err != nil {
		return nil, err
	}
	f := &eventFilter{}
	if s.cfg.profile.IgnoreRelationFilters {
		// A server without relation filters serves every child.
	} else if rt := r.PathValue("relType"); rt != "" {
		f.RelTypes = []string{rt}
	}
	if et := r.PathValue("eventType"); et != "" && !s.cfg.profile.IgnoreRelationFilters {
		f.Types = &[]string{et}
	}
	related := rm.children[parent.ID]
	if recurse {
		related = rm.descendants(parent.ID)
	}
	p, err := s.readPagination(r, rm, related, 5, true)
	if err != nil {
		return nil, err
	}
	p.capAt(upto)
	// Synapse leaves out the edits of a redacted event, which would show what
	// it said (with recurse, the edits of anything below it too).
	chunk, next, more := relationsPage(related, p, f, parent.RedactedBy != nil)
	resp := map[string]any{"chunk": s.renderAll(chunk, c)}
	if recurse {
		// Synapse says 3 whatever depth it reached or recursed to.
		resp["recursion_depth"] = reportedRecursionDepth
	}
	if more {
		resp["next_batch"] = s.roomToken(rm.ID, next)
	}
	if r.URL.Query().Get("from") != "" {
		resp["prev_batch"] = r.URL.Query().Get("from")
	}
	return resp, nil
}

// relationsPage is one page of related (ascending Stream) as Synapse pages
// /relations: its query filters and asks for limit+1 rows, so a page holds up
// to limit events passing f and has a next token only when one more passing
// event follows; a full page with nothing matching after it is the last. The
// token is the position after the page's last event (before it, backwards).
// hideEdits drops m.replace events from those rows before they are counted,
// where Synapse drops them: a page can then come back short and without a
// token although events are left (Synapse's quirk, kept).
func relationsPage(related []*evt, p *paginationParams, f *eventFilter, hideEdits bool) (chunk []*evt, next int64, more bool) {
	peek := *p
	peek.limit = p.limit + 1
	rows := peek.walk(related, f).events
	if hideEdits {
		rows = slices.DeleteFunc(rows, func(e *evt) bool { return e.RelType == "m.replace" })
	}
	if len(rows) <= p.limit {
		return rows, 0, false
	}
	if p.limit == 0 {
		// Synapse answers limit=0 with a 500; an empty page that stays put
		// is what fakehs always served.
		return nil, p.from, true
	}
	chunk = rows[:p.limit]
	next = chunk[len(chunk)-1].Stream
	if p.backward {
		next--
	}
	return chunk, next, true
}

// queryRecurse reads ?recurse, or MSC3981's unstable name when recurse is
// absent or false, as Synapse does: each is a boolean parameter, "true" or
// "false", and any other value (an empty one too) is 400 M_INVALID_PARAM.
func queryRecurse(q url.Values) (bool, error) {
	for _, name := range []string{"recurse", "org.matrix.msc3981.recurse"} {
		v, ok := q[name]
		if !ok {
			continue
		}
		switch v[0] {
		case "true":
			return true, nil
		case "false":
		default:
			return false, errInvalidParam("Boolean query parameter '%s' must be one of ['true', 'false']", name)
		}
	}
	return false, nil
}

// handleThreads serves /v1/rooms/{id}/threads: roots ordered by latest
// activity, newest first. Tokens are positions in that order (the latest
// reply's stream position); threadOrder is kept sorted so a page starts
// with a binary search and never scans the room.
func (s *Server) handleThreads(r *http.Request, c *caller) (any, error) {
	if s.cfg.profile.NoThreads {
		return nil, mErr(http.StatusNotFound, "M_UNRECOGNIZED", "Unrecognized request")
	}
	rm, upto, err := s.readableRoom(r, c)
	if err != nil {
		return nil, err
	}
	limit, err := queryLimit(r, 5) // Synapse's default
	if err != nil {
		return nil, err
	}
	include := r.URL.Query().Get("include")
	if include != "" && include != "all" && include != "participated" {
		return nil, errInvalidParam("Unknown include %q", include)
	}
	from := rm.lastStream()
	if v := r.URL.Query().Get("from"); v != "" {
		if from, err = s.parseRoomToken(v, rm.ID); err != nil {
			return nil, err
		}
	}
	from = min(from, upto)
	order := rm.threadOrder
	i := sort.Search(len(order), func(i int) bool { return order[i].latestStream() > from }) - 1
	var chunk []*evt
	next := int64(-1)
	for ; i >= 0; i-- {
		th := order[i]
		if len(chunk) >= limit {
			next = th.latestStream()
			break
		}
		if include == "participated" && !th.Participants[c.User] {
			continue
		}
		chunk = append(chunk, th.Root)
	}
	resp := map[string]any{"chunk": s.renderAll(chunk, c)}
	if next >= 0 {
		resp["next_batch"] = s.roomToken(rm.ID, next)
	}
	return resp, nil
}

// checkRelation follows Synapse's _validate_event_relation for a new event
// with content.m.relates_to carrying a string rel_type and event_id (a bare
// m.in_reply_to is not a relation and is never checked). All refusals are
// 400 M_UNKNOWN: the parent must be a known event of the same room, and a
// thread cannot start from an event that itself has a relation, so a reply
// to a thread reply must name the thread root. The spec leaves all three
// open (it only says servers should reject invalid relations).
func (s *Server) checkRelation(rm *room, content json.RawMessage) error {
	var body struct {
		RelatesTo map[string]any `json:"m.relates_to"`
	}
	if json.Unmarshal(content, &body) != nil {
		return nil // m.relates_to that is not an object is no relation to Synapse either
	}
	relType, _ := body.RelatesTo["rel_type"].(string)
	parentID, _ := body.RelatesTo["event_id"].(string)
	if relType == "" || parentID == "" {
		return nil
	}
	parent := s.state.events[id.EventID(parentID)]
	switch {
	case parent == nil:
		return mErr(http.StatusBadRequest, "M_UNKNOWN", "Can't send relation to unknown event")
	case parent.Room != rm:
		return mErr(http.StatusBadRequest, "M_UNKNOWN", "Relations must be in the same room")
	case relType == "m.thread" && parent.RelType != "":
		return mErr(http.StatusBadRequest, "M_UNKNOWN", "Cannot start threads from an event with a relation")
	}
	return nil
}

// maxRelationDepth is how many relations deep /relations?recurse=true reaches:
// the event's own relations and four levels below them, as Synapse's recursive
// query does (it numbers the levels 0 to 4, following on while depth <= 3).
const maxRelationDepth = 5

// reportedRecursionDepth is the recursion_depth Synapse reports, 3, fewer
// than the levels it reaches.
const reportedRecursionDepth = 3

// descendants is every event relating to parent, directly or through up to
// maxRelationDepth-1 intermediate relations of any type, in stream order.
// Synapse follows every relation and filters only what it found, so a
// reaction on an m.reference is an m.annotation relation of the reference's
// parent; the spec (MSC3981) would leave it out. A redacted event has left its
// parent's children (unindexRelation), so what hangs off it is not reached.
func (rm *room) descendants(parent id.EventID) []*evt {
	var out []*evt
	level := rm.children[parent]
	for depth := 0; depth < maxRelationDepth && len(level) > 0; depth++ {
		out = append(out, level...)
		var next []*evt
		for _, c := range level {
			next = append(next, rm.children[c.ID]...)
		}
		level = next
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Stream < out[j].Stream })
	return out
}
