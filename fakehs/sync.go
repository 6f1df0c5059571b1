package fakehs

import (
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"maunium.net/go/mautrix/id"
)

// maxSyncTimeout caps long-polls so a forgotten client can't pin a goroutine.
const maxSyncTimeout = 5 * time.Minute

// syncRequest is a parsed /sync query.
type syncRequest struct {
	since     int64
	initial   bool
	timeout   time.Duration
	filter    *syncFilter
	fullState bool
}

// handleSync serves /sync. It computes the response under a read lock and,
// when there is nothing new and timeout > 0, waits for the stream to move
// (or the server to close, or the client to go) without holding the lock.
func (s *Server) handleSync(w http.ResponseWriter, r *http.Request) {
	s.ackToDevice(r)
	var deadline time.Time
	for {
		s.mu.RLock()
		c, err := s.authenticate(r)
		var req *syncRequest
		if err == nil {
			req, err = s.parseSyncRequest(r, c)
		}
		if err != nil {
			s.mu.RUnlock()
			writeError(w, err)
			return
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(req.timeout)
		}
		resp, empty := s.buildSync(c, req)
		wake := s.state.wake
		s.mu.RUnlock()
		if !empty || req.initial || req.timeout <= 0 {
			writeJSON(w, http.StatusOK, resp)
			return
		}
		remaining := time.Until(deadline)
		if remaining <= 0 {
			writeJSON(w, http.StatusOK, resp)
			return
		}
		timer := time.NewTimer(remaining)
		select {
		case <-wake:
			timer.Stop()
		case <-timer.C:
			writeJSON(w, http.StatusOK, resp)
			return
		case <-r.Context().Done():
			timer.Stop()
			if s.ctx.Err() != nil {
				// Request contexts derive from the server's: closing answers the poll.
				writeJSON(w, http.StatusOK, resp)
			}
			return
		case <-s.ctx.Done():
			timer.Stop()
			writeJSON(w, http.StatusOK, resp)
			return
		}
	}
}

func (s *Server) parseSyncRequest(r *http.Request, c *caller) (*syncRequest, error) {
	q := r.URL.Query()
	req := &syncRequest{initial: true, filter: &syncFilter{}, fullState: q.Get("full_state") == "true"}
	if v := q.Get("since"); v != "" {
		pos, err := s.parseSyncToken(v)
		if err != nil {
			return nil, err
		}
		req.since, req.initial = pos, false
	}
	if v := q.Get("timeout"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms < 0 {
			return nil, errInvalidParam("Invalid timeout %q", v)
		}
		req.timeout = min(time.Duration(ms)*time.Millisecond, maxSyncTimeout)
	}
	if v := q.Get("filter"); v != "" {
		raw := json.RawMessage(v)
		if !strings.HasPrefix(strings.TrimSpace(v), "{") {
			if _, err := strconv.Atoi(v); err != nil {
				return nil, errInvalidParam("Invalid filter ID")
			}
			stored, ok := s.storedFilter(c.User, v)
			if !ok {
				// Synapse: 400 M_INVALID_PARAM here, though GET /filter/{id} says 404 M_NOT_FOUND.
				return nil, errInvalidParam("No such filter")
			}
			raw = stored
		} else if !json.Valid(raw) {
			return nil, mErr(http.StatusBadRequest, "M_NOT_JSON", "Invalid JSON in filter")
		}
		f, err := parseSyncFilter(raw)
		if err != nil {
			return nil, err
		}
		req.filter = f
	}
	return req, nil
}

// syncRoom is one room in a sync response.
type syncRoom struct {
	Timeline *syncTimeline  `json:"timeline,omitempty"`
	State    *syncEvents    `json:"state,omitempty"`
	Invite   *syncEvents    `json:"invite_state,omitempty"`
	Account  *syncEvents    `json:"account_data,omitempty"`
	Ephem    *syncEvents    `json:"ephemeral,omitempty"`
	Summary  any            `json:"summary,omitempty"` // {} unless members are lazy-loaded
	Unread   map[string]int `json:"unread_notifications,omitempty"`
}

type syncTimeline struct {
	Events    []*clientEvent `json:"events"`
	Limited   bool           `json:"limited"`
	PrevBatch string         `json:"prev_batch,omitempty"`
}

type syncEvents struct {
	Events []any `json:"events"`
}

// buildSync computes the response for one user; empty means nothing changed.
func (s *Server) buildSync(c *caller, req *syncRequest) (map[string]any, bool) {
	join, invite, leave := map[id.RoomID]*syncRoom{}, map[id.RoomID]*syncRoom{}, map[id.RoomID]*syncRoom{}
	for rid := range s.state.userRooms[c.User] {
		rm := s.state.rooms[rid]
		if rm.lastStream() <= req.since || !req.filter.matchesRoomList(rid) {
			continue
		}
		s.syncOneRoom(rm, c, req, join, invite, leave)
	}
	rooms := map[string]any{}
	if len(join) > 0 {
		rooms["join"] = join
	}
	if len(invite) > 0 {
		rooms["invite"] = invite
	}
	if len(leave) > 0 {
		rooms["leave"] = leave
	}
	resp := map[string]any{"next_batch": s.syncToken(s.state.stream), "rooms": rooms}
	news := s.syncE2EE(c, req, resp)
	return resp, len(rooms) == 0 && !news
}

func (f *syncFilter) matchesRoomList(rid id.RoomID) bool {
	ef := eventFilter{Rooms: f.Room.Rooms, NotRooms: f.Room.NotRooms}
	return ef.matchesRoom(rid)
}

func (s *Server) syncOneRoom(rm *room, c *caller, req *syncRequest, join, invite, leave map[id.RoomID]*syncRoom) {
	memberEvt := rm.state[stateKey{"m.room.member", string(c.User)}]
	if memberEvt == nil {
		return
	}
	changed := memberEvt.Stream > req.since
	switch memberEvt.Membership {
	case "join":
		newly := req.initial || changed || req.fullState
		sr := s.syncJoined(rm, c, req, newly)
		// Like Synapse, a room whose news were all filtered out is left out,
		// so a long-poll keeps waiting.
		if newly || len(sr.Timeline.Events) > 0 || len(sr.State.Events) > 0 {
			join[rm.ID] = sr
		}
	case "invite":
		if changed {
			invite[rm.ID] = &syncRoom{Invite: &syncEvents{Events: s.strippedState(rm, memberEvt)}}
		}
	case "leave", "ban":
		// Synapse leaves left rooms out of an initial sync unless include_leave.
		if changed && (!req.initial || req.filter.Room.IncludeLeave) {
			leave[rm.ID] = s.syncLeft(rm, c, req, memberEvt)
		}
	}
}

func (f *syncFilter) timelineFilter() *eventFilter {
	if f.Room.Timeline == nil {
		return &eventFilter{}
	}
	return f.Room.Timeline
}

func (f *syncFilter) timelineLimit() int {
	if t := f.Room.Timeline; t != nil && t.Limit > 0 {
		return t.Limit
	}
	return 10
}

// syncJoined builds a joined room. A newly joined room (or initial sync)
// gets the current state and the last `limit` events; otherwise the
// timeline is what arrived since, and if more than `limit` arrived the
// gap is skipped: limited=true, prev_batch points just before the
// timeline, and state carries state events from the skipped part.
func (s *Server) syncJoined(rm *room, c *caller, req *syncRequest, newly bool) *syncRoom {
	limit := req.filter.timelineLimit()
	tf := req.filter.timelineFilter()
	lower := req.since
	if newly {
		lower = -1
	}
	pg := walkBack(rm.events, rm.lastStream(), lower, limit, tf)
	// Imported events are history: only a full (newly joined) timeline shows them.
	events := make([]*evt, 0, len(pg.events))
	for i := len(pg.events) - 1; i >= 0; i-- {
		if e := pg.events[i]; newly || !e.Imported {
			events = append(events, e)
		}
	}
	sr := &syncRoom{
		Timeline: &syncTimeline{Events: s.renderAll(events, c), Limited: !pg.exhausted},
		State:    &syncEvents{Events: []any{}},
		Account:  &syncEvents{Events: []any{}},
		Ephem:    &syncEvents{Events: []any{}},
		Summary:  map[string]any{},
		Unread:   map[string]int{"highlight_count": 0, "notification_count": 0},
	}
	lazy := req.filter.Room.State != nil && req.filter.Room.State.LazyLoadMembers
	var keep map[string]bool // with lazy loading, the members whose state is sent
	if lazy {
		heroes := rm.heroes(c.User)
		sr.Summary = map[string]any{
			"m.joined_member_count":  len(rm.members("join")),
			"m.invited_member_count": len(rm.members("invite")),
			"m.heroes":               heroes,
		}
		keep = map[string]bool{string(c.User): true}
		for _, h := range heroes {
			keep[string(h)] = true
		}
		for _, e := range events {
			keep[string(e.Sender)] = true
		}
	}
	if !pg.exhausted || newly {
		sr.Timeline.PrevBatch = s.roomToken(rm.ID, pg.next)
	}
	inTimeline := map[id.EventID]bool{}
	for _, e := range events {
		inTimeline[e.ID] = true
	}
	for _, e := range rm.stateEvents() {
		if inTimeline[e.ID] || (!newly && (e.Stream <= req.since || !sr.Timeline.Limited)) {
			continue
		}
		if req.filter.Room.State != nil && !req.filter.Room.State.matches(e) {
			continue
		}
		if lazy && e.Type == "m.room.member" && !keep[*e.StateKey] {
			continue
		}
		sr.State.Events = append(sr.State.Events, s.render(e, c))
	}
	return sr
}

// syncLeft shows a left room up to and including the leave event.
func (s *Server) syncLeft(rm *room, c *caller, req *syncRequest, leaveEvt *evt) *syncRoom {
	limit := req.filter.timelineLimit()
	pg := walkBack(rm.events, leaveEvt.Stream, req.since, limit, req.filter.timelineFilter())
	events := make([]*evt, 0, len(pg.events))
	for i := len(pg.events) - 1; i >= 0; i-- {
		events = append(events, pg.events[i])
	}
	tl := &syncTimeline{Events: s.renderAll(events, c), Limited: !pg.exhausted}
	if tl.Limited {
		tl.PrevBatch = s.roomToken(rm.ID, pg.next)
	}
	return &syncRoom{Timeline: tl, State: &syncEvents{Events: []any{}}, Account: &syncEvents{Events: []any{}}}
}

// heroes are the room summary's m.heroes as Synapse picks them: up to five
// joined or invited members other than the user, in the order they came in.
func (rm *room) heroes(self id.UserID) []id.UserID {
	var ms []*evt
	for k, e := range rm.state {
		if k.Type == "m.room.member" && k.Key != string(self) && (e.Membership == "join" || e.Membership == "invite") {
			ms = append(ms, e)
		}
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Stream < ms[j].Stream })
	out := []id.UserID{}
	for _, e := range ms[:min(len(ms), 5)] {
		out = append(out, id.UserID(*e.StateKey))
	}
	return out
}

// strippedState is the invite_state Synapse sends: create, join rules,
// name, canonical alias, avatar, encryption, and the invite itself.
func (s *Server) strippedState(rm *room, invite *evt) []any {
	var out []any
	for _, t := range []string{"m.room.create", "m.room.join_rules", "m.room.name", "m.room.canonical_alias", "m.room.avatar", "m.room.encryption"} {
		if e := rm.state[stateKey{t, ""}]; e != nil {
			out = append(out, map[string]any{"type": e.Type, "state_key": "", "sender": e.Sender, "content": e.Content})
		}
	}
	if inviter := rm.state[stateKey{"m.room.member", string(invite.Sender)}]; inviter != nil && invite.Sender != id.UserID(*invite.StateKey) {
		out = append(out, map[string]any{"type": inviter.Type, "state_key": *inviter.StateKey, "sender": inviter.Sender, "content": inviter.Content})
	}
	out = append(out, s.render(invite, nil))
	return out
}
