package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"slices"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// Without encryption: true this daemon does not read end-to-end encrypted
// rooms (behaviour §10, issue 37). A bound room that is encrypted must not
// look like agents that ignore people: each agent bound to it says so in the
// room, once (recorded in the turn journal's notices, so a restart does not
// say it again), as soon as the daemon meets the room's encryption: an
// m.room.encrypted event or the m.room.encryption state event that turns it
// on. At start-up the daemon warns of every bound room it finds encrypted.
//
// With encryption: true the transport decrypts what the agents' devices can
// (zooid/e2ee) before the event reaches handleEvent, so an m.room.encrypted
// event that arrives here is one that stayed undecryptable: one agent says
// so in its thread (undecryptable).

// encryptedNotice is what each agent bound to an encrypted room posts there.
func encryptedNotice(agent string) string {
	return fmt.Sprintf("This room is end-to-end encrypted and this Zooid daemon is not set to read encrypted rooms: %s sees no message sent here. "+
		"Ask the operator to turn on encryption: true in zooid.yaml, or use %s in a room without encryption.", agent, agent)
}

// encryptedNoticeKey names an agent's encrypted-room notice in the journal.
func encryptedNoticeKey(agent string, room id.RoomID) string {
	return "encrypted\x00" + agent + "\x00" + string(room)
}

// encryptedNoticeTxn is the notice's txn id: the same on every try and every
// start, so a post whose journal write a crash cut is not doubled. It names
// the room too: the spec scopes a txn id to the sender's device, not to the
// room in the path, so a server may take one id in two rooms for one post.
func encryptedNoticeTxn(agent string, room id.RoomID) string {
	sum := sha256.Sum256([]byte(room))
	return "zooid-encrypted-room-" + agent + "-" + hex.EncodeToString(sum[:8])
}

// turnsEncryptionOn says whether ev shows its room is end-to-end encrypted:
// an encrypted event, or the state event that turns encryption on.
func turnsEncryptionOn(ev *event.Event) bool {
	switch ev.Type.Type {
	case event.EventEncrypted.Type:
		return true
	case event.StateEncryption.Type:
		if ev.StateKey == nil || *ev.StateKey != "" {
			return false
		}
		if ev.Content.Parsed == nil {
			_ = ev.Content.ParseRaw(event.StateEncryption)
		}
		c, ok := ev.Content.Parsed.(*event.EncryptionEventContent)
		return ok && c.Algorithm != ""
	}
	return false
}

// encryptedRoom is handleEvent's part for an event that shows its room is
// encrypted: logged once per room and run, and each agent bound to the room
// posts its notice unless it already has. It runs in the room's intake, so
// the notice is posted before the room's next event is routed.
func (d *Daemon) encryptedRoom(ctx context.Context, ev *event.Event) {
	if ev == nil || d.transport == nil {
		return
	}
	if d.opts.Config.Encryption {
		if ev.Type == event.EventEncrypted {
			d.undecryptable(ctx, ev)
		}
		return
	}
	if !turnsEncryptionOn(ev) {
		return
	}
	room := d.boundAgents(ev.RoomID)
	if len(room) == 0 {
		return
	}
	d.encMu.Lock()
	first := !d.encLogged[ev.RoomID]
	if first {
		d.encLogged[ev.RoomID] = true
	}
	d.encMu.Unlock()
	if first {
		d.log.Warn("room is end-to-end encrypted and this daemon is not set to read encrypted rooms: its encrypted events wake nobody; each agent bound to it says so in the room, once; set encryption: true in zooid.yaml, or use a room without encryption",
			"room", ev.RoomID, "event_type", ev.Type.Type, "event", ev.ID)
	}
	for _, rt := range room {
		d.postEncryptedNotice(ctx, rt, ev.RoomID)
	}
}

// postEncryptedNotice posts rt's notice in room unless it was posted before.
// A failed post is logged and not recorded, so the room's next encrypted
// event tries again.
func (d *Daemon) postEncryptedNotice(ctx context.Context, rt *agentRuntime, room id.RoomID) {
	key := encryptedNoticeKey(rt.cfg.Name, room)
	d.encMu.Lock()
	done := d.encNoticed[key]
	d.encMu.Unlock()
	if done {
		return
	}
	if d.turns == nil {
		return
	}
	posted, err := d.turns.noticed(key)
	if err != nil {
		d.log.Error("reading the encrypted-room notices", "agent", rt.cfg.Name, "room", room, "err", err)
		return
	}
	if !posted {
		content := &event.MessageEventContent{MsgType: event.MsgNotice, Body: encryptedNotice(rt.cfg.Name), Mentions: &event.Mentions{}}
		evID, err := d.transport.Send(ctx, rt.userID, room, event.EventMessage, content, encryptedNoticeTxn(rt.cfg.Name, room))
		if err != nil {
			// A refusal that lasts (an agent without the power to post) would
			// otherwise log an error for every encrypted message of the room.
			d.encMu.Lock()
			again := d.encFailed[key]
			d.encFailed[key] = true
			d.encMu.Unlock()
			level := slog.LevelError
			if again {
				level = slog.LevelDebug
			}
			d.log.Log(ctx, level, "posting the encrypted-room notice; the room's next encrypted event tries again", "agent", rt.cfg.Name, "room", room, "err", err)
			return
		}
		if err := d.turns.markNoticed(key, evID); err != nil {
			d.log.Error("recording the encrypted-room notice", "agent", rt.cfg.Name, "room", room, "err", err)
			return
		}
		d.log.Info("told an encrypted room this agent cannot read it", "agent", rt.cfg.Name, "room", room, "event", evID)
	}
	d.encMu.Lock()
	d.encNoticed[key] = true
	d.encMu.Unlock()
}

// boundAgents are the Matrix agents bound to room, in configuration order.
func (d *Daemon) boundAgents(room id.RoomID) []*agentRuntime {
	d.routerOnce() // resolves every agent's rooms
	var out []*agentRuntime
	for _, a := range d.opts.Config.Agents {
		if rt := d.agents[a.Name]; rt.cfg.Matrix != nil && slices.Contains(rt.rooms, room) {
			out = append(out, rt)
		}
	}
	return out
}

// warnEncryptedRooms warns of every bound room whose m.room.encryption state
// is set, as the room state holds it (zooid/roomstate: the start-up's one read
// of each room, kept current since): its agents will not read it. zooid check
// does not talk to the homeserver, so this is the start-up's warning. A room
// whose state cannot be read is skipped quietly: the room's first encrypted
// event still tells it.
func (d *Daemon) warnEncryptedRooms(ctx context.Context) {
	if d.opts.Config.Encryption {
		return
	}
	d.routerOnce()
	var rooms []id.RoomID
	for _, a := range d.opts.Config.Agents {
		if rt := d.agents[a.Name]; rt.cfg.Matrix != nil {
			for _, r := range rt.rooms {
				if !slices.Contains(rooms, r) {
					rooms = append(rooms, r)
				}
			}
		}
	}
	state := d.transport.RoomState()
	for _, room := range rooms {
		rs, err := state.Room(ctx, room)
		switch {
		case err == nil && rs.Encryption != "":
			agents := d.boundAgents(room)
			names := make([]string, len(agents))
			for i, rt := range agents {
				names[i] = rt.cfg.Name
			}
			d.log.Warn("start-up check: room is end-to-end encrypted and this daemon is not set to read encrypted rooms: its agents will not see messages there; set encryption: true in zooid.yaml, or bind them to a room without encryption",
				"room", room, "agents", names, "algorithm", rs.Encryption)
		case err != nil && ctx.Err() == nil:
			d.log.Debug("reading a room's encryption state", "room", room, "err", err)
		}
	}
}

// undecryptableNotice is what an agent posts in the thread of a message that
// no agent's device could decrypt.
func undecryptableNotice(agent string) string {
	return fmt.Sprintf("%s could not decrypt this message: its room key never reached the agents' devices, so no agent read it. "+
		"Please send it again; if this keeps happening, check that your client shares room keys with unverified devices.", agent)
}

// maxUndecryptableSessions bounds the sessions undecryptable remembers
// having answered; past it the memory starts again (a second notice for an
// old session is the worst it costs).
const maxUndecryptableSessions = 4096

// undecryptable is encryptedRoom's part for an encrypted event the agents'
// devices could not decrypt, even after waiting for a late key: the first
// agent bound to the room says so, in the event's thread (the relation
// stays in the clear), replying to it, once per megolm session (per run).
// The txn id is the event's, so a redelivery after a restart does not say
// it twice.
func (d *Daemon) undecryptable(ctx context.Context, ev *event.Event) {
	if _, ours := d.routerOnce().IsAgent(ev.Sender); ours {
		return
	}
	if _, other := d.routerOnce().OtherAgent(ev.RoomID, ev.Sender); other {
		// Another daemon's agent: a notice would only answer a machine.
		return
	}
	agents := d.boundAgents(ev.RoomID)
	if len(agents) == 0 {
		return
	}
	rt := agents[0]
	// One notice per megolm session the agents lack: every later message a
	// person's client sends under it fails the same way, and a notice for
	// each would bury the room.
	c, _ := ev.Content.Parsed.(*event.EncryptedEventContent)
	if c != nil && c.SessionID != "" {
		key := string(ev.RoomID) + "\x00" + string(c.SessionID)
		d.encMu.Lock()
		seen := d.undecNoticed[key]
		if !seen {
			if len(d.undecNoticed) >= maxUndecryptableSessions {
				clear(d.undecNoticed)
			}
			d.undecNoticed[key] = true
		}
		d.encMu.Unlock()
		if seen {
			d.log.Info("an encrypted message stays undecryptable; its session's first one was answered with a notice already", "room", ev.RoomID, "event", ev.ID, "session", c.SessionID)
			return
		}
	}
	root := ev.ID
	if c != nil && c.RelatesTo != nil && c.RelatesTo.Type == event.RelThread && c.RelatesTo.EventID != "" {
		root = c.RelatesTo.EventID
	}
	content := &event.MessageEventContent{MsgType: event.MsgNotice, Body: undecryptableNotice(rt.cfg.Name), Mentions: &event.Mentions{}}
	content.RelatesTo = (&event.RelatesTo{}).SetThread(root, ev.ID)
	sum := sha256.Sum256([]byte(ev.ID))
	evID, err := d.transport.Send(ctx, rt.userID, ev.RoomID, event.EventMessage, content, "zooid-undecryptable-"+hex.EncodeToString(sum[:12]))
	if err != nil {
		d.log.Error("posting the undecryptable-message notice", "agent", rt.cfg.Name, "room", ev.RoomID, "event", ev.ID, "err", err)
		return
	}
	session := id.SessionID("")
	if c != nil {
		session = c.SessionID
	}
	d.log.Info("told a thread its message stayed undecryptable", "agent", rt.cfg.Name, "room", ev.RoomID, "event", ev.ID, "session", session, "notice", evID)
}
