package fakehs

import (
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"maunium.net/go/mautrix/id"
)

// user is one local account.
type user struct {
	ID          id.UserID
	Password    string
	DisplayName string
	AvatarURL   string
	appservice  *asState // set for an appservice's sender user
	accountData map[string]json.RawMessage
}

func newUser(uid id.UserID) *user {
	return &user{ID: uid, accountData: map[string]json.RawMessage{}}
}

// session is one access token.
type session struct {
	Token  string
	User   id.UserID
	Device id.DeviceID
}

// caller is who made a request: a user via a session, or an appservice
// acting as one of its users.
type caller struct {
	User   id.UserID
	Device id.DeviceID
	Token  string
	AS     *asState
}

// txnScope is the scope of the caller's transaction ids, as Synapse's
// HttpTransactionCache keys them: the whole appservice (whichever user it
// acts as), or the user's device.
func (c *caller) txnScope() string {
	if c.AS != nil {
		return "as:" + c.AS.reg.ID
	}
	return "dev:" + string(c.User) + "|" + string(c.Device)
}

// seesTxnID follows Synapse's serializer: the sender sees its own
// transaction_id from the same device; for events sent without a device
// (appservices) from the same token, or from any appservice request.
func (c *caller) seesTxnID(e *evt) bool {
	if c == nil || e.TxnID == "" || c.User != e.Sender {
		return false
	}
	if e.txnDevice != "" {
		return e.txnDevice == c.Device
	}
	return e.txnToken == c.Token || c.AS != nil
}

// accessToken returns the request's token from the Authorization header or,
// as Synapse still accepts, the access_token query parameter.
func accessToken(r *http.Request) string {
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		return strings.TrimSpace(strings.TrimPrefix(h, "Bearer "))
	}
	return r.URL.Query().Get("access_token")
}

// findAS returns the appservice whose as_token this is.
func (s *Server) findAS(token string) *asState {
	for _, as := range s.asList {
		if subtle.ConstantTimeCompare([]byte(as.reg.AppToken), []byte(token)) == 1 {
			return as
		}
	}
	return nil
}

// authenticate resolves the caller; called with s.mu held (read or write).
// It follows Synapse's Auth.get_user_by_req, including ?user_id= for appservices.
func (s *Server) authenticate(r *http.Request) (*caller, error) {
	token := accessToken(r)
	if token == "" {
		return nil, mErr(http.StatusUnauthorized, "M_MISSING_TOKEN", "Missing access token.")
	}
	if as := s.findAS(token); as != nil {
		return s.appserviceCaller(r, as, token)
	}
	sess := s.state.sessions[token]
	if sess == nil {
		return nil, mErr(http.StatusUnauthorized, "M_UNKNOWN_TOKEN", "Invalid access token passed.").WithExtraField("soft_logout", false)
	}
	return &caller{User: sess.User, Device: sess.Device, Token: token}, nil
}

// appserviceCaller checks ?user_id= impersonation. Synapse answers 403
// M_FORBIDDEN both for a user outside the namespace and for a namespace user
// that was never registered: appservice users are NOT created on first use;
// the appservice must register them with m.login.application_service first.
func (s *Server) appserviceCaller(r *http.Request, as *asState, token string) (*caller, error) {
	uid := as.sender
	if q := r.URL.Query().Get("user_id"); q != "" {
		uid = id.UserID(q)
	}
	if !as.owns(uid) {
		return nil, errForbidden("Application service cannot masquerade as this user (%s).", uid)
	}
	if _, ok := s.state.users[uid]; !ok {
		return nil, errForbidden("Application service has not registered this user (%s)", uid)
	}
	dev, err := s.masqueradedDevice(r, uid)
	if err != nil {
		return nil, err
	}
	return &caller{User: uid, Device: dev, Token: token, AS: as}, nil
}

// peekUser names the requester for fault matching without failing the request.
func (s *Server) peekUser(r *http.Request) id.UserID {
	s.mu.RLock()
	defer s.mu.RUnlock()
	c, err := s.authenticate(r)
	if err != nil {
		return ""
	}
	return c.User
}

// newSession creates an access token for a user.
func (st *store) newSession(uid id.UserID, device id.DeviceID) *session {
	if device == "" {
		st.nextDev++
		device = id.DeviceID(fmt.Sprintf("FAKEDEV%04d", st.nextDev))
	}
	sess := &session{Token: "syt_" + randomID(24), User: uid, Device: device}
	st.sessions[sess.Token] = sess
	return sess
}

// RegisterUser creates a local user directly (no HTTP) and returns its id and
// an access token. The password is the localpart, so tests can also log in.
func (s *Server) RegisterUser(localpart, displayName string) (id.UserID, string, error) {
	if id.ValidateUserLocalpart(localpart) != nil {
		return "", "", fmt.Errorf("register %q: invalid localpart", localpart)
	}
	uid := id.NewUserID(localpart, s.cfg.serverName)
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.state.users[uid]; ok {
		return "", "", fmt.Errorf("register %s: user already exists", uid)
	}
	u := newUser(uid)
	u.Password = localpart
	u.DisplayName = displayName
	s.state.users[uid] = u
	return uid, s.state.newSession(uid, "").Token, nil
}
