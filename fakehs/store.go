package fakehs

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"sort"
	"time"

	"maunium.net/go/mautrix/id"
)

// store is all server state. Every field is guarded by Server.mu.
type store struct {
	serverName string
	stream     int64 // last global stream position handed out
	wake       chan struct{}

	users    map[id.UserID]*user
	sessions map[string]*session // by access token
	rooms    map[id.RoomID]*room
	aliases  map[id.RoomAlias]id.RoomID
	events   map[id.EventID]*evt
	txns     map[txnKey]id.EventID
	filters  map[id.UserID][]json.RawMessage
	// userRooms lists every room a user id has any membership in, for /sync
	// and joined_rooms; kept by user id so an invite to a not yet registered
	// appservice user is found once it registers.
	userRooms map[id.UserID]map[id.RoomID]bool
	nextDev   int
	// e2ee is what encrypting clients upload and send each other (e2ee.go).
	e2ee e2eeState
}

// txnKey is a transaction: the request path (which holds room, event type
// and txn id) in the caller's scope, as in Synapse.
type txnKey struct {
	scope string
	path  string
}

func newStore(serverName string) *store {
	return &store{
		serverName: serverName,
		wake:       make(chan struct{}),
		users:      map[id.UserID]*user{},
		sessions:   map[string]*session{},
		rooms:      map[id.RoomID]*room{},
		aliases:    map[id.RoomAlias]id.RoomID{},
		events:     map[id.EventID]*evt{},
		txns:       map[txnKey]id.EventID{},
		filters:    map[id.UserID][]json.RawMessage{},
		userRooms:  map[id.UserID]map[id.RoomID]bool{},
		e2ee:       newE2EEState(),
	}
}

// nextStream hands out the next stream position.
func (st *store) nextStream() int64 {
	st.stream++
	return st.stream
}

// notify wakes every long-poll waiting for the stream to move.
func (st *store) notify() {
	close(st.wake)
	st.wake = make(chan struct{})
}

// randomID returns n random bytes as unpadded URL-safe base64.
func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// evt is one stored event. Content is kept as raw JSON so it is returned
// exactly as sent (m.mentions and unknown keys pass through untouched).
type evt struct {
	ID       id.EventID
	Room     *room
	Sender   id.UserID
	Type     string
	StateKey *string
	Content  json.RawMessage
	TS       int64
	Stream   int64
	Imported bool
	// visibleAt is when reads may show the event (Profile.VisibilityDelay).
	visibleAt time.Time

	// Relation parsed from content.m.relates_to.
	RelType string
	RelTo   id.EventID

	// TxnID, txnDevice and txnToken let the sender's own reads show
	// unsigned.transaction_id.
	TxnID     string
	txnDevice id.DeviceID
	txnToken  string
	txnPath   string // request path, the transaction's key
	// Redacts is the target of an m.room.redaction.
	Redacts id.EventID
	// RedactedBy is the first redaction applied to this event, shown as
	// unsigned.redacted_because.
	RedactedBy *evt
	// Membership of a m.room.member event, parsed once.
	Membership string
	// Replaces is the state event this one replaced (same type and state
	// key), shown as unsigned.prev_content, prev_sender and replaces_state.
	Replaces *evt
}

// room is one room: a timeline ordered by stream position, current state
// and the relation indexes that keep /relations and /threads off full scans.
type room struct {
	ID      id.RoomID
	Creator id.UserID
	events  []*evt // ascending Stream
	state   map[stateKey]*evt
	// children maps an event to the events relating to it, ascending Stream.
	children map[id.EventID][]*evt
	threads  map[id.EventID]*thread
	// edits maps an event to its latest applicable m.replace, bundled in
	// unsigned.m.relations as Synapse does.
	edits map[id.EventID]*evt
	// refs maps an event to its m.reference children, ascending Stream,
	// bundled in unsigned.m.relations.m.reference.
	refs map[id.EventID][]*evt
	// threadOrder lists threads by latest activity, ascending.
	threadOrder []*thread
	// everJoined marks users who were joined at some point: after leaving
	// they may still read history up to their leave, as in Synapse.
	everJoined map[id.UserID]bool
}

type stateKey struct{ Type, Key string }

// thread is a thread root and its replies.
type thread struct {
	Root         *evt
	Replies      []*evt // ascending Stream
	Participants map[id.UserID]bool
}

func (t *thread) latest() *evt { return t.Replies[len(t.Replies)-1] }

// latestStream orders threads; a thread is listed once it has a reply.
func (t *thread) latestStream() int64 { return t.latest().Stream }

func newRoom(rid id.RoomID, creator id.UserID) *room {
	return &room{
		ID: rid, Creator: creator,
		state:      map[stateKey]*evt{},
		children:   map[id.EventID][]*evt{},
		threads:    map[id.EventID]*thread{},
		edits:      map[id.EventID]*evt{},
		refs:       map[id.EventID][]*evt{},
		everJoined: map[id.UserID]bool{},
	}
}

// membership returns the user's current membership ("" when never a member).
func (r *room) membership(u id.UserID) string {
	if e := r.state[stateKey{"m.room.member", string(u)}]; e != nil {
		return e.Membership
	}
	return ""
}

// members returns users with the given membership, sorted.
func (r *room) members(membership string) []id.UserID {
	var out []id.UserID
	for k, e := range r.state {
		if k.Type == "m.room.member" && e.Membership == membership {
			out = append(out, id.UserID(k.Key))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// indexAfter returns the index of the first event with Stream > pos.
func indexAfter(events []*evt, pos int64) int {
	return sort.Search(len(events), func(i int) bool { return events[i].Stream > pos })
}

// lastStream is the stream position of the room's newest event.
func (r *room) lastStream() int64 {
	if len(r.events) == 0 {
		return 0
	}
	return r.events[len(r.events)-1].Stream
}

// addUserRoom records a membership of u in rm.
func (st *store) addUserRoom(u id.UserID, rm *room) {
	rooms := st.userRooms[u]
	if rooms == nil {
		rooms = map[id.RoomID]bool{}
		st.userRooms[u] = rooms
	}
	rooms[rm.ID] = true
}
