package fakehs

import (
	"encoding/json"
	"slices"
	"sort"
	"time"

	"maunium.net/go/mautrix/id"
)

// relatesTo is the part of content the server indexes.
type relatesTo struct {
	RelatesTo *struct {
		RelType string     `json:"rel_type"`
		EventID id.EventID `json:"event_id"`
	} `json:"m.relates_to"`
	Membership string `json:"membership"`
}

// appendEvent stores a new event at the end of the room's timeline and
// updates state, relation indexes, memberships, appservice queues and
// long-polls. Called with s.mu write-locked. The caller fills Sender, Type,
// StateKey, Content and optionally TS, Imported and txn fields.
func (s *Server) appendEvent(rm *room, e *evt, c *caller) *evt {
	st := s.state
	e.ID = id.EventID("$" + randomID(32))
	e.Room = rm
	if e.TS == 0 {
		e.TS = time.Now().UnixMilli()
	}
	e.Stream = st.nextStream()
	if d := s.cfg.profile.VisibilityDelay; d > 0 && !e.Imported {
		e.visibleAt = time.Now().Add(d)
	}
	var rel relatesTo
	_ = json.Unmarshal(e.Content, &rel) // content was validated as a JSON object
	if rel.RelatesTo != nil && rel.RelatesTo.RelType != "" && rel.RelatesTo.EventID != "" {
		e.RelType, e.RelTo = rel.RelatesTo.RelType, rel.RelatesTo.EventID
	}
	if e.Type == "m.room.member" {
		e.Membership = rel.Membership
	}
	rm.events = append(rm.events, e)
	st.events[e.ID] = e
	if e.StateKey != nil {
		e.Replaces = rm.state[stateKey{e.Type, *e.StateKey}]
		rm.state[stateKey{e.Type, *e.StateKey}] = e
		if e.Type == "m.room.member" {
			st.addUserRoom(id.UserID(*e.StateKey), rm)
			if e.Membership == "join" {
				rm.everJoined[id.UserID(*e.StateKey)] = true
			}
		}
	}
	if c != nil && e.TxnID != "" {
		e.txnDevice, e.txnToken = c.Device, c.Token
		st.txns[txnKey{c.txnScope(), e.txnPath}] = e.ID
	}
	s.indexRelation(rm, e)
	if !e.Imported {
		for _, as := range s.asList {
			if as.interested(e) {
				as.enqueue(e)
			}
		}
		st.notify()
	}
	return e
}

// indexRelation records e under the event it relates to, and in the
// thread index when it is an m.thread reply to a known root.
func (s *Server) indexRelation(rm *room, e *evt) {
	if e.RelTo == "" {
		return
	}
	parent := s.state.events[e.RelTo]
	if parent == nil || parent.Room != rm {
		return
	}
	rm.children[e.RelTo] = append(rm.children[e.RelTo], e)
	if e.RelType == "m.reference" {
		rm.refs[e.RelTo] = append(rm.refs[e.RelTo], e)
	}
	if e.RelType == "m.replace" && appliesAsEdit(parent, e) {
		rm.edits[parent.ID] = e // the newest applicable edit wins
	}
	if e.RelType != "m.thread" {
		return
	}
	th := rm.threads[e.RelTo]
	if th == nil {
		th = &thread{Root: parent, Participants: map[id.UserID]bool{parent.Sender: true}}
		rm.threads[e.RelTo] = th
	} else {
		rm.removeThreadOrder(th)
	}
	th.Replies = append(th.Replies, e)
	th.Participants[e.Sender] = true
	rm.threadOrder = append(rm.threadOrder, th)
}

// unindexRelation undoes indexRelation for a redacted event, which has no
// relation any more (Synapse deletes its event_relations row): it leaves its
// parent's children, an edit it was is bundled no longer, and a thread reply
// leaves its thread, which then counts one reply fewer, shows the previous
// reply as latest and moves back in /threads to that reply's position. A
// thread without replies left is no thread.
func (s *Server) unindexRelation(rm *room, e *evt) {
	if e.RelTo == "" {
		return
	}
	parent, relType := e.RelTo, e.RelType
	e.RelType, e.RelTo = "", ""
	kids := rm.children[parent]
	if i := slices.Index(kids, e); i >= 0 {
		rm.children[parent] = slices.Delete(kids, i, i+1)
	} else {
		return // its parent was unknown: it was never indexed
	}
	if refs := rm.refs[parent]; relType == "m.reference" {
		if i := slices.Index(refs, e); i >= 0 {
			rm.refs[parent] = slices.Delete(refs, i, i+1)
		}
	}
	if relType == "m.replace" && rm.edits[parent] == e {
		rm.refreshEdit(s.state.events[parent])
	}
	th := rm.threads[parent]
	if relType != "m.thread" || th == nil {
		return
	}
	i := slices.Index(th.Replies, e)
	if i < 0 {
		return
	}
	rm.removeThreadOrder(th)
	th.Replies = slices.Delete(th.Replies, i, i+1)
	if len(th.Replies) == 0 {
		delete(rm.threads, parent)
		return
	}
	th.Participants = map[id.UserID]bool{th.Root.Sender: true}
	for _, r := range th.Replies {
		th.Participants[r.Sender] = true
	}
	ls := th.latestStream()
	j := sort.Search(len(rm.threadOrder), func(j int) bool { return rm.threadOrder[j].latestStream() > ls })
	rm.threadOrder = slices.Insert(rm.threadOrder, j, th)
}

// references lists the m.reference children of an event as Synapse bundles
// them: {"event_id": …} each, oldest first.
func (rm *room) references(parent id.EventID) []map[string]id.EventID {
	var out []map[string]id.EventID
	for _, c := range rm.refs[parent] {
		out = append(out, map[string]id.EventID{"event_id": c.ID})
	}
	return out
}

// appliesAsEdit follows Synapse's _get_applicable_edits: an m.replace is
// bundled only when it is an m.room.message from the original's sender, of
// the original's type, and not redacted (Synapse drops a redacted event's
// relation).
func appliesAsEdit(orig, edit *evt) bool {
	return edit.RelType == "m.replace" && edit.Type == "m.room.message" && orig.Type == edit.Type &&
		orig.Sender == edit.Sender && edit.RedactedBy == nil
}

// refreshEdit recomputes the bundled edit of orig, after one was redacted.
func (rm *room) refreshEdit(orig *evt) {
	delete(rm.edits, orig.ID)
	for _, c := range rm.children[orig.ID] {
		if appliesAsEdit(orig, c) {
			rm.edits[orig.ID] = c
		}
	}
}

// removeThreadOrder takes th out of threadOrder, found by binary search on
// its (unique) latest stream position, before it moves to the end.
func (rm *room) removeThreadOrder(th *thread) {
	ls := th.latestStream()
	i := sort.Search(len(rm.threadOrder), func(i int) bool { return rm.threadOrder[i].latestStream() >= ls })
	if i < len(rm.threadOrder) && rm.threadOrder[i] == th {
		rm.threadOrder = append(rm.threadOrder[:i], rm.threadOrder[i+1:]...)
	}
}

// clientEvent is the client-server API shape of an event.
type clientEvent struct {
	Content        json.RawMessage `json:"content"`
	EventID        id.EventID      `json:"event_id"`
	OriginServerTS int64           `json:"origin_server_ts"`
	RoomID         id.RoomID       `json:"room_id"`
	Sender         id.UserID       `json:"sender"`
	StateKey       *string         `json:"state_key,omitempty"`
	Type           string          `json:"type"`
	// Redacts is set on redactions: room version 10 keeps it top-level.
	Redacts  id.EventID     `json:"redacts,omitempty"`
	Unsigned map[string]any `json:"unsigned,omitempty"`
}

// render turns a stored event into what the viewer sees: age, the
// sender's own transaction_id (Synapse only shows it to the same access
// token, or the same appservice user) and bundled m.thread aggregations.
func (s *Server) render(e *evt, viewer *caller) *clientEvent {
	ce := s.renderPlain(e, viewer)
	rels := map[string]any{}
	if th := e.Room.threads[e.ID]; th != nil {
		participated := viewer != nil && th.Participants[viewer.User]
		rels["m.thread"] = map[string]any{
			"count":                     len(th.Replies),
			"latest_event":              s.renderPlain(th.latest(), viewer),
			"current_user_participated": participated,
		}
	}
	if refs := e.Room.references(e.ID); len(refs) > 0 {
		// Synapse bundles the ids of m.reference children, oldest first.
		rels["m.reference"] = map[string]any{"chunk": refs}
	}
	if edit := e.Room.edits[e.ID]; edit != nil && e.RedactedBy == nil {
		// Since Matrix 1.7 (MSC3925) the whole latest edit is bundled and the
		// original's content is left as sent. A redacted original keeps its
		// thread summary in Synapse but loses its edit.
		rels["m.replace"] = s.renderPlain(edit, viewer)
	}
	if len(rels) > 0 && !s.cfg.profile.NoBundles {
		ce.unsigned()["m.relations"] = rels
	}
	return ce
}

// renderPlain renders without aggregations (for latest_event inside one).
func (s *Server) renderPlain(e *evt, viewer *caller) *clientEvent {
	ce := &clientEvent{Content: e.Content, EventID: e.ID, OriginServerTS: e.TS, RoomID: e.Room.ID,
		Sender: e.Sender, StateKey: e.StateKey, Type: e.Type, Redacts: e.Redacts}
	ce.unsigned()["age"] = time.Now().UnixMilli() - e.TS
	if viewer.seesTxnID(e) {
		ce.unsigned()["transaction_id"] = e.TxnID
	}
	if e.RedactedBy != nil {
		ce.unsigned()["redacted_because"] = s.renderPlain(e.RedactedBy, viewer)
	}
	if prev := e.Replaces; prev != nil {
		// Synapse stores these with every state event that replaced another.
		ce.unsigned()["prev_content"] = prev.Content
		ce.unsigned()["prev_sender"] = prev.Sender
		ce.unsigned()["replaces_state"] = prev.ID
	}
	return ce
}

func (ce *clientEvent) unsigned() map[string]any {
	if ce.Unsigned == nil {
		ce.Unsigned = map[string]any{}
	}
	return ce.Unsigned
}

func (s *Server) renderAll(events []*evt, viewer *caller) []*clientEvent {
	out := make([]*clientEvent, 0, len(events))
	for _, e := range events {
		out = append(out, s.render(e, viewer))
	}
	return out
}
