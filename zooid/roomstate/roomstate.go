// Package roomstate is the daemon's own view of its bound rooms' state: each
// room's name, canonical alias, members (membership and display name), the
// Zooid agents its dev.zooid.agent state marks and its encryption. It
// is read once per room from the homeserver when the daemon starts and kept
// current from the state events the daemon receives anyway (pushes or /sync),
// so the room tools (zooid_get_room_info, zooid_get_members, zooid_get_rooms)
// answer without asking the homeserver, and the daemon's start-up learns
// other daemons' agents and warns of encrypted rooms from the same one read.
// Where the cache cannot be sure it is
// current (a gap the transport knows of, a redacted state event, a room none
// of the daemon's users is joined to, whose events the daemon no longer
// receives), the next read of that room reads it again.
package roomstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/zevent"
)

// Loader reads a room's current state events from the homeserver (one
// request: GET /rooms/{room}/state) as one of the daemon's users, trying
// those in prefer first (the cache's own view of who of them is joined), and
// says whom it read as.
type Loader func(ctx context.Context, room id.RoomID, prefer []id.UserID) (state []*event.Event, as id.UserID, err error)

// Options configure a Cache.
type Options struct {
	// Load reads a room's state; required.
	Load Loader
	// Ours says whether a user is one of the daemon's own (an agent): while
	// none of them is joined to a room, the daemon receives none of its
	// events, so the room is not current.
	Ours func(id.UserID) bool
	// Logger hears of failed loads; nil: slog.Default.
	Logger *slog.Logger
}

// ErrUnknownRoom is returned for a room the cache was not given (Seed): not
// one of the daemon's bound rooms.
var ErrUnknownRoom = errors.New("not a room the daemon is bound to")

// Member is one member of a room as its m.room.member state says.
type Member struct {
	Membership  event.Membership
	DisplayName string
}

// Room is a copy of one room's state, current when it was handed out.
type Room struct {
	ID    id.RoomID
	Name  string
	Alias id.RoomAlias
	// Members holds every user with a membership, joined or not.
	Members map[id.UserID]Member
	// Agents are the users the room's dev.zooid.agent state marks as Zooid
	// agents (this daemon's and other daemons'), as zevent.AgentOf reads
	// each marker; an emptied marker is no agent.
	Agents map[id.UserID]zevent.AgentContent
	// Encryption is the algorithm of the room's m.room.encryption state:
	// "" while the room is not end-to-end encrypted.
	Encryption id.Algorithm
}

// Joined says whether user is a joined member.
func (r Room) Joined(user id.UserID) bool {
	return r.Members[user].Membership == event.MembershipJoin
}

// stateKey is one piece of state: an event type and its state key.
type stateKey struct {
	typ, key string
}

// entry is one room's state and what the cache knows of its currency.
type entry struct {
	room Room
	// ids are the event ids of the state held, so a redaction of one is
	// seen (it changes the state in ways the redacted content does not say).
	ids map[stateKey]id.EventID
	// current says the state is the homeserver's: read, then kept up to
	// date from every event since.
	current bool
	// loading is non-nil while a read runs; closed when it ends. Events
	// applied meanwhile are also kept in log, to replay on the state read.
	loading chan struct{}
	log     []*event.Event
	// staleAgain says the room became uncertain while a read ran, so the
	// state read is not current either.
	staleAgain bool
	// loadErr is why the last read failed, for the reads waiting on it.
	loadErr error
}

// Cache is the daemon's room state. It is safe for concurrent use; it owns
// the goroutines of its reads, which Close stops and waits for.
type Cache struct {
	opts Options
	log  *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	slots  chan struct{} // bounds the reads in flight at once

	mu    sync.Mutex
	rooms map[id.RoomID]*entry
	// closed says Close began: no read starts after it.
	closed bool
}

// ErrClosed is returned for a room that is not current once Close began.
var ErrClosed = errors.New("the room state is closed")

// loadsInFlight bounds the homeserver reads the cache keeps open at once, so
// a daemon bound to many rooms does not ask for all of them in one burst.
const loadsInFlight = 8

// New returns an empty cache; Seed gives it its rooms.
func New(opts Options) *Cache {
	if opts.Ours == nil {
		opts.Ours = func(id.UserID) bool { return false }
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Cache{opts: opts, log: log.With("component", "roomstate"), ctx: ctx, cancel: cancel,
		slots: make(chan struct{}, loadsInFlight), rooms: map[id.RoomID]*entry{}}
}

// Close stops the reads in flight and waits for them.
func (c *Cache) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.cancel()
	c.wg.Wait()
}

// Seed makes rooms the cache's and starts reading each one not yet held, in
// the background: a tool call that comes first waits for its room's read.
// Events applied from now on are replayed on what the read returns, so none
// is lost to the read's timing.
func (c *Cache) Seed(rooms ...id.RoomID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, room := range rooms {
		if c.rooms[room] != nil {
			continue
		}
		e := &entry{room: emptyRoom(room), ids: map[stateKey]id.EventID{}}
		c.rooms[room] = e
		if !c.closed {
			c.startLoad(room, e)
		}
	}
}

// Stale marks room as possibly behind the homeserver (the transport knows
// it missed events): its next read asks the homeserver again.
func (c *Cache) Stale(room id.RoomID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e := c.rooms[room]; e != nil {
		c.stale(e)
	}
}

func (c *Cache) stale(e *entry) {
	e.current = false
	if e.loading != nil {
		e.staleAgain = true
	}
}

// Apply brings the state up to date with ev, an event of one of the cache's
// rooms as the daemon received it. Events of one room must come in the
// order the homeserver sent them (the transport's per-room order).
func (c *Cache) Apply(ev *event.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.rooms[ev.RoomID]
	if e == nil {
		return
	}
	if e.loading != nil {
		e.log = append(e.log, ev)
	}
	c.apply(e, ev, false)
}

// apply changes e by ev; c.mu is held. read says ev is one of a read's
// state events, which come in no order, so they say nothing of the daemon's
// users leaving one by one.
func (c *Cache) apply(e *entry, ev *event.Event, read bool) {
	if ev.StateKey == nil {
		if ev.Type == event.EventRedaction && c.holds(e, redacts(ev)) {
			// A redacted state event loses its content (a room's name, a
			// member's display name); the homeserver says what is left.
			c.stale(e)
		}
		return
	}
	key := stateKey{ev.Type.Type, *ev.StateKey}
	switch ev.Type.Type {
	case event.StateRoomName.Type:
		var content event.RoomNameEventContent
		if !decode(ev, &content) {
			c.stale(e)
			return
		}
		e.room.Name = content.Name
	case event.StateCanonicalAlias.Type:
		var content event.CanonicalAliasEventContent
		if !decode(ev, &content) {
			c.stale(e)
			return
		}
		e.room.Alias = content.Alias
	case event.StateMember.Type:
		var content event.MemberEventContent
		if !decode(ev, &content) {
			c.stale(e)
			return
		}
		user := id.UserID(*ev.StateKey)
		e.room.Members[user] = Member{Membership: content.Membership, DisplayName: content.Displayname}
		if !read && c.opts.Ours(user) && !c.anyOursJoined(e) {
			// The last of the daemon's users left: the homeserver sends the
			// daemon nothing more of this room until one joins again.
			c.stale(e)
		}
	case zevent.StateAgent.Type:
		if user, a, ok := zevent.AgentOf(ev); ok {
			e.room.Agents[user] = a
		} else {
			// A marker emptied (or not the user's own) says no agent.
			delete(e.room.Agents, id.UserID(*ev.StateKey))
		}
	case event.StateEncryption.Type:
		if *ev.StateKey != "" {
			return
		}
		var content event.EncryptionEventContent
		if !decode(ev, &content) {
			c.stale(e)
			return
		}
		e.room.Encryption = content.Algorithm
	default:
		return
	}
	e.ids[key] = ev.ID
}

// emptyRoom is room before any of its state is known.
func emptyRoom(room id.RoomID) Room {
	return Room{ID: room, Members: map[id.UserID]Member{}, Agents: map[id.UserID]zevent.AgentContent{}}
}

// copyOf is r with maps of its own, for a caller outside c.mu.
func copyOf(r Room) Room {
	r.Members = maps.Clone(r.Members)
	r.Agents = maps.Clone(r.Agents)
	return r
}

// holds says evt is one of the state events e holds.
func (c *Cache) holds(e *entry, evt id.EventID) bool {
	if evt == "" {
		return false
	}
	for _, held := range e.ids {
		if held == evt {
			return true
		}
	}
	return false
}

func (c *Cache) anyOursJoined(e *entry) bool {
	return len(c.oursJoined(e)) > 0
}

// oursJoined are the daemon's users e holds as joined.
func (c *Cache) oursJoined(e *entry) []id.UserID {
	var out []id.UserID
	for user, m := range e.room.Members {
		if m.Membership == event.MembershipJoin && c.opts.Ours(user) {
			out = append(out, user)
		}
	}
	slices.Sort(out)
	return out
}

// redacts is the event a redaction removes, in either room version's place.
func redacts(ev *event.Event) id.EventID {
	if ev.Redacts != "" {
		return ev.Redacts
	}
	if r, ok := ev.Content.Parsed.(*event.RedactionEventContent); ok && r.Redacts != "" {
		return r.Redacts
	}
	if s, ok := ev.Content.Raw["redacts"].(string); ok {
		return id.EventID(s)
	}
	return ""
}

// decode reads ev's content into into, from its raw JSON (the parsed form
// depends on how the event was decoded); false if it does not fit.
func decode(ev *event.Event, into any) bool {
	raw := ev.Content.VeryRaw
	if len(raw) == 0 {
		var err error
		if raw, err = json.Marshal(ev.Content.Raw); err != nil {
			return false
		}
	}
	if len(raw) == 0 || string(raw) == "null" {
		// A state event with no content at all is an emptied one.
		return true
	}
	return json.Unmarshal(raw, into) == nil
}

// Room returns room's state, current: from memory when it is, else after
// reading it from the homeserver (one read, shared by every caller that
// waits for it).
func (c *Cache) Room(ctx context.Context, room id.RoomID) (Room, error) {
	c.mu.Lock()
	e := c.rooms[room]
	if e == nil {
		c.mu.Unlock()
		return Room{}, fmt.Errorf("room %s: %w", room, ErrUnknownRoom)
	}
	for tries := 0; ; tries++ {
		if e.current {
			r := copyOf(e.room)
			c.mu.Unlock()
			return r, nil
		}
		if tries > 0 && e.loading == nil {
			// The read this call waited for ended and the room is still
			// not current: it failed, or no user of the daemon is in the
			// room, so its events do not reach the daemon. That read's
			// state is the answer (or its error); reading again would loop.
			r := copyOf(e.room)
			err := e.loadErr
			c.mu.Unlock()
			return r, err
		}
		if e.loading == nil {
			if c.closed {
				c.mu.Unlock()
				return Room{}, fmt.Errorf("room %s: %w", room, ErrClosed)
			}
			c.startLoad(room, e)
		}
		done := e.loading
		c.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return Room{}, fmt.Errorf("reading the state of %s: %w", room, ctx.Err())
		}
		c.mu.Lock()
	}
}

// startLoad reads room's state in a goroutine of the cache's; c.mu is held.
func (c *Cache) startLoad(room id.RoomID, e *entry) {
	done := make(chan struct{})
	e.loading, e.log, e.staleAgain = done, nil, false
	prefer := c.oursJoined(e)
	c.wg.Go(func() { // owner: the Cache; Close cancels c.ctx and waits
		var evs []*event.Event
		var as id.UserID
		var err error
		select {
		case c.slots <- struct{}{}:
			evs, as, err = c.opts.Load(c.ctx, room, prefer)
			<-c.slots
		case <-c.ctx.Done():
			err = c.ctx.Err()
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		defer close(done)
		log := e.log
		// e.loading stays set while the read's state is applied, so what
		// finds the room uncertain on the way marks it staleAgain.
		defer func() { e.loading, e.log = nil, nil }()
		if err != nil {
			e.loadErr = fmt.Errorf("reading the state of %s: %w", room, err)
			if c.ctx.Err() == nil {
				c.log.Warn("reading a room's state", "room", room, "err", err)
			}
			return
		}
		e.loadErr = nil
		e.room = emptyRoom(room)
		clear(e.ids)
		for _, ev := range evs {
			c.apply(e, ev, true)
		}
		// What arrived while the read ran may be older or newer than what
		// it returned; replayed in order on top, the newest of each wins.
		for _, ev := range log {
			c.apply(e, ev, false)
		}
		// A homeserver may serve a former member the state as it was when
		// it left (Synapse does): only a read as a member still joined is
		// the state now.
		e.current = !e.staleAgain && e.room.Joined(as) && c.opts.Ours(as)
	})
}
