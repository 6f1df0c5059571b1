package matrix

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/internal/mxcall"
)

// boundRooms are the rooms Start resolved and bound, in no order.
func (t *Transport) boundRooms() []id.RoomID {
	t.roomsMu.RLock()
	defer t.roomsMu.RUnlock()
	out := make([]id.RoomID, 0, len(t.bound))
	for r := range t.bound {
		out = append(out, r)
	}
	return out
}

// isAgent says user is one of the transport's agents.
func (t *Transport) isAgent(user id.UserID) bool {
	return slices.ContainsFunc(t.opts.Agents, func(a Agent) bool { return a.UserID == user })
}

// loadRoomState reads room's whole state (GET /rooms/{room}/state, one
// request) as the first of the agents the homeserver answers: prefer first
// (the agents the room state holds as joined), then those Start got into the
// room, then the others. A refusal moves on to the next agent (one may have
// been removed from the room since); the last refusal is the error when every
// agent is refused.
func (t *Transport) loadRoomState(ctx context.Context, room id.RoomID, prefer []id.UserID) ([]*event.Event, id.UserID, error) {
	t.roomsMu.RLock()
	var users []id.UserID
	for _, u := range prefer {
		if t.isAgent(u) && !slices.Contains(users, u) {
			users = append(users, u)
		}
	}
	for _, a := range t.opts.Agents {
		if t.members[a.UserID][room] && !slices.Contains(users, a.UserID) {
			users = append(users, a.UserID)
		}
	}
	for _, a := range t.opts.Agents {
		if !slices.Contains(users, a.UserID) {
			users = append(users, a.UserID)
		}
	}
	t.roomsMu.RUnlock()
	err := fmt.Errorf("no agent to read %s as", room)
	for _, user := range users {
		cli := t.Client(user)
		if cli == nil {
			continue
		}
		var state map[event.Type]map[string]*event.Event
		state, err = cli.State(ctx, room)
		if err == nil {
			var out []*event.Event
			for _, byKey := range state {
				for _, ev := range byKey {
					out = append(out, ev)
				}
			}
			return out, user, nil
		}
		if !refused(err) {
			return nil, "", fmt.Errorf("reading the state of %s as %s: %w", room, user, err)
		}
	}
	return nil, "", err
}

// refused says the homeserver refused the request to this user (not a member,
// no such room for it), so another agent may be let in.
func refused(err error) bool {
	s := mxcall.Status(err)
	return s == http.StatusForbidden || s == http.StatusNotFound
}
