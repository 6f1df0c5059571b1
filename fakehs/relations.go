package fakehs

import (
	"net/http"
	"sort"

	"maunium.net/go/mautrix/id"
)

// handleRelations serves /v1/rooms/{id}/relations/{event}[/{relType}[/{eventType}]]
// from the per-event children index, paginated by room tokens.
func (s *Server) handleRelations(r *http.Request, c *caller) (any, error) {
	rm, upto, err := s.readableRoom(r, c)
	if err != nil {
		return nil, err
	}
	parent := s.state.events[id.EventID(r.PathValue("eventId"))]
	if parent == nil || parent.Room != rm || parent.Stream > upto {
		// Synapse: 404 M_UNKNOWN "Unknown parent event."
		return nil, mErr(http.StatusNotFound, "M_UNKNOWN", "Unknown parent event.")
	}
	children := rm.children[parent.ID]
	p, err := s.readPagination(r, rm, children, 5)
	if err != nil {
		return nil, err
	}
	f := &eventFilter{}
	if rt := r.PathValue("relType"); rt != "" {
		f.RelTypes = []string{rt}
	}
	if et := r.PathValue("eventType"); et != "" {
		f.Types = &[]string{et}
	}
	p.capAt(upto)
	pg := p.walk(children, f)
	resp := map[string]any{"chunk": s.renderAll(pg.events, c)}
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
