package matrix

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/config"
)

// setup registers the agents' users, sets their display names and joins their rooms.
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
	for _, r := range order {
		roomID, err := t.joinRoom(ctx, r, members[r], joined)
		if err != nil {
			return err
		}
		t.roomsMu.Lock()
		t.rooms[r] = roomID
		t.rooms[config.RoomRef(roomID)] = roomID
		t.bound[roomID] = true
		t.roomsMu.Unlock()
		t.log.Info("room ready", "room", r, "room_id", roomID, "agents", len(members[r]))
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
	if err != nil && !errors.Is(err, mautrix.MUserInUse) {
		return fmt.Errorf("registering %s: %w", a.UserID, err)
	}
	return nil
}

// joinRoom joins every member to room. An alias that doesn't resolve is created by the first
// member (if the alias is on our server), who then invites the others.
func (t *Transport) joinRoom(ctx context.Context, room config.RoomRef, users []id.UserID, joined map[id.UserID]map[id.RoomID]bool) (id.RoomID, error) {
	if rid, ok := room.RoomID(); ok {
		for _, u := range users {
			if joined[u][rid] {
				continue
			}
			if _, err := t.Client(u).JoinRoom(ctx, string(rid), nil); err != nil {
				return "", fmt.Errorf("joining %s as %s: %w", room, u, err)
			}
		}
		return rid, nil
	}
	alias, _ := room.Alias()
	first := t.Client(users[0])
	roomID, err := t.resolveOrCreate(ctx, first, room, users)
	if err != nil {
		return "", err
	}
	for _, u := range users {
		// Re-joining is not free: homeservers may record it as a new membership event.
		if joined[u][roomID] {
			continue
		}
		if _, err := t.Client(u).JoinRoom(ctx, string(roomID), nil); err != nil {
			return "", fmt.Errorf("joining %s (%s) as %s: %w", alias, roomID, u, err)
		}
	}
	return roomID, nil
}

func (t *Transport) resolveOrCreate(ctx context.Context, cli *mautrix.Client, room config.RoomRef, users []id.UserID) (id.RoomID, error) {
	roomID, err := room.Resolve(ctx, cli)
	if err == nil {
		return roomID, nil
	}
	if !errors.Is(err, mautrix.MNotFound) {
		return "", err
	}
	alias, _ := room.Alias()
	local, server, ok := strings.Cut(strings.TrimPrefix(string(alias), "#"), ":")
	if !ok || local == "" {
		return "", fmt.Errorf("room alias %q is malformed", alias)
	}
	if t.opts.ServerName != "" && server != t.opts.ServerName {
		return "", fmt.Errorf("room %s does not exist and is on %s, not this homeserver (%s), so it can't be created", alias, server, t.opts.ServerName)
	}
	created, err := cli.CreateRoom(ctx, &mautrix.ReqCreateRoom{
		// Public join rule so the operator's humans can join by alias; not listed in the
		// directory.
		Preset:        "public_chat",
		Visibility:    "private",
		RoomAliasName: local,
		Name:          local,
		Invite:        users[1:],
	})
	if err != nil {
		if errors.Is(err, mautrix.MRoomInUse) {
			// Someone created the alias between our resolve and create.
			resp, rerr := cli.ResolveAlias(ctx, alias)
			if rerr == nil {
				return resp.RoomID, nil
			}
		}
		return "", fmt.Errorf("creating room %s as %s: %w", alias, cli.UserID, err)
	}
	t.log.Info("created room", "alias", alias, "room_id", created.RoomID, "creator", cli.UserID)
	return created.RoomID, nil
}
