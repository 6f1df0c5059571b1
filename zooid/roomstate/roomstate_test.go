package roomstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/zevent"
)

const room = id.RoomID("!ops:hs")

var (
	agent = id.UserID("@agent:hs")
	ori   = id.UserID("@ori:hs")
)

var seq int

// stateEvent is a state event of room as the transport decodes one: raw JSON.
func stateEvent(t *testing.T, typ event.Type, key string, content map[string]any) *event.Event {
	t.Helper()
	seq++
	raw, err := json.Marshal(map[string]any{"type": typ.Type, "state_key": key, "event_id": fmt.Sprintf("$%d", seq), "room_id": room, "content": content})
	if err != nil {
		t.Fatal(err)
	}
	ev := &event.Event{}
	if err := json.Unmarshal(raw, ev); err != nil {
		t.Fatal(err)
	}
	return ev
}

func member(t *testing.T, user id.UserID, membership, name string) *event.Event {
	return stateEvent(t, event.StateMember, string(user), map[string]any{"membership": membership, "displayname": name})
}

// loader is a homeserver's state that a test changes, and counts its reads;
// hold, when set, keeps each read waiting until it is closed.
type loader struct {
	mu    sync.Mutex
	state []*event.Event
	reads int
	err   error
	hold  chan struct{}
	began chan struct{}
}

func (l *loader) load(ctx context.Context, _ id.RoomID, _ []id.UserID) ([]*event.Event, id.UserID, error) {
	l.mu.Lock()
	l.reads++
	hold, began := l.hold, l.began
	out, err := append([]*event.Event(nil), l.state...), l.err
	l.mu.Unlock()
	if began != nil {
		close(began)
	}
	if hold != nil {
		select {
		case <-hold:
		case <-ctx.Done():
			return nil, "", ctx.Err()
		}
	}
	return out, agent, err
}

func (l *loader) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reads
}

func newCache(t *testing.T, l *loader) *Cache {
	c := New(Options{Load: l.load, Ours: func(u id.UserID) bool { return u == agent }})
	t.Cleanup(c.Close)
	return c
}

func mustRoom(t *testing.T, c *Cache) Room {
	t.Helper()
	r, err := c.Room(context.Background(), room)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestStateIsReadOnceThenKeptFromEvents(t *testing.T) {
	l := &loader{}
	l.state = []*event.Event{member(t, agent, "join", "Agent"), member(t, ori, "join", "Ori"),
		stateEvent(t, event.StateRoomName, "", map[string]any{"name": "Ops"})}
	c := newCache(t, l)
	c.Seed(room)
	if r := mustRoom(t, c); r.Name != "Ops" || !r.Joined(ori) || r.Members[ori].DisplayName != "Ori" {
		t.Fatalf("seeded %+v", r)
	}
	c.Apply(stateEvent(t, event.StateRoomName, "", map[string]any{"name": "War room"}))
	c.Apply(stateEvent(t, event.StateCanonicalAlias, "", map[string]any{"alias": "#war:hs"}))
	c.Apply(member(t, ori, "join", "Ori R."))
	c.Apply(member(t, id.UserID("@mia:hs"), "join", "Mia"))
	c.Apply(member(t, id.UserID("@mia:hs"), "ban", ""))
	r := mustRoom(t, c)
	if r.Name != "War room" || r.Alias != "#war:hs" || r.Members[ori].DisplayName != "Ori R." || r.Joined("@mia:hs") {
		t.Fatalf("after events %+v", r)
	}
	if n := l.count(); n != 1 {
		t.Fatalf("%d reads of the room, want 1 (the seed)", n)
	}
}

// marker is user's dev.zooid.agent state event, sent by user as a daemon
// sends it (an empty name: the marker emptied).
func marker(t *testing.T, user id.UserID, name string) *event.Event {
	ev := stateEvent(t, zevent.StateAgent, string(user), map[string]any{"name": name, "workstation": "ws2"})
	ev.Sender = user
	return ev
}

// The start-up's other needs come from the same one read, and stay current
// from events: which users are Zooid agents (dev.zooid.agent) and whether
// the room is encrypted (m.room.encryption).
func TestAgentsAndEncryptionAreReadOnceThenKeptFromEvents(t *testing.T) {
	other := id.UserID("@other:hs")
	third := id.UserID("@third:hs")
	l := &loader{}
	l.state = []*event.Event{member(t, agent, "join", ""), marker(t, other, "builder")}
	c := newCache(t, l)
	c.Seed(room)
	r := mustRoom(t, c)
	if a, ok := r.Agents[other]; !ok || a.Name != "builder" || a.Workstation != "ws2" || len(r.Agents) != 1 || r.Encryption != "" {
		t.Fatalf("seeded agents %+v, encryption %q; want only %s as builder on ws2, unencrypted", r.Agents, r.Encryption, other)
	}
	c.Apply(marker(t, third, "reviewer"))
	c.Apply(marker(t, other, ""))
	forged := marker(t, agent, "impostor")
	forged.Sender = ori // a marker is only its own user's
	c.Apply(forged)
	c.Apply(stateEvent(t, event.StateEncryption, "", map[string]any{"algorithm": "m.megolm.v1.aes-sha2"}))
	r = mustRoom(t, c)
	if _, ok := r.Agents[other]; ok {
		t.Fatalf("%s still an agent after its marker was emptied: %+v", other, r.Agents)
	}
	if a := r.Agents[third]; a.Name != "reviewer" || len(r.Agents) != 1 {
		t.Fatalf("agents %+v, want only %s as reviewer", r.Agents, third)
	}
	if r.Encryption != id.AlgorithmMegolmV1 {
		t.Fatalf("encryption %q, want %q", r.Encryption, id.AlgorithmMegolmV1)
	}
	// The copy handed out is the caller's: changing it changes no one else's.
	r.Agents[ori] = zevent.AgentContent{Name: "x"}
	if _, ok := mustRoom(t, c).Agents[ori]; ok {
		t.Fatal("a caller's change to its copy reached the cache")
	}
	if n := l.count(); n != 1 {
		t.Fatalf("%d reads of the room, want 1 (the seed)", n)
	}
}

// Events that arrive while the room is read are replayed on what the read
// returns: a rename the read missed is not lost.
func TestEventsDuringARead(t *testing.T) {
	l := &loader{hold: make(chan struct{}), began: make(chan struct{})}
	l.state = []*event.Event{member(t, agent, "join", ""), stateEvent(t, event.StateRoomName, "", map[string]any{"name": "Old"})}
	c := newCache(t, l)
	c.Seed(room)
	<-l.began
	c.Apply(stateEvent(t, event.StateRoomName, "", map[string]any{"name": "New"}))
	close(l.hold)
	if r := mustRoom(t, c); r.Name != "New" {
		t.Fatalf("name %q, want New (the rename during the read)", r.Name)
	}
	if n := l.count(); n != 1 {
		t.Fatalf("%d reads, want 1", n)
	}
}

func TestUncertainRoomsAreReadAgain(t *testing.T) {
	for _, c := range []struct {
		name  string
		event func(t *testing.T, held *event.Event) *event.Event
		gap   bool
	}{
		{"a gap", nil, true},
		{"a redacted name", func(t *testing.T, held *event.Event) *event.Event {
			return &event.Event{Type: event.EventRedaction, RoomID: room, ID: "$r", Redacts: held.ID}
		}, false},
		{"the daemon's last user left", func(t *testing.T, _ *event.Event) *event.Event { return member(t, agent, "leave", "") }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := &loader{}
			name := stateEvent(t, event.StateRoomName, "", map[string]any{"name": "Ops"})
			l.state = []*event.Event{member(t, agent, "join", ""), name}
			cache := newCache(t, l)
			cache.Seed(room)
			mustRoom(t, cache)
			if c.gap {
				cache.Stale(room)
			} else {
				cache.Apply(c.event(t, name))
			}
			mustRoom(t, cache)
			if n := l.count(); n != 2 {
				t.Fatalf("%d reads, want 2: the seed and one after %s", n, c.name)
			}
		})
	}
}

func TestAFailedReadIsTheCallersError(t *testing.T) {
	boom := errors.New("homeserver down")
	l := &loader{err: boom}
	c := newCache(t, l)
	c.Seed(room)
	if _, err := c.Room(context.Background(), room); !errors.Is(err, boom) {
		t.Fatalf("err %v, want %v", err, boom)
	}
	if _, err := c.Room(context.Background(), "!other:hs"); !errors.Is(err, ErrUnknownRoom) {
		t.Fatalf("an unbound room: err %v, want ErrUnknownRoom", err)
	}
	l.mu.Lock()
	l.err = nil
	l.state = []*event.Event{member(t, agent, "join", "")}
	l.mu.Unlock()
	if r := mustRoom(t, c); !r.Joined(agent) {
		t.Fatalf("after the homeserver came back: %+v", r)
	}
}

// A homeserver may answer a former member with the state as it was when it
// left: such a read is not taken for the room as it is now, and the next
// read prefers the daemon's users the cache holds as joined.
func TestAReadAsAFormerMemberIsNotCurrent(t *testing.T) {
	other := id.UserID("@agent-b:hs")
	var mu sync.Mutex
	var prefers [][]id.UserID
	reads := 0
	load := func(_ context.Context, _ id.RoomID, prefer []id.UserID) ([]*event.Event, id.UserID, error) {
		mu.Lock()
		defer mu.Unlock()
		reads++
		prefers = append(prefers, prefer)
		if reads == 1 {
			return []*event.Event{member(t, agent, "join", ""), member(t, other, "join", "")}, agent, nil
		}
		// As agent, which left: the state at its leave.
		return []*event.Event{member(t, agent, "leave", ""), member(t, other, "join", "")}, agent, nil
	}
	c := New(Options{Load: load, Ours: func(u id.UserID) bool { return u == agent || u == other }})
	t.Cleanup(c.Close)
	c.Seed(room)
	mustRoom(t, c)
	c.Apply(member(t, agent, "leave", ""))
	c.Stale(room)
	mustRoom(t, c)
	mustRoom(t, c)
	mu.Lock()
	defer mu.Unlock()
	if reads != 3 {
		t.Fatalf("%d reads, want 3: a read as a member that left is not current, so the next call reads again", reads)
	}
	if len(prefers[1]) != 1 || prefers[1][0] != other {
		t.Fatalf("the read after agent left preferred %v, want [%s]", prefers[1], other)
	}
}

// After Close no read starts (its goroutine would have no owner to wait for
// it): a room that is not current is an error.
func TestNoReadAfterClose(t *testing.T) {
	l := &loader{state: []*event.Event{member(t, agent, "join", "")}}
	c := New(Options{Load: l.load, Ours: func(u id.UserID) bool { return u == agent }})
	c.Seed(room)
	mustRoom(t, c)
	c.Stale(room)
	c.Close()
	if _, err := c.Room(context.Background(), room); !errors.Is(err, ErrClosed) {
		t.Fatalf("err %v, want ErrClosed", err)
	}
	if n := l.count(); n != 1 {
		t.Fatalf("%d reads, want 1 (none after Close)", n)
	}
}
