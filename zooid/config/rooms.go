package config

import (
	"fmt"

	"go.yaml.in/yaml/v3"
	"maunium.net/go/mautrix/id"
)

// Visibility values of a room under rooms:.
const (
	// VisibilityPrivate creates a room invite-only, its history visible to members from
	// their invitation on: only people invited can join, and so prompt its agents.
	VisibilityPrivate = "private"
	// VisibilityPublic creates a room anyone on the homeserver may join (history shared
	// with members), not listed in the room directory.
	VisibilityPublic = "public"
)

// Room is a room's settings under the top-level rooms: of zooid.yaml, keyed like an
// agent's matrix.rooms entries.
type Room struct {
	// Visibility is VisibilityPrivate (default) or VisibilityPublic; it decides how the
	// daemon creates the room when its alias does not exist yet, and is never applied to
	// a room that exists.
	Visibility string
	// Invite are people the daemon invites into the room: when it creates it, and at each
	// start those who have never been in it (someone who left or was removed is not
	// invited again).
	Invite []id.UserID
}

// Room gives the settings of ref: what rooms: says, with the defaults filled in.
func (c *Config) Room(ref RoomRef) Room {
	r, ok := c.Rooms[ref]
	if !ok || r.Visibility == "" {
		r.Visibility = VisibilityPrivate
	}
	return r
}

// rooms reads the optional top-level rooms mapping. Its keys are rooms as agents name
// them (normalised with the matrix transport's server name) and must be rooms some agent
// is bound to: settings for a room no agent is in would do nothing, silently.
func (p *parser) rooms(top map[string]field, cfg *Config) {
	f, ok := top["rooms"]
	if !ok || isNull(deref(f.val)) {
		return
	}
	server := ""
	agentIDs := map[id.UserID]string{}
	bound := map[RoomRef]bool{}
	for _, t := range cfg.Transports {
		if t.Matrix != nil {
			server = t.Matrix.ServerName
		}
	}
	for _, a := range cfg.Agents {
		if a.Matrix == nil {
			continue
		}
		agentIDs[a.Matrix.UserID] = a.Name
		for _, r := range a.Matrix.Rooms {
			bound[r] = true
		}
	}
	cfg.Rooms = map[RoomRef]Room{}
	for _, e := range p.entries(f.val, "rooms") {
		path := "rooms." + e.key.Value
		ref, err := ParseRoomRef(e.key.Value, server)
		if err != nil {
			p.errorf(e.key, path, "%v", err)
			continue
		}
		if !bound[ref] {
			p.errorf(e.key, path, "no agent is bound to %s: list it in an agent's matrix.rooms, or remove it here", ref)
			continue
		}
		if _, dup := cfg.Rooms[ref]; dup {
			p.errorf(e.key, path, "%s is configured twice", ref)
			continue
		}
		rf := p.fields(e.val, path, "visibility", "invite")
		r := Room{Visibility: VisibilityPrivate}
		if v, ok := p.str(rf["visibility"], path+".visibility"); ok && v != "" {
			switch {
			case v != VisibilityPrivate && v != VisibilityPublic:
				p.errorf(rf["visibility"].val, path+".visibility", "must be %q or %q, got %q", VisibilityPrivate, VisibilityPublic, v)
			case isRoomID(ref):
				p.errorf(rf["visibility"].val, path+".visibility", "%s is a room id, a room that exists: the daemon creates only rooms named by an alias, and never changes an existing room's join rule", ref)
			}
			r.Visibility = v
		}
		r.Invite = p.invitees(rf["invite"], path+".invite", server, agentIDs)
		cfg.Rooms[ref] = r
	}
}

// invitees reads a room's invite list: user ids ("@name" completed with server), each
// once, none of them an agent (agents join by themselves).
func (p *parser) invitees(f field, path, server string, agentIDs map[id.UserID]string) []id.UserID {
	raw := p.strList(f, path)
	var items []*yaml.Node
	if n := deref(f.val); n != nil && n.Kind == yaml.SequenceNode {
		items = n.Content
	}
	seen := map[id.UserID]bool{}
	var out []id.UserID
	for i, s := range raw {
		at := f.val
		if i < len(items) {
			at = items[i]
		}
		ip := fmt.Sprintf("%s[%d]", path, i)
		uid, err := normaliseInvitee(s, server)
		switch {
		case err != nil:
			p.errorf(at, ip, "%v", err)
		case seen[uid]:
			p.errorf(at, ip, "%s is listed twice", uid)
		case agentIDs[uid] != "":
			p.errorf(at, ip, "%s is agent %s, which joins its rooms by itself", uid, agentIDs[uid])
		default:
			seen[uid] = true
			out = append(out, uid)
		}
	}
	return out
}

// normaliseInvitee completes "@name" with server; unlike an agent, a person may be on
// another server (a federated colleague).
func normaliseInvitee(raw, server string) (id.UserID, error) {
	uid, err := normaliseUserID(raw, server)
	if err == nil {
		return uid, nil
	}
	return normaliseUserID(raw, "")
}

func isRoomID(r RoomRef) bool {
	_, ok := r.RoomID()
	return ok
}
