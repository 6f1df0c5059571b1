//go:build goolm

package e2eeclient

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// Device is one user's encryption device: mautrix's OlmMachine over the
// user's client, its keys in memory, fed by a /sync loop of its own.
type Device struct {
	cli   *mautrix.Client
	log   zerolog.Logger
	mach  *crypto.OlmMachine
	state *mautrix.MemoryStateStore

	cancel context.CancelFunc
	done   chan struct{} // closed when the sync loop returned
	err    error         // the sync loop's error; read after done

	mu sync.Mutex
	// members is each room's membership as this device's /sync has shown it,
	// after the machine saw the same event (HandleMemberEvent drops the room's
	// outbound session on a change); changed is closed and replaced on each.
	members map[id.RoomID]map[id.UserID]event.Membership
	// encrypted are the m.room.encrypted events the /sync timeline showed,
	// by id; changed is closed on each too.
	encrypted map[id.EventID]*event.Event
	changed   chan struct{}
	// roomKeys are the megolm session keys this device sent messages with,
	// as each stood before the message (RoomKeys).
	roomKeys []string
	// missedHook, set by tests before the device shares, hears the devices a
	// share missed before it shares again.
	missedHook func(missed []string)
	// goneHook, set by tests before the device shares, hears each user the
	// device still saw joined and waits to see gone before it shares.
	goneHook func(user id.UserID)
	// sharedHook, set by tests before the device sends, runs between
	// SendText's share and its encryption: the moment a membership change
	// the device's /sync shows late would take the room session from under it.
	sharedHook func() error
}

// New gives cli's user a device: cli must carry the access token and the
// device id its registration or login returned. New uploads the device's
// identity keys and one-time keys and starts its /sync loop (owned by the
// Device, stopped by Close). log receives mautrix's crypto log. cli becomes
// the device's: act as the user (join, leave, create rooms) through another
// client, since mautrix writes what such calls change into cli's state store
// in place while the loop reads it.
func New(ctx context.Context, cli *mautrix.Client, log zerolog.Logger) (*Device, error) {
	if cli.DeviceID == "" {
		return nil, fmt.Errorf("a device for %s needs the device id its login returned", cli.UserID)
	}
	state, ok := mautrix.NewMemoryStateStore().(*mautrix.MemoryStateStore)
	if !ok {
		return nil, errors.New("mautrix's memory state store has another type than this package knows")
	}
	cli.StateStore = state
	cli.Store = mautrix.NewMemorySyncStore()
	syncer := mautrix.NewDefaultSyncer()
	cli.Syncer = syncer
	cli.Log = log

	mach := crypto.NewOlmMachine(cli, &log, crypto.NewMemoryStore(nil), state)
	if err := mach.Load(ctx); err != nil {
		return nil, fmt.Errorf("loading the olm account of %s's device %s: %w", cli.UserID, cli.DeviceID, err)
	}
	// -1: the server's count is not known yet; ShareKeys uploads the device
	// keys and a full set of one-time keys.
	if err := mach.ShareKeys(ctx, -1); err != nil {
		return nil, fmt.Errorf("uploading the keys of %s's device %s: %w", cli.UserID, cli.DeviceID, err)
	}
	d := &Device{
		cli: cli, log: log, mach: mach, state: state,
		done:      make(chan struct{}),
		members:   map[id.RoomID]map[id.UserID]event.Membership{},
		encrypted: map[id.EventID]*event.Event{},
		changed:   make(chan struct{}),
	}
	// Order matters: the state store first (the machine asks it whether a
	// room is encrypted), then the machine, then what Await* waits on.
	syncer.OnSync(mach.ProcessSyncResponse)
	syncer.OnEvent(cli.StateStoreSyncHandler)
	syncer.OnEventType(event.StateMember, mach.HandleMemberEvent)
	syncer.OnEventType(event.StateMember, d.sawMember)
	syncer.OnEventType(event.EventEncrypted, d.sawEncrypted)

	loopCtx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	go func() {
		defer close(d.done)
		err := cli.SyncWithContext(loopCtx)
		if err != nil && !errors.Is(err, context.Canceled) {
			d.err = fmt.Errorf("the /sync loop of %s's device %s: %w", cli.UserID, cli.DeviceID, err)
		}
	}()
	return d, nil
}

// Close stops the device's /sync loop and waits for it; it returns the
// loop's error, if it ended with one before Close.
func (d *Device) Close() error {
	d.cancel()
	<-d.done
	return d.err
}

// UserID is the device's user.
func (d *Device) UserID() id.UserID { return d.cli.UserID }

// DeviceID is the device's id.
func (d *Device) DeviceID() id.DeviceID { return d.cli.DeviceID }

// IdentityKey is the device's curve25519 key, which a megolm session's sender key names.
func (d *Device) IdentityKey() id.IdentityKey { return d.mach.OwnIdentity().IdentityKey }

func (d *Device) sawMember(_ context.Context, evt *event.Event) {
	m := evt.Content.AsMember()
	if m == nil || evt.StateKey == nil {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.members[evt.RoomID] == nil {
		d.members[evt.RoomID] = map[id.UserID]event.Membership{}
	}
	d.members[evt.RoomID][id.UserID(*evt.StateKey)] = m.Membership
	close(d.changed)
	d.changed = make(chan struct{})
}

func (d *Device) sawEncrypted(_ context.Context, evt *event.Event) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.encrypted[evt.ID] = evt
	close(d.changed)
	d.changed = make(chan struct{})
}

// awaitEncrypted waits until the device's /sync has shown the encrypted
// event eventID of room, as a client reads a room: from its sync, which also
// waits out a server that shows an event a moment after its send.
func (d *Device) awaitEncrypted(ctx context.Context, room id.RoomID, eventID id.EventID) (*event.Event, error) {
	for {
		d.mu.Lock()
		evt, changed := d.encrypted[eventID], d.changed
		d.mu.Unlock()
		if evt != nil {
			if evt.RoomID != room {
				return nil, fmt.Errorf("%s is an event of %s, not %s", eventID, evt.RoomID, room)
			}
			// A copy: each decryption parses its own.
			cp := *evt
			return &cp, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s's device waiting for %s in %s in its /sync: %w", d.cli.UserID, eventID, room, context.Cause(ctx))
		case <-d.done:
			return nil, fmt.Errorf("%s's device waiting for %s in %s: the sync loop ended: %v", d.cli.UserID, eventID, room, d.err)
		case <-changed:
		}
	}
}

// AwaitMembership waits until the device's /sync has shown user's
// membership in room as want (and the crypto machine has seen it: a change
// ends the room's outbound session, so a key shared before it is not the one
// used after).
func (d *Device) AwaitMembership(ctx context.Context, room id.RoomID, user id.UserID, want event.Membership) error {
	return d.awaitMember(ctx, room, user, func(m event.Membership) bool { return m == want },
		fmt.Sprintf("%s's membership %s in %s", user, want, room))
}

// awaitMember waits until the device's /sync has shown a membership of user
// in room that seen accepts; what names the wait in its errors.
func (d *Device) awaitMember(ctx context.Context, room id.RoomID, user id.UserID, seen func(event.Membership) bool, what string) error {
	for {
		d.mu.Lock()
		got, changed := d.members[room][user], d.changed
		d.mu.Unlock()
		if seen(got) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s's device waiting to see %s (last seen %q): %w", d.cli.UserID, what, got, context.Cause(ctx))
		case <-d.done:
			return fmt.Errorf("%s's device waiting to see %s: the sync loop ended: %v", d.cli.UserID, what, d.err)
		case <-changed:
		}
	}
}

// joinedMembers are the users joined to room, as the homeserver says now.
func (d *Device) joinedMembers(ctx context.Context, room id.RoomID) ([]id.UserID, error) {
	resp, err := d.cli.JoinedMembers(ctx, room)
	if err != nil {
		return nil, fmt.Errorf("reading the joined members of %s: %w", room, err)
	}
	users := make([]id.UserID, 0, len(resp.Joined))
	for u := range resp.Joined {
		users = append(users, u)
	}
	return users, nil
}

// encryptionOf makes sure the state store knows room's encryption settings
// (the machine reads them to encrypt) even before the /sync loop saw the
// room: it reads the m.room.encryption state event.
func (d *Device) encryptionOf(ctx context.Context, room id.RoomID) error {
	if enc, err := d.state.IsEncrypted(ctx, room); err != nil {
		return fmt.Errorf("asking the state store whether %s is encrypted: %w", room, err)
	} else if enc {
		return nil
	}
	var content event.EncryptionEventContent
	if err := d.cli.StateEvent(ctx, room, event.StateEncryption, "", &content); err != nil {
		return fmt.Errorf("reading the m.room.encryption state of %s (a device sends only in an encrypted room): %w", room, err)
	}
	if content.Algorithm != id.AlgorithmMegolmV1 {
		return fmt.Errorf("%s is encrypted with %q, not %s", room, content.Algorithm, id.AlgorithmMegolmV1)
	}
	if err := d.state.SetEncryptionEvent(ctx, room, &content); err != nil {
		return fmt.Errorf("storing the encryption of %s: %w", room, err)
	}
	return nil
}

// caughtUp waits until the device's /sync has shown room's membership as
// the homeserver lists it now: each of users joined, and each user it saw
// joined who is not among them gone. The machine drops a room's outbound
// session on a membership change it sees; one seen between sharing a session
// and encrypting with it would leave the send with no session (or a key
// shared for nothing). A leave is the one a device sees late most often: the
// person left through another client a moment ago.
func (d *Device) caughtUp(ctx context.Context, room id.RoomID, users []id.UserID) error {
	for _, u := range users {
		if err := d.AwaitMembership(ctx, room, u, event.MembershipJoin); err != nil {
			return err
		}
	}
	d.mu.Lock()
	var gone []id.UserID
	for u, m := range d.members[room] {
		if m == event.MembershipJoin && !slices.Contains(users, u) {
			gone = append(gone, u)
		}
	}
	d.mu.Unlock()
	for _, u := range gone {
		if d.goneHook != nil {
			d.goneHook(u)
		}
		notJoined := func(m event.Membership) bool { return m != event.MembershipJoin }
		if err := d.awaitMember(ctx, room, u, notJoined, fmt.Sprintf("%s gone from %s (the homeserver no longer lists them joined)", u, room)); err != nil {
			return err
		}
	}
	return nil
}

// ShareRoomKey shares the room's current megolm session (a new one if there
// is none) with every device of room's joined members it was not shared
// with yet, as olm-encrypted m.room_key to-device messages; the devices'
// keys are fetched (/keys/query) and one-time keys claimed as needed.
func (d *Device) ShareRoomKey(ctx context.Context, room id.RoomID) error {
	users, err := d.joinedMembers(ctx, room)
	if err != nil {
		return err
	}
	if err := d.caughtUp(ctx, room, users); err != nil {
		return err
	}
	return d.share(ctx, room, users)
}

// shareTries bounds the shares of one room key: a device none of whose
// one-time keys can be claimed (none uploaded yet, or all claimed before its
// owner topped them up) gets no olm session, and mautrix then shares with the
// others and only logs the one it skipped.
const shareTries = 6

func (d *Device) share(ctx context.Context, room id.RoomID, users []id.UserID) error {
	if err := d.encryptionOf(ctx, room); err != nil {
		return err
	}
	for try := 1; ; try++ {
		// The members' devices as the homeserver lists them now, not as this
		// device's /sync last told it: a device made a moment ago (an agent's,
		// as its daemon starts) reaches the /sync a moment later, and a key
		// shared before that would miss it. A new device found here ends the
		// room's outbound session, so the key goes to it too.
		if _, err := d.mach.FetchKeys(ctx, users, true); err != nil {
			return fmt.Errorf("%s fetching the device keys of %v: %w", d.cli.UserID, users, err)
		}
		if err := d.mach.ShareGroupSession(ctx, room, users); err != nil {
			return fmt.Errorf("%s sharing the room key of %s with %v: %w", d.cli.UserID, room, users, err)
		}
		missed, err := d.unshared(ctx, room, users)
		if err != nil || len(missed) == 0 {
			return err
		}
		if try == shareTries {
			return fmt.Errorf("%s could not share the room key of %s with %v after %d tries: no olm session with them (none of their one-time keys could be claimed)", d.cli.UserID, room, missed, try)
		}
		d.log.Warn().Stringer("room_id", room).Strs("devices", missed).Int("try", try).
			Msg("the room key missed devices with no olm session yet; sharing a new one again")
		if d.missedHook != nil {
			d.missedHook(missed)
		}
		// Dropped, so the next share makes a session every device gets
		// (mautrix does not share an already shared session again).
		if err := d.mach.CryptoStore.RemoveOutboundGroupSession(ctx, room); err != nil {
			return fmt.Errorf("%s dropping the half-shared room session of %s: %w", d.cli.UserID, room, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s sharing the room key of %s with %v: %w", d.cli.UserID, room, missed, ctx.Err())
		case <-time.After(time.Duration(try) * 100 * time.Millisecond):
		}
	}
}

// unshared names the devices of users (other than this one) that the room's
// outbound session was not shared with, as "user/device".
func (d *Device) unshared(ctx context.Context, room id.RoomID, users []id.UserID) ([]string, error) {
	ogs, err := d.mach.CryptoStore.GetOutboundGroupSession(ctx, room)
	if err != nil || ogs == nil {
		return nil, fmt.Errorf("%s's outbound session in %s after sharing it: %v", d.cli.UserID, room, err)
	}
	var missed []string
	for _, u := range users {
		devices, err := d.mach.CryptoStore.GetDevices(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("the devices %s knows of %s: %w", d.cli.UserID, u, err)
		}
		for dev := range devices {
			if u == d.cli.UserID && dev == d.cli.DeviceID {
				continue
			}
			if ogs.Users[crypto.UserDevice{UserID: u, DeviceID: dev}] != crypto.OGSAlreadyShared {
				missed = append(missed, u.String()+"/"+dev.String())
			}
		}
	}
	slices.Sort(missed)
	return missed, nil
}

// SendText sends text as an m.text message encrypted for room, sharing the
// room key first with every joined member's devices, as Element does.
func (d *Device) SendText(ctx context.Context, room id.RoomID, text string) (id.EventID, error) {
	if err := d.ShareRoomKey(ctx, room); err != nil {
		return "", err
	}
	if d.sharedHook != nil {
		if err := d.sharedHook(); err != nil {
			return "", err
		}
	}
	return d.send(ctx, room, text)
}

// HeldKey is a room key a device sent a message with and has not shared
// yet: the m.room_key content, taken at the session's first message.
type HeldKey struct {
	room    id.RoomID
	content event.Content
}

// SendTextKeyLater sends text encrypted with a room session whose key it
// shares with no one yet, and returns that key: the room's other devices
// hold the event and no key for it until DeliverKey sends the same
// m.room_key Element would have sent first (the late key of a to-device
// message slower than the room's event).
func (d *Device) SendTextKeyLater(ctx context.Context, room id.RoomID, text string) (id.EventID, *HeldKey, error) {
	users, err := d.joinedMembers(ctx, room)
	if err != nil {
		return "", nil, err
	}
	if err := d.caughtUp(ctx, room, users); err != nil {
		return "", nil, err
	}
	// Shared with the device's own user only, the session exists and may
	// encrypt; its key is taken before the first message moves its ratchet.
	if err := d.share(ctx, room, []id.UserID{d.cli.UserID}); err != nil {
		return "", nil, err
	}
	ogs, err := d.mach.CryptoStore.GetOutboundGroupSession(ctx, room)
	if err != nil || ogs == nil {
		return "", nil, fmt.Errorf("%s's outbound session in %s after sharing it: %v", d.cli.UserID, room, err)
	}
	held := &HeldKey{room: room, content: ogs.ShareContent()}
	evt, err := d.send(ctx, room, text)
	if err != nil {
		return "", nil, err
	}
	return evt, held, nil
}

// DeliverKey sends key, olm-encrypted as m.room_key, to every device of the
// room's other joined members.
func (d *Device) DeliverKey(ctx context.Context, key *HeldKey) error {
	users, err := d.joinedMembers(ctx, key.room)
	if err != nil {
		return err
	}
	users = slices.DeleteFunc(users, func(u id.UserID) bool { return u == d.cli.UserID })
	devices, err := d.mach.FetchKeys(ctx, users, true)
	if err != nil {
		return fmt.Errorf("%s fetching the device keys of %v: %w", d.cli.UserID, users, err)
	}
	for _, u := range users {
		for _, dev := range devices[u] {
			if err := d.mach.SendEncryptedToDevice(ctx, dev, event.ToDeviceRoomKey, key.content); err != nil {
				return fmt.Errorf("%s sending the room key of %s to %s's device %s: %w", d.cli.UserID, key.room, u, dev.DeviceID, err)
			}
		}
	}
	return nil
}

// RoomKeys are the megolm session keys the device sent messages with, as
// the room's devices received them (the m.room_key content's session_key):
// the secrets a test looks for where they must not be.
func (d *Device) RoomKeys() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.roomKeys)
}

// SendThreadReply is SendText for a reply in the thread on root: its
// m.relates_to is encrypted with the body and, as Element sends it, kept in
// the clear too, so the homeserver can index the thread.
func (d *Device) SendThreadReply(ctx context.Context, room id.RoomID, root id.EventID, text string) (id.EventID, error) {
	if err := d.ShareRoomKey(ctx, room); err != nil {
		return "", err
	}
	content := &event.MessageEventContent{MsgType: event.MsgText, Body: text}
	content.RelatesTo = (&event.RelatesTo{}).SetThread(root, root)
	return d.sendContent(ctx, room, content)
}

func (d *Device) send(ctx context.Context, room id.RoomID, text string) (id.EventID, error) {
	return d.sendContent(ctx, room, &event.MessageEventContent{MsgType: event.MsgText, Body: text})
}

func (d *Device) sendContent(ctx context.Context, room id.RoomID, content *event.MessageEventContent) (id.EventID, error) {
	if ogs, err := d.mach.CryptoStore.GetOutboundGroupSession(ctx, room); err == nil && ogs != nil {
		// The content mautrix shared the session with: its key as the
		// room's devices received it.
		if c, ok := ogs.ShareContent().Parsed.(*event.RoomKeyEventContent); ok && !slices.Contains(d.RoomKeys(), c.SessionKey) {
			d.mu.Lock()
			d.roomKeys = append(d.roomKeys, c.SessionKey)
			d.mu.Unlock()
		}
	}
	enc, err := d.mach.EncryptMegolmEvent(ctx, room, event.EventMessage, content)
	if err != nil {
		return "", fmt.Errorf("%s encrypting a message for %s: %w", d.cli.UserID, room, err)
	}
	resp, err := d.cli.SendMessageEvent(ctx, room, event.EventEncrypted, enc)
	if err != nil {
		return "", fmt.Errorf("%s sending an encrypted message in %s: %w", d.cli.UserID, room, err)
	}
	return resp.EventID, nil
}

// Decrypt decrypts evt, an m.room.encrypted event, with the room keys the
// device holds now; without the key it fails with crypto.ErrNoSessionFound.
func (d *Device) Decrypt(ctx context.Context, evt *event.Event) (*event.Event, error) {
	if evt.Type != event.EventEncrypted {
		return nil, fmt.Errorf("event %s is %s, not %s", evt.ID, evt.Type.Type, event.EventEncrypted.Type)
	}
	if evt.Content.Parsed == nil {
		if err := evt.Content.ParseRaw(evt.Type); err != nil {
			return nil, fmt.Errorf("parsing the encrypted content of %s: %w", evt.ID, err)
		}
	}
	dec, err := d.mach.DecryptMegolmEvent(ctx, evt)
	if err != nil {
		return nil, fmt.Errorf("%s's device decrypting %s: %w", d.cli.UserID, evt.ID, err)
	}
	return dec, nil
}

// ReadTextNow waits until the device's /sync has shown the encrypted event
// eventID of room, and decrypts it with the keys the device holds then: without its key the error wraps
// crypto.ErrNoSessionFound and noKey is true.
func (d *Device) ReadTextNow(ctx context.Context, room id.RoomID, eventID id.EventID) (text string, noKey bool, err error) {
	evt, err := d.awaitEncrypted(ctx, room, eventID)
	if err != nil {
		return "", false, err
	}
	dec, err := d.Decrypt(ctx, evt)
	if err != nil {
		return "", errors.Is(err, crypto.ErrNoSessionFound), err
	}
	text, err = bodyOf(dec)
	return text, false, err
}

// bodyOf is a decrypted message's body.
func bodyOf(dec *event.Event) (string, error) {
	msg := dec.Content.AsMessage()
	if msg == nil || dec.Type != event.EventMessage {
		return "", fmt.Errorf("%s decrypted to %s, not a message", dec.ID, dec.Type.Type)
	}
	return msg.Body, nil
}

// ReadText waits until the device's /sync has shown the encrypted event
// eventID of room and returns its plaintext body. Without its key yet it waits, until ctx ends, for the key
// to arrive through the device's /sync (the machine says when a session is
// stored), then decrypts: a late key is read once it comes.
func (d *Device) ReadText(ctx context.Context, room id.RoomID, eventID id.EventID) (string, error) {
	evt, err := d.awaitEncrypted(ctx, room, eventID)
	if err != nil {
		return "", err
	}
	for {
		dec, err := d.Decrypt(ctx, evt)
		if err == nil {
			return bodyOf(dec)
		}
		if !errors.Is(err, crypto.ErrNoSessionFound) {
			return "", err
		}
		content := evt.Content.AsEncrypted()
		// WaitForSession wakes when the machine stores that session; the
		// bound only makes the loop look at ctx again.
		d.mach.WaitForSession(ctx, room, content.SenderKey, content.SessionID, time.Second)
		if ctx.Err() != nil {
			return "", fmt.Errorf("%s's device has no key for %s in %s (session %s): %w", d.cli.UserID, eventID, room, content.SessionID, context.Cause(ctx))
		}
	}
}
