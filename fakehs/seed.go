package fakehs

import (
	"encoding/json"
	"fmt"
	"time"

	"maunium.net/go/mautrix/id"
)

// RoomSeed describes a room to import in one call, without HTTP.
type RoomSeed struct {
	// Creator creates the room; it and Members are joined. Local users that
	// don't exist yet are created (password = localpart, as RegisterUser).
	Creator id.UserID
	Name    string
	// AliasLocalpart, when set, gives the room "#AliasLocalpart:server".
	AliasLocalpart string
	// Preset is a createRoom preset; default "private_chat".
	Preset  string
	Members []id.UserID
	Events  []SeedEvent
}

// SeedEvent is one imported event. ThreadRoot is the index in Events of
// the thread root this event replies to, or -1 for none; note that the
// zero value 0 means "a reply in the thread of Events[0]", so set -1 for
// top-level events. A root must come before its replies.
type SeedEvent struct {
	Sender     id.UserID
	Type       string // default m.room.message
	Content    map[string]any
	Timestamp  time.Time // zero: now
	ThreadRoot int
	// Relation adds another relation (m.annotation, m.reference, m.replace)
	// to an earlier event; nil for none.
	Relation *SeedRelation
	// StateKey makes this a state event when non-nil.
	StateKey *string
}

// SeedRelation relates a seeded event to an earlier one by index.
type SeedRelation struct {
	RelType string
	Target  int
	Key     string // for m.annotation
}

// ImportedRoom is the result of ImportRoom.
type ImportedRoom struct {
	RoomID   id.RoomID
	EventIDs []id.EventID // index-aligned with RoomSeed.Events
}

// ImportRoom creates a room with members and history in one call. Imported
// events behave like sent ones for /messages, /threads, /relations and
// aggregations, but are not pushed to appservices and appear in /sync only
// as history of a newly joined room.
func (s *Server) ImportRoom(seed RoomSeed) (*ImportedRoom, error) {
	if err := validateSeed(&seed); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, u := range append([]id.UserID{seed.Creator}, seed.Members...) {
		s.ensureSeedUser(u)
	}
	if seed.AliasLocalpart != "" {
		if _, taken := s.state.aliases[id.NewRoomAlias(seed.AliasLocalpart, s.cfg.serverName)]; taken {
			return nil, fmt.Errorf("import room: alias #%s already taken", seed.AliasLocalpart)
		}
	}
	creator := &caller{User: seed.Creator}
	rm, err := s.createRoom(creator, &reqCreateRoom{Name: seed.Name, Preset: seed.Preset, RoomAliasName: seed.AliasLocalpart}, true)
	if err != nil {
		return nil, fmt.Errorf("import room: %w", err)
	}
	for _, m := range seed.Members {
		if rm.membership(m) == "join" {
			continue
		}
		key := string(m)
		s.appendEvent(rm, &evt{Sender: m, Type: "m.room.member", StateKey: &key,
			Content: mustJSON(s.memberContent(m, "join", nil)), Imported: true}, nil)
	}
	out := &ImportedRoom{RoomID: rm.ID, EventIDs: make([]id.EventID, len(seed.Events))}
	for i, se := range seed.Events {
		e := &evt{Sender: se.Sender, Type: se.Type, StateKey: se.StateKey, Imported: true,
			Content: seedContent(se, out.EventIDs)}
		if !se.Timestamp.IsZero() {
			e.TS = se.Timestamp.UnixMilli()
		}
		out.EventIDs[i] = s.appendEvent(rm, e, nil).ID
	}
	s.state.notify()
	return out, nil
}

func validateSeed(seed *RoomSeed) error {
	if _, _, err := seed.Creator.Parse(); err != nil || seed.Creator == "" {
		return fmt.Errorf("import room: invalid creator %q", seed.Creator)
	}
	for i := range seed.Events {
		se := &seed.Events[i]
		if se.Type == "" {
			se.Type = "m.room.message"
		}
		if se.Sender == "" {
			return fmt.Errorf("import room: event %d has no sender", i)
		}
		if se.ThreadRoot >= i {
			return fmt.Errorf("import room: event %d: thread root %d must be an earlier event (use -1 for none)", i, se.ThreadRoot)
		}
		if rel := se.Relation; rel != nil && (rel.Target < 0 || rel.Target >= i || rel.RelType == "") {
			return fmt.Errorf("import room: event %d: relation must name an earlier event and a rel type", i)
		}
		if se.ThreadRoot >= 0 && se.Relation != nil {
			return fmt.Errorf("import room: event %d: both ThreadRoot and Relation set", i)
		}
		// As Synapse refuses on send: a thread cannot start from an event with a relation.
		threadParent := se.ThreadRoot
		if rel := se.Relation; rel != nil && rel.RelType == "m.thread" {
			threadParent = rel.Target
		}
		if threadParent >= 0 && (seed.Events[threadParent].ThreadRoot >= 0 || seed.Events[threadParent].Relation != nil) {
			return fmt.Errorf("import room: event %d: thread root %d has a relation itself (Synapse refuses such threads)", i, threadParent)
		}
		if _, err := json.Marshal(se.Content); err != nil {
			return fmt.Errorf("import room: event %d content: %w", i, err)
		}
	}
	return nil
}

// ensureSeedUser creates a missing local user for seeding.
func (s *Server) ensureSeedUser(u id.UserID) {
	if _, ok := s.state.users[u]; ok {
		return
	}
	nu := newUser(u)
	nu.Password = u.Localpart()
	nu.DisplayName = u.Localpart()
	s.state.users[u] = nu
}

// seedContent copies the content and adds the relation by event id.
func seedContent(se SeedEvent, ids []id.EventID) json.RawMessage {
	content := make(map[string]any, len(se.Content)+1)
	for k, v := range se.Content {
		content[k] = v
	}
	if _, has := content["m.relates_to"]; !has {
		switch {
		case se.ThreadRoot >= 0:
			root := ids[se.ThreadRoot]
			content["m.relates_to"] = map[string]any{
				"rel_type": "m.thread", "event_id": root, "is_falling_back": true,
				"m.in_reply_to": map[string]any{"event_id": root},
			}
		case se.Relation != nil:
			rel := map[string]any{"rel_type": se.Relation.RelType, "event_id": ids[se.Relation.Target]}
			if se.Relation.Key != "" {
				rel["key"] = se.Relation.Key
			}
			content["m.relates_to"] = rel
		}
	}
	return mustJSON(content)
}
