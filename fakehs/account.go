package fakehs

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"maunium.net/go/mautrix/id"
)

func (s *Server) handleVersions(r *http.Request) (any, error) {
	return map[string]any{
		"versions": []string{"r0.6.1", "v1.1", "v1.2", "v1.3", "v1.4", "v1.5", "v1.6",
			"v1.7", "v1.8", "v1.9", "v1.10", "v1.11", "v1.12"},
		"unstable_features": map[string]bool{"org.matrix.msc3874": true, "org.matrix.msc3440.stable": true},
	}, nil
}

func (s *Server) handleLoginFlows(r *http.Request) (any, error) {
	return map[string]any{"flows": []map[string]string{
		{"type": "m.login.password"}, {"type": "m.login.application_service"},
	}}, nil
}

func (s *Server) handleCapabilities(r *http.Request, c *caller) (any, error) {
	return map[string]any{"capabilities": map[string]any{
		"m.change_password": map[string]bool{"enabled": false},
		"m.room_versions":   map[string]any{"default": "11", "available": map[string]string{"10": "stable", "11": "stable"}},
		"m.set_displayname": map[string]bool{"enabled": true},
		"m.set_avatar_url":  map[string]bool{"enabled": true},
		"m.3pid_changes":    map[string]bool{"enabled": false},
		"m.get_login_token": map[string]bool{"enabled": false},
	}}, nil
}

type reqRegister struct {
	Username     string `json:"username"`
	Password     string `json:"password"`
	DeviceID     string `json:"device_id"`
	InhibitLogin bool   `json:"inhibit_login"`
	Type         string `json:"type"`
	Auth         *struct {
		Type    string `json:"type"`
		Session string `json:"session"`
	} `json:"auth"`
}

// handleRegister implements open registration with the UIA dance Synapse
// does: a first request without "auth" gets 401 with the m.login.dummy flow
// and a session; the second completes it. Appservices register their users
// with type m.login.application_service and their as_token.
func (s *Server) handleRegister(r *http.Request) (any, error) {
	var req reqRegister
	if err := readJSON(r, &req); err != nil {
		return nil, err
	}
	if kind := r.URL.Query().Get("kind"); kind == "guest" {
		return nil, mErr(http.StatusForbidden, "M_GUEST_ACCESS_FORBIDDEN", "Guest access is disabled")
	}
	// Synapse forks on the body's "type" only (not auth.type), and refuses
	// any other registration that carries an access token.
	if req.Type == "m.login.application_service" {
		return s.registerAppserviceUser(r, &req)
	}
	if accessToken(r) != "" {
		return nil, mErr(http.StatusBadRequest, "M_UNKNOWN",
			"An access token should not be provided on requests to /register (except if type is m.login.application_service)")
	}
	if req.Username == "" {
		req.Username = "user" + strconv.Itoa(len(s.state.users)+1) + strings.ToLower(randomID(3))
		req.Username = strings.NewReplacer("_", "", "-", "").Replace(req.Username)
	}
	if _, err := s.checkAvailable(req.Username); err != nil {
		return nil, err
	}
	uid, err := s.checkNewUsername(req.Username)
	if err != nil {
		return nil, err
	}
	if req.Auth == nil || req.Auth.Type == "" {
		return nil, &uiaChallenge{}
	}
	if req.Auth.Type != "m.login.dummy" {
		return nil, mErr(http.StatusUnauthorized, "M_UNRECOGNIZED", "Unrecognised auth type %q", req.Auth.Type)
	}
	return s.createAccount(uid, &req), nil
}

func (s *Server) registerAppserviceUser(r *http.Request, req *reqRegister) (any, error) {
	token := accessToken(r)
	as := s.findAS(token)
	if token == "" {
		return nil, mErr(http.StatusBadRequest, "M_UNKNOWN", "Appservice token must be provided when using a type of m.login.application_service")
	}
	if as == nil {
		return nil, mErr(http.StatusUnauthorized, "M_UNKNOWN_TOKEN", "Invalid access token passed.")
	}
	uid, err := s.checkNewUsername(req.Username)
	if err != nil {
		return nil, err
	}
	if !as.owns(uid) {
		// Synapse: 400 M_EXCLUSIVE "Invalid user localpart for this application service."
		return nil, mErr(http.StatusBadRequest, "M_EXCLUSIVE", "Invalid user localpart for this application service.")
	}
	return s.createAccount(uid, req), nil
}

func (s *Server) checkNewUsername(localpart string) (id.UserID, error) {
	localpart = strings.TrimPrefix(localpart, "@")
	if i := strings.IndexByte(localpart, ':'); i >= 0 {
		localpart = localpart[:i]
	}
	if id.ValidateUserLocalpart(localpart) != nil {
		return "", mErr(http.StatusBadRequest, "M_INVALID_USERNAME", "User ID can only contain characters a-z, 0-9, or '=_-./+'")
	}
	uid := id.NewUserID(localpart, s.cfg.serverName)
	if _, ok := s.state.users[uid]; ok {
		return "", mErr(http.StatusBadRequest, "M_USER_IN_USE", "User ID already taken.")
	}
	return uid, nil
}

func (s *Server) createAccount(uid id.UserID, req *reqRegister) map[string]any {
	u := newUser(uid)
	u.Password = req.Password
	// Synapse sets the initial display name to the localpart.
	u.DisplayName = uid.Localpart()
	s.state.users[uid] = u
	resp := map[string]any{"user_id": uid, "home_server": s.cfg.serverName}
	if !req.InhibitLogin {
		sess := s.state.newSession(uid, id.DeviceID(req.DeviceID))
		resp["access_token"] = sess.Token
		resp["device_id"] = sess.Device
	}
	return resp
}

// uiaChallenge is the 401 user-interactive-auth body (no errcode, as real servers send).
type uiaChallenge struct{}

func (*uiaChallenge) Error() string { return "user-interactive auth required" }

func (s *Server) handleRegisterAvailable(r *http.Request) (any, error) {
	if _, err := s.checkAvailable(r.URL.Query().Get("username")); err != nil {
		return nil, err
	}
	return map[string]bool{"available": true}, nil
}

// checkAvailable is Synapse's check_username for a normal registration:
// a valid localpart, outside every appservice's exclusive namespace (checked
// before whether it is taken, so a registered namespace user is M_EXCLUSIVE
// too), and not taken.
func (s *Server) checkAvailable(localpart string) (id.UserID, error) {
	lp := strings.TrimPrefix(localpart, "@")
	if i := strings.IndexByte(lp, ':'); i >= 0 {
		lp = lp[:i]
	}
	if id.ValidateUserLocalpart(lp) != nil {
		return "", mErr(http.StatusBadRequest, "M_INVALID_USERNAME", "User ID can only contain characters a-z, 0-9, or '=_-./+'")
	}
	if s.exclusiveOwner(id.NewUserID(lp, s.cfg.serverName)) != nil {
		return "", mErr(http.StatusBadRequest, "M_EXCLUSIVE", "This user ID is reserved by an application service.")
	}
	return s.checkNewUsername(lp)
}

type reqLogin struct {
	Type       string `json:"type"`
	User       string `json:"user"`
	Password   string `json:"password"`
	DeviceID   string `json:"device_id"`
	Identifier struct {
		Type string `json:"type"`
		User string `json:"user"`
	} `json:"identifier"`
}

func (s *Server) handleLogin(r *http.Request) (any, error) {
	var req reqLogin
	if err := readJSON(r, &req); err != nil {
		return nil, err
	}
	name := req.Identifier.User
	if name == "" {
		name = req.User
	}
	uid := s.qualify(name)
	switch req.Type {
	case "m.login.password":
		u := s.state.users[uid]
		if u == nil || u.Password == "" || u.Password != req.Password {
			return nil, errForbidden("Invalid username or password")
		}
	case "m.login.application_service":
		as := s.findAS(accessToken(r))
		if as == nil {
			return nil, mErr(http.StatusUnauthorized, "M_UNKNOWN_TOKEN", "Invalid access token passed.")
		}
		if !as.owns(uid) {
			return nil, errForbidden("Application service cannot log in as this user")
		}
		if _, ok := s.state.users[uid]; !ok {
			return nil, errForbidden("Invalid username or password")
		}
	default:
		return nil, mErr(http.StatusBadRequest, "M_UNKNOWN", "Unknown login type %s", req.Type)
	}
	sess := s.state.newSession(uid, id.DeviceID(req.DeviceID))
	return map[string]any{"user_id": uid, "access_token": sess.Token, "device_id": sess.Device,
		"home_server": s.cfg.serverName}, nil
}

// qualify turns "alice" or "@alice:server" into a user id on this server.
func (s *Server) qualify(name string) id.UserID {
	if strings.HasPrefix(name, "@") {
		return id.UserID(name)
	}
	return id.NewUserID(strings.ToLower(name), s.cfg.serverName)
}

func (s *Server) handleWhoami(r *http.Request, c *caller) (any, error) {
	resp := map[string]any{"user_id": c.User, "is_guest": false}
	if c.Device != "" {
		resp["device_id"] = c.Device
	}
	return resp, nil
}

func (s *Server) handleLogout(r *http.Request, c *caller) (any, error) {
	if c.AS == nil {
		delete(s.state.sessions, c.Token)
	}
	return struct{}{}, nil
}

func (s *Server) handleLogoutAll(r *http.Request, c *caller) (any, error) {
	for tok, sess := range s.state.sessions {
		if sess.User == c.User {
			delete(s.state.sessions, tok)
		}
	}
	return struct{}{}, nil
}

func (s *Server) profileUser(r *http.Request) (*user, error) {
	u := s.state.users[id.UserID(r.PathValue("userId"))]
	if u == nil {
		return nil, errNotFound("Profile was not found")
	}
	return u, nil
}

func (s *Server) handleGetProfile(r *http.Request, c *caller) (any, error) {
	u, err := s.profileUser(r)
	if err != nil {
		// Synapse's whole-profile lookup answers 404 M_UNKNOWN ("No row found"),
		// while /profile/{userId}/displayname says 404 M_NOT_FOUND.
		return nil, mErr(http.StatusNotFound, "M_UNKNOWN", "No row found (profiles)")
	}
	resp := map[string]any{}
	if u.DisplayName != "" {
		resp["displayname"] = u.DisplayName
	}
	if u.AvatarURL != "" {
		resp["avatar_url"] = u.AvatarURL
	}
	return resp, nil
}

func (s *Server) handleGetDisplayName(r *http.Request, c *caller) (any, error) {
	u, err := s.profileUser(r)
	if err != nil {
		return nil, err
	}
	if u.DisplayName == "" {
		return struct{}{}, nil
	}
	return map[string]string{"displayname": u.DisplayName}, nil
}

func (s *Server) handleGetAvatar(r *http.Request, c *caller) (any, error) {
	u, err := s.profileUser(r)
	if err != nil {
		return nil, err
	}
	if u.AvatarURL == "" {
		return struct{}{}, nil
	}
	return map[string]string{"avatar_url": u.AvatarURL}, nil
}

func (s *Server) ownProfile(r *http.Request, c *caller) (*user, error) {
	u, err := s.profileUser(r)
	if err != nil {
		return nil, err
	}
	if u.ID != c.User {
		return nil, errForbidden("Cannot set another user's profile")
	}
	return u, nil
}

func (s *Server) handleSetDisplayName(r *http.Request, c *caller) (any, error) {
	var req struct {
		DisplayName *string `json:"displayname"`
	}
	if err := readJSON(r, &req); err != nil {
		return nil, err
	}
	u, err := s.ownProfile(r, c)
	if err != nil {
		return nil, err
	}
	if req.DisplayName == nil {
		return nil, mErr(http.StatusBadRequest, "M_MISSING_PARAM", "Missing key 'displayname'")
	}
	u.DisplayName = *req.DisplayName
	s.refreshMemberEvents(u, c)
	return struct{}{}, nil
}

func (s *Server) handleSetAvatar(r *http.Request, c *caller) (any, error) {
	var req struct {
		AvatarURL *string `json:"avatar_url"`
	}
	if err := readJSON(r, &req); err != nil {
		return nil, err
	}
	u, err := s.ownProfile(r, c)
	if err != nil {
		return nil, err
	}
	if req.AvatarURL == nil {
		return nil, mErr(http.StatusBadRequest, "M_MISSING_PARAM", "Missing key 'avatar_url'")
	}
	u.AvatarURL = *req.AvatarURL
	s.refreshMemberEvents(u, c)
	return struct{}{}, nil
}

// refreshMemberEvents sends a new join event with the new profile into every
// room the user is joined to, as Synapse does on a profile change.
func (s *Server) refreshMemberEvents(u *user, c *caller) {
	for rid := range s.state.userRooms[u.ID] {
		rm := s.state.rooms[rid]
		if rm == nil || rm.membership(u.ID) != "join" {
			continue
		}
		content := s.memberContent(u.ID, "join", nil)
		key := string(u.ID)
		s.appendEvent(rm, &evt{Sender: u.ID, Type: "m.room.member", StateKey: &key, Content: mustJSON(content)}, nil)
	}
}

func (s *Server) checkSelf(r *http.Request, c *caller) error {
	if id.UserID(r.PathValue("userId")) != c.User {
		return errForbidden("Cannot access another user's data")
	}
	return nil
}

func (s *Server) handlePostFilter(r *http.Request, c *caller) (any, error) {
	if err := s.checkSelf(r, c); err != nil {
		return nil, err
	}
	raw, err := readObject(r)
	if err != nil {
		return nil, err
	}
	if _, err := parseSyncFilter(raw); err != nil {
		return nil, err
	}
	s.state.filters[c.User] = append(s.state.filters[c.User], raw)
	return map[string]string{"filter_id": strconv.Itoa(len(s.state.filters[c.User]) - 1)}, nil
}

func (s *Server) handleGetFilter(r *http.Request, c *caller) (any, error) {
	if err := s.checkSelf(r, c); err != nil {
		return nil, err
	}
	raw, ok := s.storedFilter(c.User, r.PathValue("filterId"))
	if !ok {
		return nil, errNotFound("No such filter")
	}
	return raw, nil
}

func (s *Server) storedFilter(u id.UserID, fid string) (json.RawMessage, bool) {
	n, err := strconv.Atoi(fid)
	list := s.state.filters[u]
	if err != nil || n < 0 || n >= len(list) {
		return nil, false
	}
	return list[n], true
}

func (s *Server) handleGetAccountData(r *http.Request, c *caller) (any, error) {
	if err := s.checkSelf(r, c); err != nil {
		return nil, err
	}
	raw, ok := s.state.users[c.User].accountData[r.PathValue("type")]
	if !ok {
		return nil, errNotFound("Account data not found")
	}
	return raw, nil
}

func (s *Server) handlePutAccountData(r *http.Request, c *caller) (any, error) {
	if err := s.checkSelf(r, c); err != nil {
		return nil, err
	}
	raw, err := readObject(r)
	if err != nil {
		return nil, err
	}
	s.state.users[c.User].accountData[r.PathValue("type")] = raw
	return struct{}{}, nil
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only called on maps built here from JSON-safe values
	}
	return b
}
