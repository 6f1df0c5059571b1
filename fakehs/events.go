package fakehs

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// handleSend stores a message event. The same transaction id from the same
// access token (or appservice user) returns the first event id and stores nothing.
func (s *Server) handleSend(r *http.Request, c *caller) (any, error) {
	content, err := readObject(r)
	if err != nil {
		return nil, err
	}
	rm, err := s.joinedRoom(r, c)
	if err != nil {
		return nil, err
	}
	txnID := r.PathValue("txnId")
	if prev, ok := s.state.txns[txnKey{c.txnScope(), r.URL.Path}]; ok {
		return map[string]id.EventID{"event_id": prev}, nil
	}
	if err := validateCanonical(content); err != nil {
		return nil, err
	}
	typ := r.PathValue("type")
	if err := checkSize(rm, c.User, typ, nil, content); err != nil {
		return nil, err
	}
	if err := s.checkRelation(rm, content); err != nil {
		return nil, err
	}
	if have, need := rm.powerLevel(c.User, typ, false); have < need {
		return nil, errForbidden("You don't have permission to post that to the room. user_level (%d) < send_level (%d)", have, need)
	}
	e := s.appendEvent(rm, &evt{Sender: c.User, Type: typ, Content: content, TxnID: txnID, txnPath: r.URL.Path}, c)
	return map[string]id.EventID{"event_id": e.ID}, nil
}

// handleRedact stores an m.room.redaction, prunes the target's content and,
// as Synapse does, takes the target out of the relation it had: a redacted
// thread reply leaves /relations, the thread summary and /threads.
func (s *Server) handleRedact(r *http.Request, c *caller) (any, error) {
	var req struct {
		Reason string `json:"reason"`
	}
	if err := readJSON(r, &req); err != nil {
		return nil, err
	}
	rm, err := s.joinedRoom(r, c)
	if err != nil {
		return nil, err
	}
	txnID := r.PathValue("txnId")
	if prev, ok := s.state.txns[txnKey{c.txnScope(), r.URL.Path}]; ok {
		return map[string]id.EventID{"event_id": prev}, nil
	}
	target := s.state.events[id.EventID(r.PathValue("eventId"))]
	if target == nil {
		// Synapse accepts a redaction of an event it does not know and shows it
		// nowhere (not in /messages, /sync, GET /event or a push); only its txn
		// id is remembered, so a retry gets the same event id.
		eid := id.EventID("$" + randomID(32))
		s.state.txns[txnKey{c.txnScope(), r.URL.Path}] = eid
		return map[string]id.EventID{"event_id": eid}, nil
	}
	if target.Room != rm {
		return nil, mErr(http.StatusBadRequest, "M_UNKNOWN", "Cannot redact event from a different room")
	}
	if have, need := rm.powerLevel(c.User, "m.room.redaction", false); target.Sender != c.User && have < 50 || have < need {
		return nil, errForbidden("You don't have permission to redact events")
	}
	content := map[string]any{"redacts": target.ID}
	if req.Reason != "" {
		content["reason"] = req.Reason
	}
	e := s.appendEvent(rm, &evt{Sender: c.User, Type: "m.room.redaction", Content: mustJSON(content), TxnID: txnID, txnPath: r.URL.Path, Redacts: target.ID}, c)
	target.Content = json.RawMessage("{}")
	if target.RedactedBy == nil {
		target.RedactedBy = e
	}
	s.unindexRelation(rm, target)
	return map[string]id.EventID{"event_id": e.ID}, nil
}

func (s *Server) handleGetEvent(r *http.Request, c *caller) (any, error) {
	rm, upto, err := s.readableRoom(r, c)
	if err != nil {
		// Synapse hides events from non-members as not found.
		return nil, errNotFound("Event not found.")
	}
	e := s.state.events[id.EventID(r.PathValue("eventId"))]
	if e == nil || e.Room != rm || e.Stream > s.visibleUpto(rm, upto) {
		return nil, errNotFound("Event not found.")
	}
	return s.render(e, c), nil
}

// queryLimit reads ?limit= with a default and Synapse's cap of 1000.
func queryLimit(r *http.Request, def int) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, errInvalidParam("Invalid limit %q", v)
	}
	if n > 1000 {
		n = 1000
	}
	return n, nil
}

// page is one window of a room's timeline walk.
type page struct {
	events    []*evt
	next      int64 // position to continue from
	exhausted bool  // the walk reached the end (or `to`)
}

// walkBack collects up to limit matching events with to < Stream <= from,
// newest first. Only the events it visits are touched: binary search finds
// the start, so a page costs the same in a room of any size.
func walkBack(events []*evt, from, to int64, limit int, f *eventFilter) page {
	i := indexAfter(events, from) - 1
	p := page{next: from}
	for ; i >= 0 && events[i].Stream > to; i-- {
		if len(p.events) >= limit {
			return p
		}
		e := events[i]
		p.next = e.Stream - 1
		if f.matches(e) {
			p.events = append(p.events, e)
		}
	}
	p.exhausted = true
	return p
}

// walkForward collects up to limit matching events with from < Stream <= to, oldest first.
func walkForward(events []*evt, from, to int64, limit int, f *eventFilter) page {
	i := indexAfter(events, from)
	p := page{next: from}
	for ; i < len(events) && events[i].Stream <= to; i++ {
		if len(p.events) >= limit {
			return p
		}
		e := events[i]
		p.next = e.Stream
		if f.matches(e) {
			p.events = append(p.events, e)
		}
	}
	p.exhausted = true
	return p
}

// paginationParams reads dir/from/to/limit shared by /messages and /relations.
type paginationParams struct {
	backward bool
	from     int64
	to       int64
	limit    int
}

// defBackward is the direction without ?dir=: Synapse pages /relations
// backwards but /messages forwards (the spec makes dir required there).
func (s *Server) readPagination(r *http.Request, rm *room, events []*evt, defLimit int, defBackward bool) (*paginationParams, error) {
	q := r.URL.Query()
	p := &paginationParams{backward: defBackward}
	switch q.Get("dir") {
	case "":
	case "b":
		p.backward = true
	case "f":
		p.backward = false
	default:
		return nil, errInvalidParam("Unknown dir %q", q.Get("dir"))
	}
	var err error
	if p.limit, err = queryLimit(r, defLimit); err != nil {
		return nil, err
	}
	var last int64
	if len(events) > 0 {
		last = events[len(events)-1].Stream
	}
	if p.backward {
		p.from, p.to = last, -1
	} else {
		p.from, p.to = 0, last
	}
	if v := q.Get("from"); v != "" {
		if p.from, err = s.parseRoomToken(v, rm.ID); err != nil {
			return nil, err
		}
	}
	if v := q.Get("to"); v != "" {
		if p.to, err = s.parseRoomToken(v, rm.ID); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// capAt hides events after upto (a departed user's leave).
func (p *paginationParams) capAt(upto int64) {
	if p.backward {
		p.from = min(p.from, upto)
	} else {
		p.to = min(p.to, upto)
	}
}

func (p *paginationParams) walk(events []*evt, f *eventFilter) page {
	if p.backward {
		return walkBack(events, p.from, p.to, p.limit, f)
	}
	return walkForward(events, p.from, p.to, p.limit, f)
}

// handleMessages serves /rooms/{id}/messages. `end` is omitted only when
// the chunk is empty: the spec says "omitted when no further events are
// available", but Synapse still returns `end` with the last non-empty page
// and leaves it out on the empty page after it; we match Synapse.
func (s *Server) handleMessages(r *http.Request, c *caller) (any, error) {
	rm, upto, err := s.historyRoom(r, c)
	if err != nil {
		return nil, err
	}
	upto = s.visibleUpto(rm, upto)
	f, err := parseEventFilter(r.URL.Query().Get("filter"))
	if err != nil {
		return nil, err
	}
	f.ignoreRel = s.cfg.profile.IgnoreRelationFilters
	p, err := s.readPagination(r, rm, rm.events, 10, false)
	if err != nil {
		return nil, err
	}
	if f.Limit > 0 && r.URL.Query().Get("limit") == "" {
		p.limit = f.Limit
	}
	p.capAt(upto)
	var pg page
	if s.cfg.profile.FilterAfterLimit {
		// The page is `limit` events of any kind, filtered afterwards.
		pg = p.walk(rm.events, nil)
		pg.events = slices.DeleteFunc(pg.events, func(e *evt) bool { return !f.matches(e) })
	} else {
		pg = p.walk(rm.events, f)
	}
	resp := map[string]any{"chunk": s.renderAll(pg.events, c), "start": s.roomToken(rm.ID, p.from)}
	if len(pg.events) > 0 {
		resp["end"] = s.roomToken(rm.ID, pg.next)
	}
	if f.LazyLoadMembers {
		if members := rm.sendersMembers(pg.events); len(members) > 0 {
			resp["state"] = s.renderAll(members, c)
		}
	}
	return resp, nil
}

// sendersMembers is the lazy-loaded `state` of a /messages page, as Synapse
// gives it: the member event of each sender on the page as it stood at the
// page's first event (so a sender who had not joined yet has none).
func (rm *room) sendersMembers(page []*evt) []*evt {
	if len(page) == 0 {
		return nil
	}
	at := page[0].Stream
	var out []*evt
	seen := map[id.UserID]bool{}
	for _, e := range page {
		if seen[e.Sender] {
			continue
		}
		seen[e.Sender] = true
		m := rm.state[stateKey{"m.room.member", string(e.Sender)}]
		for m != nil && m.Stream > at {
			m = m.Replaces
		}
		if m != nil {
			out = append(out, m)
		}
	}
	return out
}

// handleContext serves /rooms/{id}/context/{eventId}.
func (s *Server) handleContext(r *http.Request, c *caller) (any, error) {
	rm, upto, err := s.readableRoom(r, c)
	if err != nil {
		return nil, err
	}
	upto = s.visibleUpto(rm, upto)
	e := s.state.events[id.EventID(r.PathValue("eventId"))]
	if e == nil || e.Room != rm || e.Stream > upto {
		return nil, errNotFound("Event not found.")
	}
	limit, err := queryLimit(r, 10)
	if err != nil {
		return nil, err
	}
	f, err := parseEventFilter(r.URL.Query().Get("filter"))
	if err != nil {
		return nil, err
	}
	before := walkBack(rm.events, e.Stream-1, -1, limit/2, f)
	after := walkForward(rm.events, e.Stream, min(rm.lastStream(), upto), limit-limit/2, f)
	return map[string]any{
		"event":         s.render(e, c),
		"events_before": s.renderAll(before.events, c),
		"events_after":  s.renderAll(after.events, c),
		"start":         s.roomToken(rm.ID, before.next),
		"end":           s.roomToken(rm.ID, after.next),
		"state":         s.renderAll(rm.stateEvents(), c),
	}, nil
}

// Events returns every event stored in a room, oldest first, as the mautrix
// type, for test assertions (nil for an unknown room).
func (s *Server) Events(rid id.RoomID) []*event.Event {
	s.mu.RLock()
	defer s.mu.RUnlock()
	rm := s.state.rooms[rid]
	if rm == nil {
		return nil
	}
	out := make([]*event.Event, 0, len(rm.events))
	for _, e := range rm.events {
		out = append(out, e.mautrix())
	}
	return out
}

// Event returns one stored event by id, or nil.
func (s *Server) Event(eid id.EventID) *event.Event {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if e := s.state.events[eid]; e != nil {
		return e.mautrix()
	}
	return nil
}

// mautrix converts to the mautrix type with content parsed where mautrix knows the type.
func (e *evt) mautrix() *event.Event {
	class := event.MessageEventType
	if e.StateKey != nil {
		class = event.StateEventType
	}
	out := &event.Event{
		Sender: e.Sender, Type: event.Type{Type: e.Type, Class: class}, Timestamp: e.TS,
		ID: e.ID, RoomID: e.Room.ID,
		Content: event.Content{VeryRaw: append(json.RawMessage(nil), e.Content...)},
	}
	if e.StateKey != nil {
		key := *e.StateKey
		out.StateKey = &key
	}
	if e.TxnID != "" {
		out.Unsigned.TransactionID = e.TxnID
	}
	out.Redacts = e.Redacts
	_ = out.Content.ParseRaw(out.Type) // unknown custom types stay raw
	return out
}
