package matrix

import (
	"context"
	"errors"
	"fmt"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// Crypto is the agents' end-to-end encryption devices (zooid/e2ee): the
// transport hands them each pushed transaction's encryption data, shows
// them membership changes, asks them to decrypt encrypted events before the
// handler sees them and to encrypt what an agent posts in an encrypted
// room. It is an interface so this package links no crypto of its own.
type Crypto interface {
	// Transaction takes a pushed transaction's body: its to-device
	// messages, one-time key counts and device list changes. It returns
	// once what it holds is stored.
	Transaction(ctx context.Context, body []byte)
	// Observe sees every delivered event of a bound room, after the room
	// state has.
	Observe(ctx context.Context, ev *event.Event)
	// Decrypt decrypts an m.room.encrypted event, waiting a bounded time
	// for a room key that has not arrived.
	Decrypt(ctx context.Context, ev *event.Event) (*event.Event, error)
	// DecryptAs decrypts an m.room.encrypted event with user's device and
	// the keys it holds now, without waiting.
	DecryptAs(ctx context.Context, user id.UserID, ev *event.Event) (*event.Event, error)
	// Encrypted says whether room is end-to-end encrypted; an error when
	// that cannot be known (nothing is then sent in the clear).
	Encrypted(ctx context.Context, room id.RoomID) (bool, error)
	// Encrypt gives the m.room.encrypted content of content as user's
	// device sends it in room.
	Encrypt(ctx context.Context, user id.UserID, room id.RoomID, evType event.Type, content any) (*event.EncryptedEventContent, error)
	// Close closes the key store.
	Close() error
}

// CryptoOpener opens the agents' devices once Start has registered their
// users and joined their rooms (a device needs its user to exist). t gives
// the opener the agents' clients and the room state.
type CryptoOpener func(ctx context.Context, t *Transport) (Crypto, error)

// BoundRooms are the rooms the transport's agents are bound to.
func (t *Transport) BoundRooms() []id.RoomID { return t.boundRooms() }

// openCrypto opens the devices when the options ask for them. Pushed
// transactions wait for it (awaitCrypto): one that came during set-up may
// hold a room key.
func (t *Transport) openCrypto(ctx context.Context) error {
	defer close(t.cryptoReady)
	if t.opts.OpenCrypto == nil {
		return nil
	}
	c, err := t.opts.OpenCrypto(ctx, t)
	if err != nil {
		return fmt.Errorf("opening the agents' encryption devices: %w", err)
	}
	t.crypto = c
	return nil
}

// errNoDevices is why a transaction is refused when the devices could not be
// opened: the homeserver retries it, and the daemon is stopping anyway.
var errNoDevices = errors.New("the agents' encryption devices are not open")

// awaitCrypto waits until openCrypto is done; with devices it hands them
// the transaction's encryption data. Without OpenCrypto it returns at once.
func (t *Transport) awaitCrypto(ctx context.Context, body []byte) error {
	if t.opts.OpenCrypto == nil {
		return nil
	}
	select {
	case <-t.cryptoReady:
	case <-ctx.Done():
		return ctx.Err()
	case <-t.closed:
		return errNoDevices
	}
	c := t.devices()
	if c == nil {
		return errNoDevices
	}
	c.Transaction(ctx, body)
	return nil
}

// devices are the opened devices, nil before openCrypto is done or without
// them: reading t.crypto only after cryptoReady is closed is what orders it
// after openCrypto's write.
func (t *Transport) devices() Crypto {
	select {
	case <-t.cryptoReady:
		return t.crypto
	default:
		return nil
	}
}

// decrypted is what the handler is given for ev: ev decrypted when it is an
// m.room.encrypted event and a device holds its key, else ev itself (an
// encrypted event the handler then knows could not be read). The dispatcher
// starts after openCrypto, so devices are open by then when configured.
func (t *Transport) decrypted(ctx context.Context, ev *event.Event) *event.Event {
	c := t.devices()
	if c == nil {
		return ev
	}
	c.Observe(ctx, ev)
	if ev.Type != event.EventEncrypted {
		return ev
	}
	dec, err := c.Decrypt(ctx, ev)
	if err != nil {
		t.log.Warn("an encrypted event stays undecryptable", "room", ev.RoomID, "event", ev.ID, "sender", ev.Sender, "err", err)
		return ev
	}
	t.log.Debug("decrypted", "room", ev.RoomID, "event", ev.ID, "type", dec.Type.Type)
	return dec
}

// sealed is what Send sends for content: in an encrypted room with devices,
// its m.room.encrypted content; otherwise content as it is. With devices
// configured it waits for them to open, and fails rather than send in the
// clear when they did not open or the room's encryption cannot be known.
func (t *Transport) sealed(ctx context.Context, as id.UserID, room id.RoomID, evType event.Type, content any) (event.Type, any, error) {
	if t.opts.OpenCrypto == nil {
		return evType, content, nil
	}
	select {
	case <-t.cryptoReady:
	case <-ctx.Done():
		return evType, nil, fmt.Errorf("sending %s to %s as %s: waiting for the encryption devices: %w", evType.Type, room, as, ctx.Err())
	}
	c := t.devices()
	if c == nil {
		return evType, nil, fmt.Errorf("sending %s to %s as %s: %w", evType.Type, room, as, errNoDevices)
	}
	encrypted, err := c.Encrypted(ctx, room)
	if err != nil {
		return evType, nil, fmt.Errorf("sending %s to %s as %s: is the room encrypted? %w", evType.Type, room, as, err)
	}
	if !encrypted {
		return evType, content, nil
	}
	enc, err := c.Encrypt(ctx, as, room, evType, content)
	if err != nil {
		return evType, nil, fmt.Errorf("sending %s to %s as %s: %w", evType.Type, room, as, err)
	}
	return event.EventEncrypted, enc, nil
}

// Decrypted is ev as user reads it: decrypted with user's device when ev is
// an m.room.encrypted event whose key the device holds, else ev itself. The
// tools read history through it (history.Options.Decrypt).
func (t *Transport) Decrypted(ctx context.Context, user id.UserID, ev *event.Event) *event.Event {
	c := t.devices()
	if c == nil || ev == nil || ev.Type.Type != event.EventEncrypted.Type {
		return ev
	}
	dec, err := c.DecryptAs(ctx, user, ev)
	if err != nil {
		t.log.Debug("an encrypted event read as undecryptable", "user", user, "room", ev.RoomID, "event", ev.ID, "err", err)
		return ev
	}
	return dec
}
