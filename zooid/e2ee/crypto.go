//go:build goolm

package e2ee

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// transaction is the encryption part of a pushed transaction, as Synapse
// names its fields: to-device messages (MSC2409; "to_device" once stable)
// and one-time key counts and device list changes (MSC3202; Synapse sends
// the counts under two spellings, either is read).
type transaction struct {
	ToDevice    []json.RawMessage                              `json:"de.sorunome.msc2409.to_device"`
	ToDeviceV1  []json.RawMessage                              `json:"to_device"`
	OTKCounts   map[id.UserID]map[id.DeviceID]mautrix.OTKCount `json:"org.matrix.msc3202.device_one_time_keys_count"`
	OTKCountsV0 map[id.UserID]map[id.DeviceID]mautrix.OTKCount `json:"org.matrix.msc3202.device_one_time_key_counts"`
	DeviceLists *mautrix.DeviceLists                           `json:"org.matrix.msc3202.device_lists"`
}

// Transaction hands the devices what a pushed transaction carries for them:
// device list changes first (a room key's sender may be a device just
// added), then each to-device message to its device (room keys, stored
// before the transaction is acknowledged, so an acknowledged key is never
// lost), then the one-time key counts (a device low on keys uploads more).
// What is for a device the daemon does not have is logged and dropped.
func (d *Devices) Transaction(ctx context.Context, body []byte) {
	var txn transaction
	if err := json.Unmarshal(body, &txn); err != nil {
		d.log.Warn("reading the encryption data of a transaction", "err", err)
		return
	}
	if txn.DeviceLists != nil && len(txn.DeviceLists.Changed) > 0 && len(d.order) > 0 {
		// The agents' machines share one device store, so one of them
		// fetching the changed users' keys serves all.
		d.order[0].mach.HandleDeviceLists(ctx, txn.DeviceLists, "")
	}
	for _, raw := range append(txn.ToDevice, txn.ToDeviceV1...) {
		d.toDevice(ctx, raw)
	}
	counts := txn.OTKCounts
	if counts == nil {
		counts = txn.OTKCountsV0
	}
	for user, devices := range counts {
		dev := d.byUser[user]
		if dev == nil {
			continue
		}
		for devID, count := range devices {
			if devID != dev.mach.Client.DeviceID {
				continue
			}
			count.UserID, count.DeviceID = user, devID
			dev.mach.HandleOTKCounts(ctx, &count)
		}
	}
}

// toDevice hands one to-device message to the device it is for.
func (d *Devices) toDevice(ctx context.Context, raw json.RawMessage) {
	evt := &event.Event{}
	if err := json.Unmarshal(raw, evt); err != nil {
		d.log.Warn("dropping a to-device message that is not an event", "err", err)
		return
	}
	evt.Type.Class = event.ToDeviceEventType
	dev := d.byUser[evt.ToUserID]
	if dev == nil || evt.ToDeviceID != dev.mach.Client.DeviceID {
		d.log.Debug("dropping a to-device message for a device the daemon does not have", "user", evt.ToUserID, "device", evt.ToDeviceID, "type", evt.Type.Type)
		return
	}
	// Counted whatever its type: the device's inbox keeps every one.
	defer d.notePushed(dev)
	if err := evt.Content.ParseRaw(evt.Type); err != nil {
		d.log.Debug("dropping a to-device message of a type mautrix does not know", "type", evt.Type.Type, "sender", evt.Sender, "err", err)
		return
	}
	d.log.Debug("to-device message", "agent", dev.agent.Name, "type", evt.Type.Type, "sender", evt.Sender)
	dev.handOver(ctx, evt)
}

// Observe lets the devices see a room's membership change: a member leaving
// or joining ends each agent's outbound session there, so the next post's key
// goes to the room's members as they are now.
func (d *Devices) Observe(ctx context.Context, ev *event.Event) {
	if ev.Type != event.StateMember {
		return
	}
	for _, dev := range d.order {
		dev.mach.HandleMemberEvent(ctx, ev)
	}
}

// ErrUndecryptable is wrapped by Decrypt's error when no agent's device has
// the event's room key, even after waiting for it.
var ErrUndecryptable = errors.New("no agent device holds the room key of this event")

// Decrypt decrypts ev, an m.room.encrypted event, with the room key of any
// agent joined to its room that holds it. Without one it waits, up to
// Options.LateKeyWait, for the key to arrive in a later transaction (a room
// key and its event may be pushed in either order), then fails wrapping
// ErrUndecryptable; an event of a session an earlier one already waited for
// in vain is not waited for again (decryptGivenUp). The decrypted event keeps
// ev's id, sender, room and time; Mautrix.WasEncrypted is set.
func (d *Devices) Decrypt(ctx context.Context, ev *event.Event) (*event.Event, error) {
	if ev.Type != event.EventEncrypted {
		return nil, fmt.Errorf("e2ee: %s is %s, not %s", ev.ID, ev.Type.Type, event.EventEncrypted.Type)
	}
	if ev.Content.Parsed == nil {
		if err := ev.Content.ParseRaw(event.EventEncrypted); err != nil {
			return nil, fmt.Errorf("e2ee: reading the encrypted content of %s: %w", ev.ID, err)
		}
	}
	content, ok := ev.Content.Parsed.(*event.EncryptedEventContent)
	if !ok {
		return nil, fmt.Errorf("e2ee: %s has no encrypted content", ev.ID)
	}
	if content.Algorithm != id.AlgorithmMegolmV1 {
		return nil, fmt.Errorf("e2ee: %s is encrypted with %q; only %s is read: %w", ev.ID, content.Algorithm, id.AlgorithmMegolmV1, ErrUndecryptable)
	}
	devs := d.inRoom(ctx, ev.RoomID)
	if len(devs) == 0 {
		return nil, fmt.Errorf("e2ee: no agent with a device is joined to %s: %w", ev.RoomID, ErrUndecryptable)
	}
	if first, ok := d.late.givenUpOn(ev.RoomID, content.SessionID); ok {
		return d.decryptGivenUp(ctx, devs, ev, content, first)
	}
	wait := d.lateKeyWait()
	began := time.Now()
	deadline := began.Add(wait)
	// Halfway through the wait, and again at three quarters, the key is
	// looked for where a lost one still is, then asked for. Synapse loses
	// to-device messages on the way to an appservice (those of a transaction
	// it had to retry, element-hq/synapse#14710, and one whose notification
	// it handles after another's that carries a position past it:
	// docs/security.md) but keeps them in the device's inbox, which each
	// agent's device reads (fromInboxes). A key in no inbox is asked of the
	// sender's devices (m.room_key_request): a client that shared the session
	// with the asking device forwards it again (mautrix and Element both do).
	// The second round is there because forwards sent close together, as two
	// agents' requests make them, are lost the same way.
	asks := []time.Time{began.Add(wait / 2), began.Add(wait * 3 / 4)}
	asked, requested := 0, 0 // rounds begun; of them, those that asked the sender
	for {
		var lastErr error
		for _, dev := range devs {
			dec, err := decryptWith(ctx, dev.mach, ev)
			if err == nil {
				if requested > 0 {
					d.log.Info("a room key came after it was asked of its sender", "event", ev.ID, "room", ev.RoomID, "session", content.SessionID, "after", time.Since(began).Round(time.Millisecond), "asked", requested)
				}
				return dec, nil
			}
			lastErr = err
			// Withheld after the request may be a refusal of it while the key
			// itself is still on its way: wait on. Before it, the sender said
			// it will not share: give up now.
			if !errors.Is(err, crypto.ErrNoSessionFound) && !(requested > 0 && errors.Is(err, crypto.ErrGroupSessionWithheld)) {
				return nil, fmt.Errorf("e2ee: %s's device decrypting %s: %w: %w", dev.agent.Name, ev.ID, err, ErrUndecryptable)
			}
		}
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			if d.late.gaveUp(ev.RoomID, content.SessionID, ev.ID, began) {
				d.watchLateKey(devs, ev.RoomID, content.SessionID, wait)
			}
			return nil, fmt.Errorf("e2ee: %s in %s (session %s) after waiting %s for its key: %w: %w", ev.ID, ev.RoomID, content.SessionID, wait, lastErr, ErrUndecryptable)
		}
		if asked < len(asks) && !time.Now().Before(asks[asked]) {
			asked++
			if d.fromInboxes(ctx, devs, ev.RoomID, content.SessionID) {
				continue
			}
			requested++
			d.askForKey(ctx, devs, ev, content, requested)
		}
		nap := min(left, time.Second)
		if asked < len(asks) {
			nap = max(min(nap, time.Until(asks[asked])), time.Millisecond)
		}
		if errors.Is(lastErr, crypto.ErrGroupSessionWithheld) {
			// mautrix's wait returns at once for a withheld session.
			t := time.NewTimer(nap)
			select {
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
			continue
		}
		// Wakes when the first device stores that session; every agent's
		// device gets the key in the same sending, so one is enough to wait
		// on, and the bound makes the loop look at the others again (a
		// forwarded key, which comes to the asking device only and wakes no
		// waiter, is found there too).
		devs[0].mach.WaitForSession(ctx, ev.RoomID, content.SenderKey, content.SessionID, nap)
	}
}

// decryptGivenUp decrypts ev, of a session whose key an earlier event (first)
// already waited the whole wait for, without waiting again. The room's later
// events are routed behind ev, and a sender's client goes on encrypting with
// one session for many messages (Element: up to 100, or a week), so waiting
// anew for each would hold the room for room_key_wait a message for a key
// that did not come when its inboxes were read and its sender asked twice.
// The inboxes are read once more: a forward lost near the end of first's
// wait is there. A key that does come is logged as late and takes the
// session off the list, and the session's events after it decrypt as usual.
func (d *Devices) decryptGivenUp(ctx context.Context, devs []*device, ev *event.Event, content *event.EncryptedEventContent, first givenUp) (*event.Event, error) {
	dec, err := decryptAny(ctx, devs, ev)
	if errors.Is(err, crypto.ErrNoSessionFound) && d.fromInboxes(ctx, devs, ev.RoomID, content.SessionID) {
		dec, err = decryptAny(ctx, devs, ev)
	}
	if err != nil {
		return nil, fmt.Errorf("e2ee: %s in %s (session %s): not waited for, the wait for its key was given up on for %s: %w: %w", ev.ID, ev.RoomID, content.SessionID, first.event, err, ErrUndecryptable)
	}
	return dec, nil
}

// decryptAny decrypts ev with the first of devs that can, or fails with the
// last one's error.
func decryptAny(ctx context.Context, devs []*device, ev *event.Event) (*event.Event, error) {
	var lastErr error
	for _, dev := range devs {
		dec, err := decryptWith(ctx, dev.mach, ev)
		if err == nil {
			return dec, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// lateKeyLooks are when, in room_key_waits after a session was given up on,
// the devices' inboxes are read for its key (watchLateKey).
var lateKeyLooks = []time.Duration{1, 3, 7}

// watchLateKey reads the inboxes of devs for room's session, given up on
// after waiting wait, at lateKeyLooks, until its key has come. Synapse can
// lose a late key on the way too (as it loses any to-device message:
// docs/security.md), and then only the inbox has it: read there, it is
// logged as late like one pushed, which is what tells an operator the
// homeserver is late rather than the key lost; and the session's later
// messages decrypt as usual.
func (d *Devices) watchLateKey(devs []*device, room id.RoomID, session id.SessionID, wait time.Duration) {
	d.background(func(ctx context.Context) {
		from := time.Now()
		for _, n := range lateKeyLooks {
			t := time.NewTimer(time.Until(from.Add(n * wait)))
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			if _, ok := d.late.givenUpOn(room, session); !ok {
				return
			}
			for _, dev := range devs {
				d.logInboxRead(ctx, dev, inboxPages, "reading an agent device's to-device inbox for a room key given up on")
			}
		}
	})
}

// askForKey asks ev's sender's devices for ev's room key from each of devs
// (the devices of the agents in its room), the round-th time for its
// session: a forwarded key goes to the asking device only, and every agent
// there reads the room with its own device. The events after the first of a
// session lost on the way wait for the same answers.
func (d *Devices) askForKey(ctx context.Context, devs []*device, ev *event.Event, content *event.EncryptedEventContent, round int) {
	if !d.late.ask(ev.RoomID, content.SessionID, round) {
		return
	}
	users := map[id.UserID][]id.DeviceID{ev.Sender: {"*"}}
	var asking []string
	for _, dev := range devs {
		if err := dev.mach.SendRoomKeyRequest(ctx, ev.RoomID, content.SenderKey, content.SessionID, "", users); err != nil {
			d.log.Warn("asking the sender's devices for a room key that has not come", "event", ev.ID, "sender", ev.Sender, "session", content.SessionID, "agent", dev.agent.Name, "err", err)
			continue
		}
		asking = append(asking, dev.agent.Name)
	}
	if len(asking) > 0 {
		d.log.Info("asked the sender's devices for a room key that has not come", "event", ev.ID, "room", ev.RoomID, "sender", ev.Sender, "session", content.SessionID, "agents", asking, "round", round)
	}
}

// keyReceived is every device's mautrix SessionReceived hook: a room key
// stored for a session whose event Decrypt gave up on is logged, with how
// long after that event's wait began it came (lateKeys says why).
func (d *Devices) keyReceived(_ context.Context, room id.RoomID, session id.SessionID, _ uint32) {
	g, ok := d.late.arrived(room, session)
	if !ok {
		return
	}
	d.log.Warn("a room key came after its message was given up on: the homeserver delivered it late",
		"room", room, "session", session, "event", g.event,
		"came_after", time.Since(g.waiting).Round(time.Millisecond), "waited", d.lateKeyWait())
}

// lateKeyWait is Options.LateKeyWait or its default.
func (d *Devices) lateKeyWait() time.Duration {
	if d.opts.LateKeyWait > 0 {
		return d.opts.LateKeyWait
	}
	return DefaultLateKeyWait
}

// DecryptAs decrypts ev with user's device and the room keys it holds now,
// without waiting for a late one: what an agent reads of a room's history.
func (d *Devices) DecryptAs(ctx context.Context, user id.UserID, ev *event.Event) (*event.Event, error) {
	dev := d.byUser[user]
	if dev == nil {
		return nil, fmt.Errorf("e2ee: %s has no device: %w", user, ErrUndecryptable)
	}
	dec, err := decryptWith(ctx, dev.mach, ev)
	if err != nil {
		return nil, fmt.Errorf("e2ee: %s's device decrypting %s: %w: %w", dev.agent.Name, ev.ID, err, ErrUndecryptable)
	}
	return dec, nil
}

// inRoom are the devices of the agents joined to room.
func (d *Devices) inRoom(ctx context.Context, room id.RoomID) []*device {
	rs, err := d.opts.Rooms.Room(ctx, room)
	if err != nil {
		return d.order
	}
	var out []*device
	for _, dev := range d.order {
		if rs.Joined(dev.agent.UserID) {
			out = append(out, dev)
		}
	}
	return out
}

// Encrypted says whether room is end-to-end encrypted, as the room state
// holds it (read from the homeserver when it is not current).
// A room the daemon is not bound to is an error: its encryption is not
// followed, and a post must not go there in the clear by mistake.
func (d *Devices) Encrypted(ctx context.Context, room id.RoomID) (bool, error) {
	rs, err := d.opts.Rooms.Room(ctx, room)
	if err != nil {
		return false, fmt.Errorf("e2ee: the encryption of %s: %w", room, err)
	}
	return rs.Encryption != "", nil
}

// Encrypt encrypts content of type evType for room as user's device: the
// room's megolm session is shared first (a new one if there is none or the
// membership changed) with every device of the room's joined and invited
// members it was not shared with, as olm-encrypted to-device messages. The
// result is the content of an m.room.encrypted event; its m.relates_to stays
// in the clear so the thread it belongs to is known without a key.
func (d *Devices) Encrypt(ctx context.Context, user id.UserID, room id.RoomID, evType event.Type, content any) (*event.EncryptedEventContent, error) {
	dev := d.byUser[user]
	if dev == nil {
		return nil, fmt.Errorf("e2ee: %s has no device to encrypt with", user)
	}
	var lastErr error
	// A membership change seen between sharing and encrypting ends the
	// session just shared; the next round shares a new one.
	for range 3 {
		users, err := d.members(ctx, room)
		if err != nil {
			return nil, err
		}
		if err := dev.mach.ShareGroupSession(ctx, room, users); err != nil {
			return nil, fmt.Errorf("e2ee: %s sharing the room key of %s: %w", dev.agent.Name, room, err)
		}
		enc, err := dev.mach.EncryptMegolmEvent(ctx, room, evType, content)
		if err == nil {
			return enc, nil
		}
		lastErr = err
		if !errors.Is(err, crypto.ErrNoGroupSession) && !errors.Is(err, crypto.ErrSessionExpired) && !errors.Is(err, crypto.ErrSessionNotShared) {
			break
		}
	}
	return nil, fmt.Errorf("e2ee: %s encrypting for %s: %w", dev.agent.Name, room, lastErr)
}

// members are room's joined and invited members: an invited member who
// joins later reads what was sent since the invite, as Element does.
func (d *Devices) members(ctx context.Context, room id.RoomID) ([]id.UserID, error) {
	rs, err := d.opts.Rooms.Room(ctx, room)
	if err != nil {
		return nil, fmt.Errorf("e2ee: the members of %s: %w", room, err)
	}
	users := make([]id.UserID, 0, len(rs.Members))
	for u, m := range rs.Members {
		if m.Membership == event.MembershipJoin || m.Membership == event.MembershipInvite {
			users = append(users, u)
		}
	}
	return users, nil
}
