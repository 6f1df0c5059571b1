package e2ee

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// InboxFilter is the /sync filter of an inbox read: nothing but the
// device's to-device messages.
const InboxFilter = `{"room":{"rooms":[]},"presence":{"not_types":["*"]},"account_data":{"not_types":["*"]}}`

// inboxPages bounds the /sync pages one read for a late key takes: Synapse
// gives 100 to-device messages a page, oldest first, and keeps what it pushed
// to the appservice until the device reads past it, so an inbox holds what
// came since its last read (the start's, drainInboxes, or a late key's); a
// read gets through 2,000, and the next goes on from there.
const inboxPages = 20

// fromInboxes reads the to-device inbox of each of devs and says whether one
// of them now holds room's session. Synapse keeps every to-device message
// in the device's inbox even when it loses it on the way to the appservice
// (a notification handled out of order, or a transaction it retried), so a
// room key the daemon was never pushed is there.
func (d *Devices) fromInboxes(ctx context.Context, devs []*device, room id.RoomID, session id.SessionID) bool {
	found := false
	for _, dev := range devs {
		n, err := dev.readInbox(ctx, inboxPages)
		if err != nil {
			d.log.Warn("reading an agent device's to-device inbox for a room key that has not come", "agent", dev.agent.Name, "room", room, "session", session, "err", err)
			continue
		}
		if s, err := dev.mach.CryptoStore.GetGroupSession(ctx, room, session); err == nil && s != nil {
			d.log.Info("a room key the homeserver had not pushed was in an agent device's inbox", "agent", dev.agent.Name, "room", room, "session", session, "read", n)
			found = true
		}
	}
	return found
}

// readInbox hands the encrypted messages of the device's to-device inbox
// (/sync as the device, no rooms, no wait, at most pages pages) to its
// machine, but for those it was pushed already (handOver), and says how many
// it handed over. Each read goes on from where the last ended, which lets the
// homeserver drop what is before it.
func (dev *device) readInbox(ctx context.Context, pages int) (int, error) {
	dev.inboxMu.Lock()
	defer dev.inboxMu.Unlock()
	dev.pushed.Store(0)
	read := 0
	for range pages {
		resp, err := dev.mach.Client.FullSyncRequest(ctx, mautrix.ReqSync{Since: dev.since, FilterID: InboxFilter})
		if err != nil {
			return read, fmt.Errorf("e2ee: reading %s's to-device inbox: %w", dev.agent.Name, err)
		}
		dev.since = resp.NextBatch
		for _, evt := range resp.ToDevice.Events {
			evt.Type.Class = event.ToDeviceEventType
			if evt.Type != event.ToDeviceEncrypted {
				continue
			}
			if err := evt.Content.ParseRaw(evt.Type); err != nil {
				continue
			}
			if dev.handOver(ctx, evt) {
				read++
			}
		}
		if len(resp.ToDevice.Events) == 0 {
			break
		}
	}
	return read, nil
}

// drainPagesAtStart bounds the start's read of each inbox (drainInboxes):
// 10,000 messages a device.
const drainPagesAtStart = 100

// drainInboxes reads each device's to-device inbox once, as the daemon
// starts. A transaction Synapse held for a retry while the daemon was down or
// stopping loses its to-device messages when it is sent again
// (element-hq/synapse#14710): among them the room keys of messages that come
// in the same transaction, which the devices' inboxes keep. Read at start,
// those messages decrypt as they come rather than halfway through
// room_key_wait, each holding its room until then. The read also lets the
// homeserver drop what the devices were pushed since their last read. Its
// last line says the read is over (a device whose read failed was warned of):
// until then a room key lost on its way may be found by it rather than by
// fromInboxes, which a scenario about the late key's path waits for.
func (d *Devices) drainInboxes(ctx context.Context) {
	for _, dev := range d.order {
		if ctx.Err() != nil {
			return
		}
		d.logInboxRead(ctx, dev, drainPagesAtStart, "reading an agent device's to-device inbox at start")
	}
	d.log.Debug("the start's read of the agent devices' to-device inboxes is over", "devices", len(d.order))
}

// inboxReadAfter is how many to-device messages pushed to a device start a
// read of its inbox (one page of Synapse's). Synapse keeps each message it
// pushes to an appservice in the device's inbox until the device reads past
// it, and keeps an unread one for good (matrix-org/synapse#3599: to-device
// messages have no expiry); a daemon that ran for months with no late key
// and no restart would leave every room key its agents were ever sent in
// the homeserver's database. Read after each hundred, an inbox holds about a
// hundred.
const inboxReadAfter = 100

// notePushed counts a to-device message pushed to dev and, at
// inboxReadAfter since its last read began, reads its inbox in the
// background: one read at a time, so a burst of pushes starts one, which
// reads again when another hundred came while it ran.
func (d *Devices) notePushed(dev *device) {
	if dev.pushed.Add(1) < inboxReadAfter || !dev.reading.CompareAndSwap(false, true) {
		return
	}
	d.background(func(ctx context.Context) {
		for {
			d.logInboxRead(ctx, dev, inboxPages, "reading an agent device's to-device inbox after a hundred pushed messages")
			dev.reading.Store(false)
			if ctx.Err() != nil || dev.pushed.Load() < inboxReadAfter || !dev.reading.CompareAndSwap(false, true) {
				return
			}
		}
	})
}

// logInboxRead reads dev's inbox (at most pages pages), logging a failure
// (as failed) and the messages it held that dev had not been pushed.
func (d *Devices) logInboxRead(ctx context.Context, dev *device, pages int, failed string) {
	n, err := dev.readInbox(ctx, pages)
	switch {
	case ctx.Err() != nil:
	case err != nil:
		d.log.Warn(failed, "agent", dev.agent.Name, "err", err)
	case n > 0:
		d.log.Info("an agent device's inbox held to-device messages it had not been pushed", "agent", dev.agent.Name, "read", n)
	}
}

// handOver gives evt, a to-device message for dev, to its machine unless the
// machine has decrypted it already (decryptedAlready), and says whether it
// did.
func (dev *device) handOver(ctx context.Context, evt *event.Event) bool {
	dev.handMu.Lock()
	defer dev.handMu.Unlock()
	if dev.decryptedAlready(ctx, evt) {
		return false
	}
	dev.mach.HandleToDeviceEvent(ctx, evt)
	return true
}

// decryptedAlready says whether the device's machine has decrypted evt, an
// olm-encrypted to-device message, already: it was pushed. mautrix keeps the
// sha256 of each olm ciphertext it decrypted and refuses one it has seen, but
// logs each refusal as an error ("duplicate olm message"); an inbox read goes
// over every message since the last one, nearly all of them pushed, and a
// message read from the inbox at start may be pushed after, so those are
// left out before the machine sees them. Should mautrix hash them another
// way, this misses and the machine still refuses them (noisily).
func (dev *device) decryptedAlready(ctx context.Context, evt *event.Event) bool {
	content, ok := evt.Content.Parsed.(*event.EncryptedEventContent)
	if !ok || content.Algorithm != id.AlgorithmOlmV1 {
		return false
	}
	ct, ok := content.OlmCiphertext[dev.mach.OwnIdentity().IdentityKey]
	if !ok {
		return false
	}
	body, err := base64.RawStdEncoding.DecodeString(ct.Body)
	if err != nil {
		return false
	}
	at, err := dev.mach.CryptoStore.GetOlmHash(ctx, sha256.Sum256(body))
	return err == nil && !at.IsZero()
}
