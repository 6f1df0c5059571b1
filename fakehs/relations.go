package fakehs

import (
	"encoding/json"
	"net/http"
	"sort"

	"maunium.net/go/mautrix/id"
)

// handleRelations serves /v1/rooms/{id}/relations/{event}[/{relType}[/{eventType}]]
// from the per-event children index, paginated by room tokens.
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
	f := &eventFilter{}
	if s.cfg.profile.IgnoreRelationFilters {
		// A server without relation filters serves every child.
	} else if rt := r.PathValue("relType"); rt != "" {
		f.RelTypes = []string{rt}
	}
	if et := r.PathValue("eventType"); et != "" && !s.cfg.profile.IgnoreRelationFilters {
		f.Types = &[]string{et}
	}
	recurse := r.URL.Query().Get("recurse") == "true"
	children := rm.children[parent.ID]
	if recurse {
		children = rm.descendants(parent.ID, f)
	}
	p, err := s.readPagination(r, rm, children, 5, true)
	if err != nil {
		return nil, err
	}
	p.capAt(upto)
	pg := p.walk(children, f)
	resp := map[string]any{"chunk": s.renderAll(pg.events, c)}
	if recurse {
		// Synapse reports its depth limit, not the depth it met.
		resp["recursion_depth"] = maxRelationDepth
	}
	if !pg.exhausted {
		resp["next_batch"] = s.roomToken(rm.ID, pg.next)
	}
	if r.URL.Query().Get("from") != "" {
		resp["prev_batch"] = r.URL.Query().Get("from")
	}
	return resp, nil
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

// maxRelationDepth is how deep /relations?recurse=true follows relations of
// relations, as in Synapse.
const maxRelationDepth = 3

// descendants is every event relating to parent, directly or through up to
// maxRelationDepth relations that each pass f, in stream order.
func (rm *room) descendants(parent id.EventID, f *eventFilter) []*evt {
	var out []*evt
	level := []id.EventID{parent}
	for depth := 0; depth < maxRelationDepth && len(level) > 0; depth++ {
		var next []id.EventID
		for _, p := range level {
			for _, c := range rm.children[p] {
				if f.matches(c) {
					out = append(out, c)
					next = append(next, c.ID)
				}
			}
		}
		level = next
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Stream < out[j].Stream })
	return out
}
