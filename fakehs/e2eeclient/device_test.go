//go:build goolm

package e2eeclient

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/docker/synapse"
	"github.com/zooid-dev/zooid/fakehs"
)

// homeserverURL is the homeserver ZOOID_TEST_HOMESERVER names: an in-process
// fakehs by default, a Synapse container for "synapse", else a base URL.
func homeserverURL(t *testing.T) string {
	t.Helper()
	switch hs := os.Getenv("ZOOID_TEST_HOMESERVER"); hs {
	case "", "fake":
		return fakehs.New(t).URL()
	case "synapse":
		return synapse.RunForTest(t).BaseURL()
	default:
		return hs
	}
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("reading random bytes: %v", err)
	}
	return hex.EncodeToString(b)
}

// person registers a fresh user (as Element does: the device id comes with
// the registration) and gives it a device, closed when the test ends.
func person(ctx context.Context, t *testing.T, hsURL, name string) *Device {
	t.Helper()
	return personVia(ctx, t, hsURL, name, nil)
}

// personVia is person whose client makes its requests through rt (net/http's
// default when nil), set before the device's /sync loop starts.
func personVia(ctx context.Context, t *testing.T, hsURL, name string, rt http.RoundTripper) *Device {
	t.Helper()
	cli, err := mautrix.NewClient(hsURL, "", "")
	if err != nil {
		t.Fatalf("a client for %s: %v", name, err)
	}
	if rt != nil {
		cli.Client.Transport = rt
	}
	cli.DefaultHTTPRetries = 4
	lp := name + "-" + randomHex(t, 4)
	resp, err := cli.RegisterDummy(ctx, &mautrix.ReqRegister[any]{Username: lp, Password: password(lp)})
	if err != nil {
		t.Fatalf("registering %s: %v", lp, err)
	}
	cli.SetCredentials(resp.UserID, resp.AccessToken)
	cli.DeviceID = resp.DeviceID
	return device(ctx, t, cli, name)
}

func password(localpart string) string { return "pw-" + localpart }

// anotherDevice logs d's user in again, as a second Element session does,
// and gives that login a device of its own.
func anotherDevice(ctx context.Context, t *testing.T, hsURL string, d *Device, name string) *Device {
	t.Helper()
	return device(ctx, t, loginAgain(ctx, t, hsURL, d), name)
}

// loginAgain logs d's user in again: a client with a new device id.
func loginAgain(ctx context.Context, t *testing.T, hsURL string, d *Device) *mautrix.Client {
	t.Helper()
	cli, err := mautrix.NewClient(hsURL, "", "")
	if err != nil {
		t.Fatalf("a client for %s: %v", d.UserID(), err)
	}
	cli.DefaultHTTPRetries = 4
	lp := d.UserID().Localpart()
	_, err = cli.Login(ctx, &mautrix.ReqLogin{
		Type:             mautrix.AuthTypePassword,
		Identifier:       mautrix.UserIdentifier{Type: mautrix.IdentifierTypeUser, User: lp},
		Password:         password(lp),
		StoreCredentials: true,
	})
	if err != nil {
		t.Fatalf("logging %s in again: %v", lp, err)
	}
	return cli
}

func device(ctx context.Context, t *testing.T, cli *mautrix.Client, name string) *Device {
	t.Helper()
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel).With().Str("device", name).Logger()
	d, err := New(ctx, cli, log)
	if err != nil {
		t.Fatalf("a device for %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("closing %s's device: %v", name, err)
		}
	})
	return d
}

// encryptedRoom is a private room ori creates with encryption on, as Element
// creates one, with mia invited and joined.
func encryptedRoom(ctx context.Context, t *testing.T, ori, mia *Device) id.RoomID {
	t.Helper()
	resp, err := actAs(t, ori).CreateRoom(ctx, &mautrix.ReqCreateRoom{
		Preset: "private_chat",
		InitialState: []*event.Event{{
			Type:    event.StateEncryption,
			Content: event.Content{Parsed: &event.EncryptionEventContent{Algorithm: id.AlgorithmMegolmV1}},
		}},
	})
	if err != nil {
		t.Fatalf("ori creating an encrypted room: %v", err)
	}
	if _, err := actAs(t, ori).InviteUser(ctx, resp.RoomID, &mautrix.ReqInviteUser{UserID: mia.UserID()}); err != nil {
		t.Fatalf("ori inviting mia: %v", err)
	}
	if _, err := actAs(t, mia).JoinRoomByID(ctx, resp.RoomID); err != nil {
		t.Fatalf("mia joining: %v", err)
	}
	return resp.RoomID
}

// TestMiaDecryptsWhatOriSent: ori's device encrypts a message with a megolm
// session it shares with the room's devices (olm over /keys/claim and
// sendToDevice), and mia's device, given the key by its /sync, decrypts it
// to the exact text, seeing ori and ori's device as its sender.
func TestMiaDecryptsWhatOriSent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	hs := homeserverURL(t)
	ori, mia := person(ctx, t, hs, "ori"), person(ctx, t, hs, "mia")
	room := encryptedRoom(ctx, t, ori, mia)

	const text = "the deploy key rotates at noon"
	evt, err := ori.SendText(ctx, room, text)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := mia.cli.GetEvent(ctx, room, evt)
	if err != nil {
		t.Fatalf("mia reading %s: %v", evt, err)
	}
	if raw.Type != event.EventEncrypted {
		t.Fatalf("the homeserver holds %s as %s, want %s", evt, raw.Type.Type, event.EventEncrypted.Type)
	}
	got, err := mia.ReadText(ctx, room, evt)
	if err != nil {
		t.Fatal(err)
	}
	if got != text {
		t.Fatalf("mia decrypted %q, want %q", got, text)
	}
	raw.RoomID = room
	dec, err := mia.Decrypt(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	if dec.Sender != ori.UserID() {
		t.Fatalf("the decrypted event's sender is %s, want %s", dec.Sender, ori.UserID())
	}
	if enc := raw.Content.AsEncrypted(); enc.SenderKey != "" && enc.SenderKey != id.SenderKey(ori.IdentityKey()) {
		t.Fatalf("the event's sender key is %s, want ori's device's %s", enc.SenderKey, ori.IdentityKey())
	}
}

// TestALateRoomKey: mia joins, ori's message reaches mia's device before
// its key (mia cannot decrypt it: no session), and mia's device decrypts it
// once ori delivers the key, which comes through mia's /sync.
func TestALateRoomKey(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	hs := homeserverURL(t)
	ori, mia := person(ctx, t, hs, "ori"), person(ctx, t, hs, "mia")
	room := encryptedRoom(ctx, t, ori, mia)

	const text = "the standby takes over at six"
	evt, key, err := ori.SendTextKeyLater(ctx, room, text)
	if err != nil {
		t.Fatal(err)
	}
	if _, noKey, err := mia.ReadTextNow(ctx, room, evt); !noKey || !errors.Is(err, crypto.ErrNoSessionFound) {
		t.Fatalf("before the key, mia's device decrypting %s: %v (no key: %t), want %v", evt, err, noKey, crypto.ErrNoSessionFound)
	}

	read := make(chan error, 1)
	var got string
	go func() {
		var err error
		got, err = mia.ReadText(ctx, room, evt)
		read <- err
	}()
	if err := ori.DeliverKey(ctx, key); err != nil {
		t.Fatal(err)
	}
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	if got != text {
		t.Fatalf("mia decrypted %q once the key came, want %q", got, text)
	}
}

// TestALeaveTheDeviceSeesLateIsSeenBeforeItShares: mia leaves through
// another client and ori sends at once, while ori's /sync has not shown the
// leave yet. mautrix drops a room's outbound session when its /sync shows a
// membership change; had ori shared a new session first, the leave arriving
// between the share and the encryption would leave it no session to encrypt
// with ("no group session created", seen in CI). ori's device waits to see
// mia gone before it shares. Here ori's /sync responses are held until it
// waits; a device that shared without waiting would be shown the leave right
// after its share (sharedHook), which makes the old race certain.
func TestALeaveTheDeviceSeesLateIsSeenBeforeItShares(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	hs := homeserverURL(t)
	gate := &heldSync{base: http.DefaultTransport}
	ori := personVia(ctx, t, hs, "ori", gate)
	mia, sam := person(ctx, t, hs, "mia"), person(ctx, t, hs, "sam")
	room := encryptedRoom(ctx, t, ori, mia)
	if _, err := actAs(t, ori).InviteUser(ctx, room, &mautrix.ReqInviteUser{UserID: sam.UserID()}); err != nil {
		t.Fatalf("ori inviting sam: %v", err)
	}
	if _, err := actAs(t, sam).JoinRoomByID(ctx, room); err != nil {
		t.Fatalf("sam joining: %v", err)
	}
	// ori's device has seen both join and has no room session yet: the
	// send below makes one.
	for _, u := range []id.UserID{mia.UserID(), sam.UserID()} {
		if err := ori.AwaitMembership(ctx, room, u, event.MembershipJoin); err != nil {
			t.Fatal(err)
		}
	}

	gate.hold()
	var waitedFor []id.UserID
	ori.goneHook = func(u id.UserID) {
		waitedFor = append(waitedFor, u)
		gate.release()
	}
	ori.sharedHook = func() error {
		gate.release()
		return ori.AwaitMembership(ctx, room, mia.UserID(), event.MembershipLeave)
	}
	if _, err := actAs(t, mia).LeaveRoom(ctx, room); err != nil {
		t.Fatalf("mia leaving: %v", err)
	}
	const text = "sam, the standby takes over at six"
	evt, err := ori.SendText(ctx, room, text)
	if err != nil {
		t.Fatalf("ori sending while its /sync has not shown mia's leave: %v", err)
	}
	if !slices.Equal(waitedFor, []id.UserID{mia.UserID()}) {
		t.Fatalf("ori's device waited to see %v gone before sharing, want [%s]", waitedFor, mia.UserID())
	}
	got, err := sam.ReadText(ctx, room, evt)
	if err != nil {
		t.Fatal(err)
	}
	if got != text {
		t.Fatalf("sam decrypted %q, want %q", got, text)
	}
}

// heldSync is a client's transport that, between hold and release, holds
// every /sync response, as a slow sync connection would.
type heldSync struct {
	base http.RoundTripper

	mu   sync.Mutex
	open chan struct{} // nil or closed while responses pass
	once *sync.Once
}

func (h *heldSync) hold() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.open, h.once = make(chan struct{}), new(sync.Once)
}

func (h *heldSync) release() {
	h.mu.Lock()
	open, once := h.open, h.once
	h.mu.Unlock()
	if once != nil {
		once.Do(func() { close(open) })
	}
}

func (h *heldSync) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := h.base.RoundTrip(req)
	if err != nil || !strings.HasSuffix(req.URL.Path, "/sync") {
		return resp, err
	}
	h.mu.Lock()
	open := h.open
	h.mu.Unlock()
	if open == nil {
		return resp, nil
	}
	select {
	case <-open:
		return resp, nil
	case <-req.Context().Done():
		resp.Body.Close()
		return nil, req.Context().Err()
	}
}

// TestANewDeviceOfAReturningMemberGetsTheKey: ori's device learnt mia's
// devices in a room they shared; mia left it, logged in a second device,
// and joins another of ori's rooms. The homeserver tells ori's device that
// mia's devices changed (device_lists.changed: a newly shared room), so ori
// shares the new room's key with mia's second device too, which decrypts.
func TestANewDeviceOfAReturningMemberGetsTheKey(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	hs := homeserverURL(t)
	ori, mia := person(ctx, t, hs, "ori"), person(ctx, t, hs, "mia")
	first := encryptedRoom(ctx, t, ori, mia)
	if _, err := ori.SendText(ctx, first, "hello mia"); err != nil {
		t.Fatal(err)
	}
	if _, err := actAs(t, mia).LeaveRoom(ctx, first); err != nil {
		t.Fatalf("mia leaving: %v", err)
	}
	if err := ori.AwaitMembership(ctx, first, mia.UserID(), event.MembershipLeave); err != nil {
		t.Fatal(err)
	}
	phone := anotherDevice(ctx, t, hs, mia, "mia-phone")
	second := encryptedRoom(ctx, t, ori, phone)
	if err := ori.AwaitMembership(ctx, second, mia.UserID(), event.MembershipJoin); err != nil {
		t.Fatal(err)
	}

	const text = "the new runbook is pinned"
	evt, err := ori.SendText(ctx, second, text)
	if err != nil {
		t.Fatal(err)
	}
	readCtx, cancelRead := context.WithTimeout(ctx, 15*time.Second)
	defer cancelRead()
	got, err := phone.ReadText(readCtx, second, evt)
	if err != nil {
		t.Fatalf("mia's second device: %v", err)
	}
	if got != text {
		t.Fatalf("mia's second device decrypted %q, want %q", got, text)
	}
}

// TestADeviceListedBeforeItsOneTimeKeysGetsTheKey: a device the homeserver
// lists but none of whose one-time keys can be claimed yet (here its keys
// are uploaded in two requests, the device keys first). mautrix shares a
// room key with the devices it can open an olm session to and only logs the
// others, so ori's share would leave that device without the key; it shares
// a new session again until every listed device has it (the share's miss is
// asserted to have happened, then the one-time keys come).
func TestADeviceListedBeforeItsOneTimeKeysGetsTheKey(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	hs := homeserverURL(t)
	ori, mia := person(ctx, t, hs, "ori"), person(ctx, t, hs, "mia")
	room := encryptedRoom(ctx, t, ori, mia)

	// mia's second device: no /sync of its own, keys uploaded by hand, the
	// device keys first.
	late := loginAgain(ctx, t, hs, mia)
	log := zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
	states, _ := mautrix.NewMemoryStateStore().(*mautrix.MemoryStateStore)
	mach := crypto.NewOlmMachine(late, &log, crypto.NewMemoryStore(nil), states)
	if err := mach.Load(ctx); err != nil {
		t.Fatal(err)
	}
	// A count above what mautrix keeps uploads the device keys alone.
	if err := mach.ShareKeys(ctx, 1000); err != nil {
		t.Fatalf("uploading the late device's keys: %v", err)
	}
	lateDevice := mia.UserID().String() + "/" + late.DeviceID.String()

	missed := make(chan []string, shareTries)
	ori.missedHook = func(m []string) { missed <- m }
	uploaded := make(chan error, 1)
	go func() {
		select {
		case m := <-missed:
			if !slices.Contains(m, lateDevice) {
				uploaded <- fmt.Errorf("the first share missed %v, want %s among them", m, lateDevice)
				return
			}
			uploaded <- mach.ShareKeys(ctx, 0)
		case <-ctx.Done():
			uploaded <- ctx.Err()
		}
	}()
	if _, err := ori.SendText(ctx, room, "the standby takes over at six"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-uploaded:
		if err != nil {
			t.Fatalf("the late device: %v", err)
		}
	default:
		t.Fatal("ori's share never missed the device without one-time keys: the test did not make the case it names")
	}
	left, err := ori.unshared(ctx, room, []id.UserID{mia.UserID()})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("ori's room session was not shared with %v", left)
	}
}

// actAs is a client of d's user without d's state store: the device's own
// client keeps room state its /sync loop reads, and mautrix updates that
// store from a join or a room creation in place, under the loop (the race
// detector caught a join's membership write beside the loop's read).
func actAs(t *testing.T, d *Device) *mautrix.Client {
	t.Helper()
	cli, err := mautrix.NewClient(d.cli.HomeserverURL.String(), d.cli.UserID, d.cli.AccessToken)
	if err != nil {
		t.Fatal(err)
	}
	return cli
}
