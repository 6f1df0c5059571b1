package fakehs

import (
	"encoding/json"
	"math"
	"net/http"
	"sort"
	"strings"

	"maunium.net/go/mautrix/id"
)

type reqCreateRoom struct {
	Name            string          `json:"name"`
	Topic           string          `json:"topic"`
	Preset          string          `json:"preset"`
	Visibility      string          `json:"visibility"`
	Invite          []id.UserID     `json:"invite"`
	RoomAliasName   string          `json:"room_alias_name"`
	IsDirect        bool            `json:"is_direct"`
	InitialState    []initialState  `json:"initial_state"`
	PowerLevels     json.RawMessage `json:"power_level_content_override"`
	CreationContent json.RawMessage `json:"creation_content"`
	RoomVersion     string          `json:"room_version"`
}

type initialState struct {
	Type     string          `json:"type"`
	StateKey string          `json:"state_key"`
	Content  json.RawMessage `json:"content"`
}

// handleCreateRoom writes the initial state in Synapse's order: create,
// creator's join, power_levels, canonical_alias, join_rules,
// history_visibility, guest_access (private presets), initial_state, name,
// topic, then one invite per invitee.
func (s *Server) handleCreateRoom(r *http.Request, c *caller) (any, error) {
	var req reqCreateRoom
	if err := readJSON(r, &req); err != nil {
		return nil, err
	}
	rm, err := s.createRoom(c, &req, false)
	if err != nil {
		return nil, err
	}
	return map[string]id.RoomID{"room_id": rm.ID}, nil
}

// createRoom creates the room and its initial state; imported rooms are
// history from the start, so their state events are not pushed either.
func (s *Server) createRoom(c *caller, req *reqCreateRoom, imported bool) (*room, error) {
	preset := req.Preset
	if preset == "" {
		preset = "private_chat"
		if req.Visibility == "public" {
			preset = "public_chat"
		}
	}
	if preset != "private_chat" && preset != "public_chat" && preset != "trusted_private_chat" {
		// Synapse validates the body against its schema: 400 M_BAD_JSON.
		return nil, errBadJSON("'%s' is not a valid preset", preset)
	}
	version := req.RoomVersion
	if version == "" {
		version = "11" // Synapse's default since 1.9x
	}
	if !knownRoomVersions[version] {
		return nil, mErr(http.StatusBadRequest, "M_UNSUPPORTED_ROOM_VERSION", "Your homeserver does not support this room version")
	}
	var alias id.RoomAlias
	if req.RoomAliasName != "" {
		alias = id.NewRoomAlias(req.RoomAliasName, s.cfg.serverName)
		if strings.ContainsAny(req.RoomAliasName, ":# ") {
			return nil, mErr(http.StatusBadRequest, "M_INVALID_PARAM", "Invalid characters in room alias")
		}
		if _, taken := s.state.aliases[alias]; taken {
			return nil, mErr(http.StatusBadRequest, "M_ROOM_IN_USE", "Room alias already taken")
		}
		// Checked before the room exists, so a refused alias leaves no room behind.
		if err := s.checkAliasCreation(c, alias); err != nil {
			return nil, err
		}
	}
	for _, is := range req.InitialState {
		var obj map[string]any
		if is.Type == "" || json.Unmarshal(is.Content, &obj) != nil || obj == nil {
			return nil, errBadJSON("initial_state events need a type and an object content")
		}
	}
	for _, inv := range req.Invite {
		if _, _, err := inv.Parse(); err != nil {
			return nil, mErr(http.StatusBadRequest, "M_INVALID_PARAM", "Invalid user id %q", inv)
		}
	}
	rm := newRoom(id.RoomID("!"+randomID(18)+":"+s.cfg.serverName), c.User)
	s.state.rooms[rm.ID] = rm
	empty := ""
	put := func(typ string, key *string, content any) {
		s.appendEvent(rm, &evt{Sender: c.User, Type: typ, StateKey: key, Content: asRaw(content), Imported: imported}, nil)
	}
	create := map[string]any{}
	if len(req.CreationContent) > 0 {
		_ = json.Unmarshal(req.CreationContent, &create)
	}
	if version != "11" {
		// Room version 11 dropped `creator`: the create event's sender is the creator.
		create["creator"] = c.User
	}
	create["room_version"] = version
	put("m.room.create", &empty, create)
	self := string(c.User)
	put("m.room.member", &self, s.memberContent(c.User, "join", nil))
	// As Synapse: initial_state replaces the preset's event of the same
	// type and key; a power_levels there is sent in the power_levels slot.
	initial := map[stateKey]bool{}
	var initialPL json.RawMessage
	for _, is := range req.InitialState {
		initial[stateKey{is.Type, is.StateKey}] = true
		if is.Type == "m.room.power_levels" && is.StateKey == "" {
			initialPL = is.Content
		}
	}
	if initialPL != nil {
		put("m.room.power_levels", &empty, initialPL)
	} else {
		put("m.room.power_levels", &empty, powerLevels(c.User, preset, req.Invite, req.PowerLevels))
	}
	if alias != "" {
		put("m.room.canonical_alias", &empty, map[string]any{"alias": alias})
		s.state.aliases[alias] = rm.ID
	}
	joinRule := "invite"
	if preset == "public_chat" {
		joinRule = "public"
	}
	if !initial[stateKey{"m.room.join_rules", ""}] {
		put("m.room.join_rules", &empty, map[string]string{"join_rule": joinRule})
	}
	if !initial[stateKey{"m.room.history_visibility", ""}] {
		put("m.room.history_visibility", &empty, map[string]string{"history_visibility": "shared"})
	}
	if preset != "public_chat" && !initial[stateKey{"m.room.guest_access", ""}] {
		put("m.room.guest_access", &empty, map[string]string{"guest_access": "can_join"})
	}
	for _, is := range req.InitialState {
		if is.Type == "m.room.power_levels" && is.StateKey == "" {
			continue
		}
		key := is.StateKey
		put(is.Type, &key, is.Content)
	}
	if req.Name != "" {
		put("m.room.name", &empty, map[string]string{"name": req.Name})
	}
	if req.Topic != "" {
		put("m.room.topic", &empty, map[string]string{"topic": req.Topic})
	}
	for _, inv := range req.Invite {
		key := string(inv)
		extra := map[string]any{}
		if req.IsDirect {
			extra["is_direct"] = true
		}
		put("m.room.member", &key, s.memberContent(inv, "invite", extra))
	}
	return rm, nil
}

func asRaw(v any) json.RawMessage {
	if raw, ok := v.(json.RawMessage); ok {
		if len(raw) == 0 {
			return json.RawMessage("{}")
		}
		return raw
	}
	return mustJSON(v)
}

// powerLevels is Synapse's default power_levels content for a new room.
func powerLevels(creator id.UserID, preset string, invitees []id.UserID, override json.RawMessage) map[string]any {
	users := map[string]any{string(creator): 100}
	if preset == "trusted_private_chat" {
		for _, u := range invitees {
			users[string(u)] = 100
		}
	}
	pl := map[string]any{
		"users": users, "users_default": 0, "events_default": 0, "state_default": 50,
		"ban": 50, "kick": 50, "redact": 50, "invite": 0,
		"events": map[string]any{
			"m.room.name": 50, "m.room.power_levels": 100, "m.room.history_visibility": 100,
			"m.room.canonical_alias": 50, "m.room.avatar": 50, "m.room.tombstone": 100,
			"m.room.server_acl": 100, "m.room.encryption": 100,
		},
		"notifications": map[string]any{"room": 50},
	}
	if len(override) > 0 {
		var o map[string]any
		if json.Unmarshal(override, &o) == nil {
			for k, v := range o {
				pl[k] = v
			}
		}
	}
	return pl
}

// memberContent builds m.room.member content with the user's profile, as
// Synapse fills displayname and avatar_url on joins and invites.
func (s *Server) memberContent(u id.UserID, membership string, extra map[string]any) map[string]any {
	c := map[string]any{"membership": membership}
	if usr := s.state.users[u]; usr != nil && membership != "leave" {
		if usr.DisplayName != "" {
			c["displayname"] = usr.DisplayName
		}
		if usr.AvatarURL != "" {
			c["avatar_url"] = usr.AvatarURL
		}
	}
	for k, v := range extra {
		c[k] = v
	}
	return c
}

// powerLevel returns a user's level and the level needed for an event type.
func (rm *room) powerLevel(u id.UserID, evType string, isState bool) (have, need int) {
	plEvt := rm.state[stateKey{"m.room.power_levels", ""}]
	if plEvt == nil {
		return 100, 0
	}
	var pl struct {
		Users         map[string]float64 `json:"users"`
		UsersDefault  float64            `json:"users_default"`
		Events        map[string]float64 `json:"events"`
		EventsDefault float64            `json:"events_default"`
		StateDefault  *float64           `json:"state_default"`
		Invite        *float64           `json:"invite"`
		Kick          *float64           `json:"kick"`
	}
	_ = json.Unmarshal(plEvt.Content, &pl)
	h, ok := pl.Users[string(u)]
	if !ok {
		h = pl.UsersDefault
	}
	n := pl.EventsDefault
	if isState {
		n = 50
		if pl.StateDefault != nil {
			n = *pl.StateDefault
		}
	}
	switch evType {
	case "invite":
		n = 0
		if pl.Invite != nil {
			n = *pl.Invite
		}
	case "kick":
		n = 50
		if pl.Kick != nil {
			n = *pl.Kick
		}
	default:
		if v, ok := pl.Events[evType]; ok {
			n = v
		}
	}
	return int(h), int(n)
}

// roomFromPath finds the {roomId} room or answers as Synapse does for an
// unknown room: 403 M_FORBIDDEN (it does not reveal whether a room exists).
func (s *Server) roomFromPath(r *http.Request, c *caller) (*room, error) {
	rid := id.RoomID(r.PathValue("roomId"))
	rm := s.state.rooms[rid]
	if rm == nil {
		return nil, errForbidden("User %s not in room %s", c.User, rid)
	}
	return rm, nil
}

// joinedRoom is roomFromPath plus the membership check every read and write makes.
func (s *Server) joinedRoom(r *http.Request, c *caller) (*room, error) {
	rm, err := s.roomFromPath(r, c)
	if err != nil {
		return nil, err
	}
	if rm.membership(c.User) != "join" {
		return nil, errForbidden("User %s not in room %s", c.User, rm.ID)
	}
	return rm, nil
}

// readableRoom is the read check of /messages, /event, /context,
// /relations and /threads: members read everything; a user who was joined
// and left (or was kicked or banned) reads up to the leave event, as
// Synapse does for history_visibility "shared"; anyone else gets 403.
// It returns the last readable stream position.
func (s *Server) readableRoom(r *http.Request, c *caller) (*room, int64, error) {
	rm, err := s.roomFromPath(r, c)
	if err != nil {
		return nil, 0, err
	}
	m := rm.state[stateKey{"m.room.member", string(c.User)}]
	switch {
	case m != nil && m.Membership == "join":
		return rm, math.MaxInt64, nil
	case m != nil && (m.Membership == "leave" || m.Membership == "ban") && rm.everJoined[c.User]:
		return rm, m.Stream, nil
	}
	return nil, 0, errForbidden("User %s not in room %s", c.User, rm.ID)
}

// historyRoom is readableRoom for /messages and /relations, which a
// Profile.NonMembersRead server serves to anyone.
func (s *Server) historyRoom(r *http.Request, c *caller) (*room, int64, error) {
	rm, upto, err := s.readableRoom(r, c)
	if err != nil && s.cfg.profile.NonMembersRead {
		if rm, err := s.roomFromPath(r, c); err == nil {
			return rm, math.MaxInt64, nil
		}
	}
	return rm, upto, err
}

func (s *Server) handleJoinByIDOrAlias(r *http.Request, c *caller) (any, error) {
	target := r.PathValue("roomIdOrAlias")
	rid := id.RoomID(target)
	if strings.HasPrefix(target, "#") {
		var ok bool
		rid, ok = s.state.aliases[id.RoomAlias(target)]
		if !ok {
			return nil, errNotFound("Room alias %s not found", target)
		}
	}
	return s.join(rid, c)
}

func (s *Server) handleJoinRoom(r *http.Request, c *caller) (any, error) {
	return s.join(id.RoomID(r.PathValue("roomId")), c)
}

func (s *Server) join(rid id.RoomID, c *caller) (any, error) {
	rm := s.state.rooms[rid]
	if rm == nil {
		// Synapse treats an unknown room id as remote and, with no servers to ask, answers 404 M_UNKNOWN.
		return nil, mErr(http.StatusNotFound, "M_UNKNOWN", "Can't join remote room because no servers that are in the room have been provided.")
	}
	switch rm.membership(c.User) {
	case "join":
		// Synapse sends a fresh join (profile refresh); repeating it is harmless for clients.
		return map[string]id.RoomID{"room_id": rm.ID}, nil
	case "invite":
	case "ban":
		return nil, errForbidden("You are banned from this room")
	default:
		if rm.joinRule() != "public" {
			return nil, errForbidden("You are not invited to this room.")
		}
	}
	key := string(c.User)
	s.appendEvent(rm, &evt{Sender: c.User, Type: "m.room.member", StateKey: &key,
		Content: mustJSON(s.memberContent(c.User, "join", nil))}, nil)
	return map[string]id.RoomID{"room_id": rm.ID}, nil
}

func (rm *room) joinRule() string {
	e := rm.state[stateKey{"m.room.join_rules", ""}]
	if e == nil {
		return "invite"
	}
	var jr struct {
		JoinRule string `json:"join_rule"`
	}
	_ = json.Unmarshal(e.Content, &jr)
	return jr.JoinRule
}

type reqMember struct {
	UserID id.UserID `json:"user_id"`
	Reason string    `json:"reason"`
}

func (s *Server) handleInvite(r *http.Request, c *caller) (any, error) {
	var req reqMember
	if err := readJSON(r, &req); err != nil {
		return nil, err
	}
	rm, err := s.joinedRoom(r, c)
	if err != nil {
		return nil, err
	}
	if _, _, err := req.UserID.Parse(); err != nil || req.UserID == "" {
		return nil, mErr(http.StatusBadRequest, "M_INVALID_PARAM", "Invalid user_id %q", req.UserID)
	}
	if have, need := rm.powerLevel(c.User, "invite", false); have < need {
		return nil, errForbidden("You don't have permission to invite users")
	}
	switch rm.membership(req.UserID) {
	case "join":
		return nil, errForbidden("%s is already in the room.", req.UserID)
	case "ban":
		return nil, errForbidden("%s is banned from the room", req.UserID)
	case "invite":
		return struct{}{}, nil
	}
	key := string(req.UserID)
	extra := map[string]any{}
	if req.Reason != "" {
		extra["reason"] = req.Reason
	}
	s.appendEvent(rm, &evt{Sender: c.User, Type: "m.room.member", StateKey: &key,
		Content: mustJSON(s.memberContent(req.UserID, "invite", extra))}, nil)
	return struct{}{}, nil
}

// handleLeave follows Synapse: leaving a room already left is a no-op 200
// (no new event), leaving a room never joined is 403, and an unknown room is
// 404 M_UNKNOWN "Not a known room".
func (s *Server) handleLeave(r *http.Request, c *caller) (any, error) {
	rm := s.state.rooms[id.RoomID(r.PathValue("roomId"))]
	if rm == nil {
		return nil, mErr(http.StatusNotFound, "M_UNKNOWN", "Not a known room")
	}
	m := rm.membership(c.User)
	if m == "leave" {
		return struct{}{}, nil
	}
	if m != "join" && m != "invite" {
		return nil, errForbidden("%s not in room %s.", c.User, rm.ID)
	}
	key := string(c.User)
	s.appendEvent(rm, &evt{Sender: c.User, Type: "m.room.member", StateKey: &key,
		Content: mustJSON(map[string]string{"membership": "leave"})}, nil)
	return struct{}{}, nil
}

func (s *Server) handleKick(r *http.Request, c *caller) (any, error) {
	var req reqMember
	if err := readJSON(r, &req); err != nil {
		return nil, err
	}
	rm, err := s.joinedRoom(r, c)
	if err != nil {
		return nil, err
	}
	if m := rm.membership(req.UserID); m != "join" && m != "invite" {
		return nil, errForbidden("The target user is not in the room")
	}
	if have, need := rm.powerLevel(c.User, "kick", false); have < need {
		return nil, errForbidden("You don't have permission to kick users")
	}
	key := string(req.UserID)
	content := map[string]string{"membership": "leave"}
	if req.Reason != "" {
		content["reason"] = req.Reason
	}
	s.appendEvent(rm, &evt{Sender: c.User, Type: "m.room.member", StateKey: &key, Content: mustJSON(content)}, nil)
	return struct{}{}, nil
}

func (s *Server) handleJoinedRooms(r *http.Request, c *caller) (any, error) {
	rooms := []id.RoomID{}
	for rid := range s.state.userRooms[c.User] {
		if s.state.rooms[rid].membership(c.User) == "join" {
			rooms = append(rooms, rid)
		}
	}
	sort.Slice(rooms, func(i, j int) bool { return rooms[i] < rooms[j] })
	return map[string]any{"joined_rooms": rooms}, nil
}

func (s *Server) handleGetAlias(r *http.Request, c *caller) (any, error) {
	alias := id.RoomAlias(r.PathValue("alias"))
	rid, ok := s.state.aliases[alias]
	if !ok {
		return nil, errNotFound("Room alias %s not found", alias)
	}
	return map[string]any{"room_id": rid, "servers": []string{s.cfg.serverName}}, nil
}

func (s *Server) handlePutAlias(r *http.Request, c *caller) (any, error) {
	var req struct {
		RoomID id.RoomID `json:"room_id"`
	}
	if err := readJSON(r, &req); err != nil {
		return nil, err
	}
	alias := id.RoomAlias(r.PathValue("alias"))
	if !strings.HasPrefix(string(alias), "#") || !strings.HasSuffix(string(alias), ":"+s.cfg.serverName) {
		return nil, mErr(http.StatusBadRequest, "M_INVALID_PARAM", "Room alias must be local: %s", alias)
	}
	// Synapse's order: an appservice is checked against its alias namespaces
	// and skips the membership check; anyone else must be in the room and
	// stay out of exclusive alias namespaces. Then a taken alias is 409.
	rm := s.state.rooms[req.RoomID]
	if c.AS == nil && (rm == nil || rm.membership(c.User) != "join") {
		return nil, errForbidden("You must be in the room to create an alias for it")
	}
	if err := s.checkAliasCreation(c, alias); err != nil {
		return nil, err
	}
	if _, ok := s.state.aliases[alias]; ok {
		return nil, mErr(http.StatusConflict, "M_UNKNOWN", "Room alias %s already exists", alias)
	}
	if rm == nil {
		return nil, mErr(http.StatusBadRequest, "M_UNKNOWN", "Room does not exist")
	}
	s.state.aliases[alias] = rm.ID
	return struct{}{}, nil
}

func (s *Server) handleDeleteAlias(r *http.Request, c *caller) (any, error) {
	alias := id.RoomAlias(r.PathValue("alias"))
	rid, ok := s.state.aliases[alias]
	if !ok {
		return nil, errNotFound("Room alias %s not found", alias)
	}
	if s.state.rooms[rid].membership(c.User) != "join" {
		return nil, errForbidden("You don't have permission to delete the alias.")
	}
	delete(s.state.aliases, alias)
	return struct{}{}, nil
}

func (s *Server) handleGetAllState(r *http.Request, c *caller) (any, error) {
	rm, err := s.joinedRoom(r, c)
	if err != nil {
		return nil, err
	}
	return s.renderAll(rm.stateEvents(), c), nil
}

// stateEvents returns the current state sorted by stream position.
func (rm *room) stateEvents() []*evt {
	out := make([]*evt, 0, len(rm.state))
	for _, e := range rm.state {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Stream < out[j].Stream })
	return out
}

func (s *Server) handleGetState(r *http.Request, c *caller) (any, error) {
	rm, err := s.joinedRoom(r, c)
	if err != nil {
		return nil, err
	}
	e := rm.state[stateKey{r.PathValue("type"), r.PathValue("key")}]
	if e == nil {
		return nil, errNotFound("Event not found.")
	}
	if r.URL.Query().Get("format") == "event" {
		return s.render(e, c), nil
	}
	return e.Content, nil
}

func (s *Server) handlePutState(r *http.Request, c *caller) (any, error) {
	content, err := readObject(r)
	if err != nil {
		return nil, err
	}
	rm, err := s.joinedRoom(r, c)
	if err != nil {
		return nil, err
	}
	typ, key := r.PathValue("type"), r.PathValue("key")
	if err := checkSize(rm, c.User, typ, &key, content); err != nil {
		return nil, err
	}
	if typ == "m.room.member" {
		return s.putMember(rm, c, id.UserID(key), content)
	}
	if have, need := rm.powerLevel(c.User, typ, true); have < need {
		return nil, errForbidden("You don't have permission to post that to the room. user_level (%d) < send_level (%d)", have, need)
	}
	if err := validateCanonical(content); err != nil {
		return nil, err
	}
	if err := s.checkRelation(rm, content); err != nil {
		return nil, err
	}
	if strings.HasPrefix(key, "@") && key != string(c.User) {
		// Synapse: state keys starting with @ are owned by that user.
		return nil, errForbidden("You are not allowed to set others state")
	}
	// Synapse deduplicates a state write that changes nothing by returning the current event.
	if cur := rm.state[stateKey{typ, key}]; cur != nil && cur.Sender == c.User && jsonEqual(cur.Content, content) {
		return map[string]id.EventID{"event_id": cur.ID}, nil
	}
	e := s.appendEvent(rm, &evt{Sender: c.User, Type: typ, StateKey: &key, Content: content}, c)
	return map[string]id.EventID{"event_id": e.ID}, nil
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}

func (s *Server) handleJoinedMembers(r *http.Request, c *caller) (any, error) {
	rm, err := s.joinedRoom(r, c)
	if err != nil {
		return nil, err
	}
	joined := map[id.UserID]map[string]any{}
	for _, u := range rm.members("join") {
		var mc struct {
			DisplayName *string `json:"displayname"`
			AvatarURL   *string `json:"avatar_url"`
		}
		_ = json.Unmarshal(rm.state[stateKey{"m.room.member", string(u)}].Content, &mc)
		joined[u] = map[string]any{"display_name": mc.DisplayName, "avatar_url": mc.AvatarURL}
	}
	return map[string]any{"joined": joined}, nil
}

func (s *Server) handleMembers(r *http.Request, c *caller) (any, error) {
	rm, err := s.joinedRoom(r, c)
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	want, notWant := q.Get("membership"), q.Get("not_membership")
	var chunk []*evt
	for _, e := range rm.stateEvents() {
		if e.Type != "m.room.member" || (want != "" && e.Membership != want) || (notWant != "" && e.Membership == notWant) {
			continue
		}
		chunk = append(chunk, e)
	}
	return map[string]any{"chunk": s.renderAll(chunk, c)}, nil
}

// putMember handles PUT /state/m.room.member/{userId} the way Synapse does:
// through the membership rules, with the caller's content kept (so a
// per-room display name is possible).
func (s *Server) putMember(rm *room, c *caller, target id.UserID, content json.RawMessage) (any, error) {
	var mc struct {
		Membership string `json:"membership"`
	}
	_ = json.Unmarshal(content, &mc)
	current := rm.membership(target)
	self := target == c.User
	switch {
	case self && mc.Membership == "join" && current == "join":
	case self && mc.Membership == "leave":
	case !self && mc.Membership == "invite":
		if have, need := rm.powerLevel(c.User, "invite", false); have < need {
			return nil, errForbidden("You don't have permission to invite users")
		}
		if current == "join" || current == "ban" {
			return nil, errForbidden("%s is already in the room or banned", target)
		}
	case !self && mc.Membership == "leave":
		if have, need := rm.powerLevel(c.User, "kick", false); have < need || (current != "join" && current != "invite") {
			return nil, errForbidden("You don't have permission to kick this user")
		}
	default:
		return nil, errForbidden("Membership change %q for %s is not allowed here", mc.Membership, target)
	}
	key := string(target)
	e := s.appendEvent(rm, &evt{Sender: c.User, Type: "m.room.member", StateKey: &key, Content: content}, c)
	return map[string]id.EventID{"event_id": e.ID}, nil
}

// knownRoomVersions are the room versions createRoom accepts: those whose
// rules fakehs models (they differ here only in the create event's creator).
// Synapse also knows "12" and unstable MSC versions; fakehs refuses them, as
// it does not model v12's room ids and creator power.
var knownRoomVersions = map[string]bool{
	"1": true, "2": true, "3": true, "4": true, "5": true, "6": true,
	"7": true, "8": true, "9": true, "10": true, "11": true,
}
