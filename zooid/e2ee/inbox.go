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

// inboxFilter asks /sync for nothing but the device's to-device messages.
const inboxFilter = `{"room":{"rooms":[]},"presence":{"not_types":["*"]},"account_data":{"not_types":["*"]}}`

// inboxPages bounds the /sync pages one inbox read takes: Synapse gives 100
// to-device messages a page, oldest first, and keeps what it pushed to the
// appservice until the device reads past it, so the first read of a device
// that lived long before it has a backlog; it gets through 2,000 a read, and
// the next read goes on from there.
const inboxPages = 20

// fromInboxes reads the to-device inbox of each of devs and says whether one
// of them now holds room's session. Synapse keeps every to-device message
// in the device's inbox even when it loses it on the way to the appservice
// (a notification handled out of order, or a transaction it retried), so a
// room key the daemon was never pushed is there.
func (d *Devices) fromInboxes(ctx context.Context, devs []*device, room id.RoomID, session id.SessionID) bool {
	found := false
	for _, dev := range devs {
		n, err := dev.readInbox(ctx)
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
// (/sync as the device, no rooms, no wait) to its machine, but for those it
// was pushed already (decryptedAlready), and says how many it handed over. Each read goes on from where the
// last ended, which lets the homeserver drop what is before it.
func (dev *device) readInbox(ctx context.Context) (int, error) {
	dev.inboxMu.Lock()
	defer dev.inboxMu.Unlock()
	read := 0
	for range inboxPages {
		resp, err := dev.mach.Client.FullSyncRequest(ctx, mautrix.ReqSync{Since: dev.since, FilterID: inboxFilter})
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
			if dev.decryptedAlready(ctx, evt) {
				continue
			}
			read++
			dev.mach.HandleToDeviceEvent(ctx, evt)
		}
		if len(resp.ToDevice.Events) == 0 {
			break
		}
	}
	return read, nil
}

// decryptedAlready says whether the device's machine has decrypted evt, an
// olm-encrypted to-device message, already: it was pushed. mautrix keeps the
// sha256 of each olm ciphertext it decrypted and refuses one it has seen, but
// logs each refusal as an error ("duplicate olm message"); an inbox read goes
// over every message since the last one, nearly all of them pushed, so those
// are left out before the machine sees them. Should mautrix hash them another
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
