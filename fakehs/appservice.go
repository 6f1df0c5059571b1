package fakehs

import (
	"fmt"
	"net/http"
	"regexp"
	"sync"

	"maunium.net/go/mautrix/appservice"
	"maunium.net/go/mautrix/id"
)

// asState is one registered application service and its push queue.
type asState struct {
	reg     *appservice.Registration
	sender  id.UserID
	users   []nsRegex
	aliases []nsRegex

	qmu    sync.Mutex
	queue  []*evt
	signal chan struct{} // capacity 1: "the queue grew"
	txnSeq int64
	// pushed is every transaction delivered, for Repush; repush the ones
	// queued to go again, before the queue; repushed counts those delivered.
	pushed   []pushedTxn
	repush   []pushedTxn
	repushed int
	heldBack int // looks at the queues while stopped (restart_test.go)
	// toDevice and devChanged wait, like queue, for the next transaction:
	// to-device messages for its users' devices (MSC2409) and users whose
	// device lists changed (MSC3202), asdevices.go.
	toDevice   []map[string]any
	devChanged []id.UserID
}

// pushedTxn is one transaction as it was delivered.
type pushedTxn struct {
	id     string
	events []*evt
	extras txnExtras
}

type nsRegex struct {
	re        *regexp.Regexp
	exclusive bool
}

func newASState(reg *appservice.Registration, serverName string) (*asState, error) {
	if reg == nil || reg.AppToken == "" || reg.ID == "" || reg.SenderLocalpart == "" {
		return nil, fmt.Errorf("appservice registration needs id, as_token and sender_localpart")
	}
	as := &asState{
		reg:    reg,
		sender: id.NewUserID(reg.SenderLocalpart, serverName),
		signal: make(chan struct{}, 1),
	}
	for _, ns := range reg.Namespaces.UserIDs {
		// Synapse anchors namespace regexes with re.match at the start only;
		// registrations normally anchor both ends themselves.
		re, err := regexp.Compile("^(?:" + ns.Regex + ")")
		if err != nil {
			return nil, fmt.Errorf("appservice %s: user namespace %q: %w", reg.ID, ns.Regex, err)
		}
		as.users = append(as.users, nsRegex{re: re, exclusive: ns.Exclusive})
	}
	for _, ns := range reg.Namespaces.RoomAliases {
		re, err := regexp.Compile("^(?:" + ns.Regex + ")")
		if err != nil {
			return nil, fmt.Errorf("appservice %s: alias namespace %q: %w", reg.ID, ns.Regex, err)
		}
		as.aliases = append(as.aliases, nsRegex{re: re, exclusive: ns.Exclusive})
	}
	return as, nil
}

// ownsAlias reports whether the alias is in one of the appservice's alias
// namespaces, exclusive or not: Synapse's is_room_alias_in_namespace.
func (as *asState) ownsAlias(alias id.RoomAlias) bool {
	for _, ns := range as.aliases {
		if ns.re.MatchString(string(alias)) {
			return true
		}
	}
	return false
}

// checkAliasCreation follows Synapse's DirectoryHandler.create_association:
// an appservice (whichever user it acts as) may only create aliases in its
// own alias namespaces, and nobody else may create one inside an
// appservice's exclusive alias namespace. Both are 400 M_EXCLUSIVE.
func (s *Server) checkAliasCreation(c *caller, alias id.RoomAlias) error {
	if c.AS != nil {
		if !c.AS.ownsAlias(alias) {
			return mErr(http.StatusBadRequest, "M_EXCLUSIVE", "This application service has not reserved this kind of alias.")
		}
		return nil
	}
	for _, as := range s.asList {
		for _, ns := range as.aliases {
			if ns.exclusive && ns.re.MatchString(string(alias)) {
				return mErr(http.StatusBadRequest, "M_EXCLUSIVE", "This alias is reserved by an application service.")
			}
		}
	}
	return nil
}

// owns reports whether the user is the AS sender or inside its user namespace.
func (as *asState) owns(u id.UserID) bool {
	if u == as.sender {
		return true
	}
	for _, ns := range as.users {
		if ns.re.MatchString(string(u)) {
			return true
		}
	}
	return false
}

// exclusiveOwner returns the appservice that exclusively owns a user id, if any.
func (s *Server) exclusiveOwner(u id.UserID) *asState {
	for _, as := range s.asList {
		if u == as.sender {
			return as
		}
		for _, ns := range as.users {
			if ns.exclusive && ns.re.MatchString(string(u)) {
				return as
			}
		}
	}
	return nil
}

// registerASSender creates the appservice's sender user, as Synapse does at startup.
func (st *store) registerASSender(as *asState) {
	if _, ok := st.users[as.sender]; !ok {
		st.users[as.sender] = newUser(as.sender)
	}
	st.users[as.sender].appservice = as
}

// interested follows Synapse's ApplicationService.is_interested_in_event:
// the sender, a member event's state_key, or any joined member of the room
// inside the namespace.
func (as *asState) interested(e *evt) bool {
	if as.owns(e.Sender) {
		return true
	}
	if e.Type == "m.room.member" && e.StateKey != nil && as.owns(id.UserID(*e.StateKey)) {
		return true
	}
	for k, m := range e.Room.state {
		if k.Type == "m.room.member" && m.Membership == "join" && as.owns(id.UserID(k.Key)) {
			return true
		}
	}
	return false
}

// enqueue queues an event for the pusher; called with Server.mu held.
func (as *asState) enqueue(e *evt) {
	as.qmu.Lock()
	as.queue = append(as.queue, e)
	as.qmu.Unlock()
	select {
	case as.signal <- struct{}{}:
	default:
	}
}
