package fakehs

import (
	"net/http"

	"maunium.net/go/mautrix/id"
)

// apiFunc handles an authenticated request with Server.mu held and returns
// the 200 body or an error.
type apiFunc func(r *http.Request, c *caller) (any, error)

// publicFunc handles a request that needs no access token, with Server.mu held.
type publicFunc func(r *http.Request) (any, error)

const (
	v3 = "/_matrix/client/v3"
	v1 = "/_matrix/client/v1"
)

// handler builds the router wrapped in the fault injector.
func (s *Server) handler() http.Handler {
	mux := http.NewServeMux()
	get, post, put := "GET ", "POST ", "PUT "

	mux.HandleFunc(get+"/_matrix/client/versions", s.public(false, s.handleVersions))
	mux.HandleFunc(get+v3+"/login", s.public(false, s.handleLoginFlows))
	mux.HandleFunc(post+v3+"/login", s.public(true, s.handleLogin))
	mux.HandleFunc(post+v3+"/register", s.public(true, s.handleRegister))
	mux.HandleFunc(get+v3+"/register/available", s.public(false, s.handleRegisterAvailable))
	mux.HandleFunc(get+v3+"/account/whoami", s.read(s.handleWhoami))
	mux.HandleFunc(post+v3+"/logout", s.write(s.handleLogout))
	mux.HandleFunc(post+v3+"/logout/all", s.write(s.handleLogoutAll))
	mux.HandleFunc(get+v3+"/capabilities", s.read(s.handleCapabilities))

	mux.HandleFunc(get+v3+"/profile/{userId}", s.read(s.handleGetProfile))
	mux.HandleFunc(get+v3+"/profile/{userId}/displayname", s.read(s.handleGetDisplayName))
	mux.HandleFunc(put+v3+"/profile/{userId}/displayname", s.write(s.handleSetDisplayName))
	mux.HandleFunc(get+v3+"/profile/{userId}/avatar_url", s.read(s.handleGetAvatar))
	mux.HandleFunc(put+v3+"/profile/{userId}/avatar_url", s.write(s.handleSetAvatar))

	mux.HandleFunc(post+v3+"/user/{userId}/filter", s.write(s.handlePostFilter))
	mux.HandleFunc(get+v3+"/user/{userId}/filter/{filterId}", s.read(s.handleGetFilter))
	mux.HandleFunc(get+v3+"/user/{userId}/account_data/{type}", s.read(s.handleGetAccountData))
	mux.HandleFunc(put+v3+"/user/{userId}/account_data/{type}", s.write(s.handlePutAccountData))

	mux.HandleFunc(post+v3+"/createRoom", s.write(s.handleCreateRoom))
	mux.HandleFunc(post+v3+"/join/{roomIdOrAlias}", s.write(s.handleJoinByIDOrAlias))
	mux.HandleFunc(post+v3+"/rooms/{roomId}/join", s.write(s.handleJoinRoom))
	mux.HandleFunc(post+v3+"/rooms/{roomId}/invite", s.write(s.handleInvite))
	mux.HandleFunc(post+v3+"/rooms/{roomId}/leave", s.write(s.handleLeave))
	mux.HandleFunc(post+v3+"/rooms/{roomId}/kick", s.write(s.handleKick))
	mux.HandleFunc(get+v3+"/joined_rooms", s.read(s.handleJoinedRooms))
	mux.HandleFunc(get+v3+"/directory/room/{alias}", s.read(s.handleGetAlias))
	mux.HandleFunc(put+v3+"/directory/room/{alias}", s.write(s.handlePutAlias))
	mux.HandleFunc("DELETE "+v3+"/directory/room/{alias}", s.write(s.handleDeleteAlias))
	mux.HandleFunc(get+v3+"/rooms/{roomId}/state", s.read(s.handleGetAllState))
	mux.HandleFunc(get+v3+"/rooms/{roomId}/state/{type}", s.read(s.handleGetState))
	mux.HandleFunc(get+v3+"/rooms/{roomId}/state/{type}/{key...}", s.read(s.handleGetState))
	mux.HandleFunc(put+v3+"/rooms/{roomId}/state/{type}", s.write(s.handlePutState))
	mux.HandleFunc(put+v3+"/rooms/{roomId}/state/{type}/{key...}", s.write(s.handlePutState))
	mux.HandleFunc(get+v3+"/rooms/{roomId}/joined_members", s.read(s.handleJoinedMembers))
	mux.HandleFunc(get+v3+"/rooms/{roomId}/members", s.read(s.handleMembers))

	mux.HandleFunc(put+v3+"/rooms/{roomId}/send/{type}/{txnId}", s.write(s.handleSend))
	mux.HandleFunc(put+v3+"/rooms/{roomId}/redact/{eventId}/{txnId}", s.write(s.handleRedact))
	mux.HandleFunc(get+v3+"/rooms/{roomId}/event/{eventId}", s.read(s.handleGetEvent))
	mux.HandleFunc(get+v3+"/rooms/{roomId}/context/{eventId}", s.read(s.handleContext))
	mux.HandleFunc(get+v3+"/rooms/{roomId}/messages", s.read(s.handleMessages))
	mux.HandleFunc(get+v1+"/rooms/{roomId}/relations/{eventId}", s.read(s.handleRelations))
	mux.HandleFunc(get+v1+"/rooms/{roomId}/relations/{eventId}/{relType}", s.read(s.handleRelations))
	mux.HandleFunc(get+v1+"/rooms/{roomId}/relations/{eventId}/{relType}/{eventType}", s.read(s.handleRelations))
	mux.HandleFunc(get+v1+"/rooms/{roomId}/threads", s.read(s.handleThreads))

	// Accepted and dropped: ephemeral data the daemon may send but no test reads here.
	mux.HandleFunc(put+v3+"/rooms/{roomId}/typing/{userId}", s.read(s.handleTyping))
	mux.HandleFunc(post+v3+"/rooms/{roomId}/receipt/{receiptType}/{eventId}", s.read(s.handleAcceptMember))
	mux.HandleFunc(post+v3+"/rooms/{roomId}/read_markers", s.read(s.handleAcceptMember))
	mux.HandleFunc(put+v3+"/presence/{userId}/status", s.read(s.handleAccept))

	mux.HandleFunc(post+v3+"/keys/upload", s.write(s.handleKeysUpload))
	mux.HandleFunc(post+v3+"/keys/query", s.read(s.handleKeysQuery))
	mux.HandleFunc(post+v3+"/keys/claim", s.write(s.handleKeysClaim))
	mux.HandleFunc(put+v3+"/sendToDevice/{type}/{txnId}", s.write(s.handleSendToDevice))
	mux.HandleFunc(get+v3+"/devices", s.read(s.handleGetDevices))
	mux.HandleFunc(put+v3+"/devices/{deviceId}", s.handlePutDevice)
	mux.HandleFunc("DELETE "+v3+"/devices/{deviceId}", s.write(s.handleDeleteDevice))

	mux.HandleFunc(get+v3+"/sync", s.handleSync)
	mux.HandleFunc(post+v1+"/appservice/{appserviceId}/ping", s.handlePing)

	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if knownPathOtherMethod(mux, r) {
			// Synapse: a known path with the wrong method is 405 M_UNRECOGNIZED.
			writeError(w, mErr(http.StatusMethodNotAllowed, "M_UNRECOGNIZED", "Unrecognized request"))
			return
		}
		writeError(w, mErr(http.StatusNotFound, "M_UNRECOGNIZED", "Unrecognized request"))
	})
	return s.faultMiddleware(mux)
}

// lock takes the server lock for reading or writing and returns its release.
func (s *Server) lock(write bool) func() {
	if write {
		s.mu.Lock()
		return s.mu.Unlock
	}
	s.mu.RLock()
	return s.mu.RUnlock
}

func (s *Server) authed(write bool, fn apiFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		unlock := s.lock(write)
		c, err := s.authenticate(r)
		var body any
		if err == nil {
			body, err = fn(r, c)
		}
		unlock()
		respond(w, body, err)
	}
}

func (s *Server) read(fn apiFunc) http.HandlerFunc  { return s.authed(false, fn) }
func (s *Server) write(fn apiFunc) http.HandlerFunc { return s.authed(true, fn) }

func (s *Server) public(write bool, fn publicFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		unlock := s.lock(write)
		body, err := fn(r)
		unlock()
		respond(w, body, err)
	}
}

func respond(w http.ResponseWriter, body any, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, body)
}

func (s *Server) handleAccept(r *http.Request, c *caller) (any, error) {
	return struct{}{}, nil
}

// handleAcceptMember drops ephemeral data but still enforces membership.
func (s *Server) handleAcceptMember(r *http.Request, c *caller) (any, error) {
	if _, err := s.joinedRoom(r, c); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// handleTyping drops the notification after Synapse's checks: typing for
// another user is 400 M_FORBIDDEN (a 400, not the spec's usual 403), checked
// before membership.
func (s *Server) handleTyping(r *http.Request, c *caller) (any, error) {
	if id.UserID(r.PathValue("userId")) != c.User {
		return nil, mErr(http.StatusBadRequest, "M_FORBIDDEN", "Cannot set another user's typing state")
	}
	return s.handleAcceptMember(r, c)
}

// knownPathOtherMethod reports whether the path is routed for another method.
func knownPathOtherMethod(mux *http.ServeMux, r *http.Request) bool {
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodPost, http.MethodDelete} {
		if m == r.Method {
			continue
		}
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := mux.Handler(probe); pattern != "" && pattern != "/" {
			return true
		}
	}
	return false
}
