package matrix

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/internal/mxcall"
)

// setup registers the agents' users, sets their display names and joins their rooms. A
// room the homeserver refuses (an alias outside the registration, a room an agent may not
// join) costs only that room, or only that agent there: it is logged with what to fix and
// the other rooms and agents are served. Anything else (the homeserver down, a refused
// agent user) fails the start.
func (t *Transport) setup(ctx context.Context) error {
	for _, a := range t.opts.Agents {
		if err := t.register(ctx, a); err != nil {
			return err
		}
		if a.DisplayName != "" {
			// Only when it differs: every change is a new member event in each room.
			cur, err := t.Client(a.UserID).GetOwnDisplayName(ctx)
			if err == nil && cur.DisplayName == a.DisplayName {
				continue
			}
			if err := t.Client(a.UserID).SetDisplayName(ctx, a.DisplayName); err != nil {
				return fmt.Errorf("setting display name of %s: %w", a.UserID, err)
			}
		}
	}
	// Rooms in first-mention order, each with the agents bound to it in config order.
	var order []config.RoomRef
	members := map[config.RoomRef][]id.UserID{}
	for _, a := range t.opts.Agents {
		for _, r := range a.Rooms {
			if _, ok := members[r]; !ok {
				order = append(order, r)
			}
			members[r] = append(members[r], a.UserID)
		}
	}
	joined := map[id.UserID]map[id.RoomID]bool{}
	for _, a := range t.opts.Agents {
		resp, err := t.Client(a.UserID).JoinedRooms(ctx)
		if err != nil {
			return fmt.Errorf("listing joined rooms of %s: %w", a.UserID, err)
		}
		joined[a.UserID] = map[id.RoomID]bool{}
		for _, r := range resp.JoinedRooms {
			joined[a.UserID][r] = true
		}
	}
	served := 0
	for _, r := range order {
		roomID, in, err := t.joinRoom(ctx, r, members[r], joined)
		if err != nil {
			if !roomRefused(err) {
				return err
			}
			t.log.Error("room not served: its agents are not bound there until the daemon starts again", "room", r, "err", err)
			continue
		}
		t.roomsMu.Lock()
		t.rooms[r] = roomID
		t.rooms[config.RoomRef(roomID)] = roomID
		t.bound[roomID] = true
		for _, u := range in {
			if t.members[u] == nil {
				t.members[u] = map[id.RoomID]bool{}
			}
			t.members[u][roomID] = true
		}
		t.roomsMu.Unlock()
		t.publishAgents(ctx, r, roomID, in)
		served++
		t.log.Info("room ready", "room", r, "room_id", roomID, "agents", len(in))
	}
	if served == 0 && len(order) > 0 {
		t.log.Error("no configured room is served: no agent will be woken", "rooms", len(order))
	}
	return nil
}

func (t *Transport) register(ctx context.Context, a Agent) error {
	local, _, err := a.UserID.Parse()
	if err != nil {
		return fmt.Errorf("agent %s user id: %w", a.Name, err)
	}
	cli := t.Client(a.UserID)
	_, err = cli.MakeRequest(ctx, http.MethodPost, cli.BuildClientURL("v3", "register"), &mautrix.ReqRegister[any]{
		Username:     local,
		Type:         mautrix.AuthTypeAppservice,
		InhibitLogin: true,
	}, nil)
	switch {
	case err == nil || errors.Is(err, mautrix.MUserInUse):
		return nil
	case errors.Is(err, mautrix.MExclusive):
		return fmt.Errorf("registering %s (agent %s): the user is outside the user namespaces of the appservice registration %q the homeserver holds; "+
			"regenerate the registration (zooid registration --config zooid.yaml), install it on the homeserver and restart the homeserver: %w",
			a.UserID, a.Name, t.opts.ID, err)
	default:
		return fmt.Errorf("registering %s: %w", a.UserID, err)
	}
}

// roomError is a configured room the homeserver refused, with what to do about it.
type roomError struct {
	msg string
	err error
}

func (e *roomError) Error() string {
	if e.err == nil {
		return e.msg
	}
	return e.msg + ": " + e.err.Error()
}

func (e *roomError) Unwrap() error { return e.err }

// roomRefused says err is about the room itself, which trying again will not change: the
// homeserver answered with a client error (403 M_FORBIDDEN, 400 M_EXCLUSIVE, 404), or the
// room can't be made here at all. Rate limits, server errors and broken connections are not:
// those fail the start as before, rather than leave rooms unserved for a passing fault.
func roomRefused(err error) bool {
	var re *roomError
	if errors.As(err, &re) {
		return true
	}
	s := mxcall.Status(err)
	return s >= 400 && s < 500 && s != http.StatusTooManyRequests
}

// joinRoom joins every member to room and returns its id and the members now in it. An
// alias that doesn't resolve is created by the first member (if the alias is on our server),
// who invites the others. A member the room refuses (an invite-only room) is invited by a
// member already in it and joins then; one that still can't join is logged and left out,
// so the others serve the room.
func (t *Transport) joinRoom(ctx context.Context, room config.RoomRef, users []id.UserID, joined map[id.UserID]map[id.RoomID]bool) (id.RoomID, []id.UserID, error) {
	roomID, ok := room.RoomID()
	created := false
	if !ok {
		var err error
		if roomID, created, err = t.resolveOrCreate(ctx, t.Client(users[0]), room, users); err != nil {
			return "", nil, err
		}
	}
	var in []id.UserID
	for _, u := range users {
		if joined[u][roomID] {
			in = append(in, u)
		}
	}
	var firstErr error
	for _, u := range users {
		// Re-joining is not free: homeservers may record it as a new membership event.
		if slices.Contains(in, u) {
			continue
		}
		err := t.join(ctx, roomID, via(room, roomID), u, in)
		if err != nil && !roomRefused(err) {
			return "", nil, fmt.Errorf("joining %s (%s) as %s: %w", room, roomID, u, err)
		}
		if err != nil {
			t.log.Error("agent not served in a room: the room refused it", "room", room, "room_id", roomID, "user", u,
				"fix", "invite it into the room (or make the room public), then restart the daemon", "err", err)
			firstErr = firstOf(firstErr, err)
			continue
		}
		in = append(in, u)
	}
	if len(in) == 0 {
		return "", nil, &roomError{msg: fmt.Sprintf("no agent could join %s (%s)", room, roomID), err: firstErr}
	}
	t.invitePeople(ctx, room, roomID, in[0], created)
	return roomID, in, nil
}

// invitePeople invites the people rooms: lists for room, as agent (a member): all of them
// into a room the daemon just created, and into any other room those who have never been in
// it. Someone who left, was removed or banned has a membership and is left alone: the
// config names who may come in, not who must stay. A refused invite (an unknown user, an
// agent without the power to invite) is logged and costs nothing else.
func (t *Transport) invitePeople(ctx context.Context, room config.RoomRef, roomID id.RoomID, agent id.UserID, created bool) {
	cli := t.Client(agent)
	for _, u := range t.roomSettings(room).Invite {
		if !created {
			var m event.MemberEventContent
			err := cli.StateEvent(ctx, roomID, event.StateMember, string(u), &m)
			if err == nil {
				continue
			}
			if !mxcall.NotFound(err) {
				t.log.Warn("not inviting: could not read the membership", "room", room, "user", u, "err", err)
				continue
			}
		}
		if _, err := cli.InviteUser(ctx, roomID, &mautrix.ReqInviteUser{UserID: u}); err != nil {
			t.log.Warn("could not invite a person rooms: lists", "room", room, "room_id", roomID, "user", u, "as", agent,
				"fix", "check the user id exists, or invite them from a Matrix client", "err", err)
			continue
		}
		t.log.Info("invited", "room", room, "room_id", roomID, "user", u)
	}
}

// roomSettings is what rooms: says of room, private by default.
func (t *Transport) roomSettings(room config.RoomRef) config.Room {
	r, ok := t.opts.Rooms[room]
	if !ok || r.Visibility == "" {
		r.Visibility = config.VisibilityPrivate
	}
	return r
}

// join joins u to roomID, through the servers in via when the room lives on another
// homeserver; refused (an invite-only room), it asks a member already in the room to
// invite u and joins again.
func (t *Transport) join(ctx context.Context, roomID id.RoomID, via []string, u id.UserID, in []id.UserID) error {
	req := &mautrix.ReqJoinRoom{Via: via}
	_, err := t.Client(u).JoinRoom(ctx, string(roomID), req)
	if err == nil || !errors.Is(err, mautrix.MForbidden) || len(in) == 0 {
		return err
	}
	if _, ierr := t.Client(in[0]).InviteUser(ctx, roomID, &mautrix.ReqInviteUser{UserID: u}); ierr != nil {
		return fmt.Errorf("%w (and %s could not invite it: %w)", err, in[0], ierr)
	}
	_, err = t.Client(u).JoinRoom(ctx, string(roomID), req)
	return err
}

// via names the servers to join roomID through: the server of its alias, where the
// room was made or at least is known, and the one in its id (rooms before version 12
// carry it). A homeserver that is not in a room yet cannot join it by id alone
// ("no servers that are in the room have been provided"): that is every room of a
// daemon whose homeserver federates with the room's (features/federation.feature).
func via(room config.RoomRef, roomID id.RoomID) []string {
	var out []string
	add := func(s string) {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	if alias, ok := room.Alias(); ok {
		_, server, _ := strings.Cut(string(alias), ":")
		add(server)
	}
	if _, server, ok := strings.Cut(string(roomID), ":"); ok {
		add(server)
	}
	return out
}

// firstOf keeps the first non-nil error.
func firstOf(first, next error) error {
	if first != nil {
		return first
	}
	return next
}

// resolveOrCreate gives the room's id, creating it when its alias does not exist yet (and
// reporting that it did): as rooms: says, private by default (invite-only, history visible
// to members from their invitation), so nobody on the homeserver can walk in and prompt
// agents that may run commands. The other agents are invited at creation.
func (t *Transport) resolveOrCreate(ctx context.Context, cli *mautrix.Client, room config.RoomRef, users []id.UserID) (id.RoomID, bool, error) {
	roomID, err := room.Resolve(ctx, cli)
	if err == nil {
		return roomID, false, nil
	}
	if !errors.Is(err, mautrix.MNotFound) {
		return "", false, err
	}
	alias, _ := room.Alias()
	local, server, ok := strings.Cut(strings.TrimPrefix(string(alias), "#"), ":")
	if !ok || local == "" {
		return "", false, &roomError{msg: fmt.Sprintf("room alias %q is malformed", alias)}
	}
	if t.opts.ServerName != "" && server != t.opts.ServerName {
		return "", false, &roomError{msg: fmt.Sprintf("room %s does not exist and is on %s, not this homeserver (%s), so it can't be created", alias, server, t.opts.ServerName)}
	}
	settings := t.roomSettings(room)
	req := &mautrix.ReqCreateRoom{
		Visibility:    "private", // never listed in the room directory
		RoomAliasName: local,
		Name:          local,
		Invite:        users[1:],
	}
	if settings.Visibility == config.VisibilityPublic {
		req.Preset = "public_chat"
	} else {
		req.Preset = "private_chat"
		// The preset shares history with every member, including what was said before
		// they were invited; members see it from their invitation instead.
		req.InitialState = []*event.Event{{
			Type:    event.StateHistoryVisibility,
			Content: event.Content{Parsed: &event.HistoryVisibilityEventContent{HistoryVisibility: event.HistoryVisibilityInvited}},
		}}
	}
	created, err := cli.CreateRoom(ctx, req)
	if err != nil {
		if errors.Is(err, mautrix.MRoomInUse) {
			// Someone created the alias between our resolve and create.
			resp, rerr := cli.ResolveAlias(ctx, alias)
			if rerr == nil {
				return resp.RoomID, false, nil
			}
		}
		if errors.Is(err, mautrix.MExclusive) {
			return "", false, &roomError{msg: fmt.Sprintf("room %s does not exist and this daemon may not create it: the alias is outside the alias namespaces "+
				"of the appservice registration %q the homeserver holds; regenerate the registration (zooid registration --config zooid.yaml), "+
				"install it on the homeserver and restart the homeserver, or create the room yourself and invite the agents", alias, t.opts.ID), err: err}
		}
		return "", false, fmt.Errorf("creating room %s as %s: %w", alias, cli.UserID, err)
	}
	t.log.Info("created room", "alias", alias, "room_id", created.RoomID, "creator", cli.UserID, "visibility", settings.Visibility)
	return created.RoomID, true, nil
}
