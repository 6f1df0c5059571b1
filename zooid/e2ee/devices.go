//go:build goolm

package e2ee

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	// The pure-Go sqlite behind mautrix's SQL crypto store: no cgo, as goolm.
	_ "modernc.org/sqlite"

	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/roomstate"
)

// Agent is one agent user that gets a device of its own.
type Agent struct {
	// Name is the agent's name in zooid.yaml, shown in its device's name.
	Name   string
	UserID id.UserID
}

// Rooms is what the devices need to know of the bound rooms: whether one is
// encrypted and who is in it, as the daemon's room state holds them.
type Rooms interface {
	Room(ctx context.Context, room id.RoomID) (roomstate.Room, error)
}

// Options configures Open.
type Options struct {
	// Dir holds the devices' keys: <state_dir>/e2ee, made 0700, its files 0600.
	Dir    string
	Agents []Agent
	// Client gives a client acting as an agent's user through the
	// appservice token; Open copies it and adds the agent's device.
	Client func(id.UserID) *mautrix.Client
	Rooms  Rooms
	// BoundRooms lists the rooms the daemon is bound to (for mautrix's
	// question which encrypted rooms a user shares with the agents).
	BoundRooms func() []id.RoomID
	Logger     *slog.Logger
	// LateKeyWait bounds how long Decrypt waits for a room key that has not
	// arrived; zero means DefaultLateKeyWait.
	LateKeyWait time.Duration
}

// DefaultLateKeyWait is how long an encrypted event waits for its room key
// when Options.LateKeyWait is zero: zooid.yaml's default room_key_wait.
const DefaultLateKeyWait = config.DefaultRoomKeyWait

// Devices are the agents' end-to-end encryption devices: one mautrix
// OlmMachine per agent user, their accounts and sessions in one sqlite file.
type Devices struct {
	opts    Options
	log     *slog.Logger
	db      *dbutil.Database
	byUser  map[id.UserID]*device
	order   []*device
	closeMu sync.Mutex
	closed  bool
	late    lateKeys
	// bg runs the inbox reads made in the background (the start's, and one
	// after each inboxReadAfter messages pushed to a device) under bgCtx;
	// Close ends them (bgStop) and waits before closing the store.
	bg     sync.WaitGroup
	bgCtx  context.Context
	bgStop context.CancelFunc
}

// device is one agent's device.
type device struct {
	agent Agent
	mach  *crypto.OlmMachine
	// inboxMu serialises reads of the device's to-device inbox (readInbox);
	// since is where the last one ended ("" before the first).
	inboxMu sync.Mutex
	since   string
	// handMu makes handOver's look and hand-over one step: a push and an
	// inbox read may bring the same message at once.
	handMu sync.Mutex
	// pushed counts the to-device messages pushed to the device since its
	// inbox was last read; reading is set while a read that count started
	// runs (notePushed).
	pushed  atomic.Int64
	reading atomic.Bool
}

// background runs f on a goroutine of its own, under the devices' background
// context, unless they are closed; Close waits for it.
func (d *Devices) background(f func(context.Context)) {
	d.closeMu.Lock()
	defer d.closeMu.Unlock()
	if d.closed {
		return
	}
	d.bg.Add(1)
	go func() {
		defer d.bg.Done()
		f(d.bgCtx)
	}()
}

// dbFile and keyFile are the names of the devices' files under Options.Dir.
const (
	dbFile  = "crypto.db"
	keyFile = "pickle.key"
)

// Open gives each agent its device: the device id kept under Dir from an
// earlier start, or a new one created on the homeserver as the appservice
// (MSC4190, no login); its olm account loaded or made, and its identity and
// one-time keys uploaded when the homeserver does not have them.
func Open(ctx context.Context, opts Options) (*Devices, error) {
	if opts.Dir == "" || opts.Client == nil || opts.Rooms == nil || opts.BoundRooms == nil {
		return nil, errors.New("e2ee: Dir, Client, Rooms and BoundRooms are required")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "e2ee")
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("e2ee: making the key directory %s: %w", opts.Dir, err)
	}
	// MkdirAll leaves an existing directory's mode alone.
	if err := os.Chmod(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("e2ee: making %s private: %w", opts.Dir, err)
	}
	pickleKey, err := loadPickleKey(filepath.Join(opts.Dir, keyFile))
	if err != nil {
		return nil, err
	}
	db, err := openDB(ctx, filepath.Join(opts.Dir, dbFile))
	if err != nil {
		return nil, err
	}
	d := &Devices{opts: opts, log: log, db: db, byUser: map[id.UserID]*device{}}
	zl := Zerolog(log)
	for _, a := range opts.Agents {
		dev, err := d.openDevice(ctx, a, pickleKey, zl)
		if err != nil {
			_ = db.Close()
			return nil, err
		}
		d.byUser[a.UserID] = dev
		d.order = append(d.order, dev)
	}
	d.bgCtx, d.bgStop = context.WithCancel(context.WithoutCancel(ctx))
	d.background(d.drainInboxes)
	return d, nil
}

// loadPickleKey reads the key mautrix encrypts the olm account and sessions
// with in the database, making it on first use: a copy of the database alone
// opens no session.
func loadPickleKey(path string) ([]byte, error) {
	key, err := os.ReadFile(path)
	switch {
	case err == nil && len(key) == 32:
		return key, nil
	case err == nil:
		return nil, fmt.Errorf("e2ee: %s holds %d bytes, not the 32 of a pickle key; restore it from a backup or remove the whole %s to give the agents new devices", path, len(key), filepath.Dir(path))
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("e2ee: reading the pickle key: %w", err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), dbFile)); err == nil {
		return nil, fmt.Errorf("e2ee: %s is missing but %s exists: its keys cannot be opened without it; restore it, or remove %s to give the agents new devices", path, dbFile, filepath.Dir(path))
	}
	key = make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("e2ee: making a pickle key: %w", err)
	}
	if err := os.WriteFile(path, key, 0o600); err != nil {
		return nil, fmt.Errorf("e2ee: writing the pickle key: %w", err)
	}
	return key, nil
}

// openDB opens the sqlite file mautrix's SQL crypto store lives in, made
// 0600 before sqlite writes to it.
func openDB(ctx context.Context, path string) (*dbutil.Database, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("e2ee: creating %s: %w", path, err)
	}
	_ = f.Close()
	if err := os.Chmod(path, 0o600); err != nil {
		return nil, fmt.Errorf("e2ee: making %s private: %w", path, err)
	}
	// A rollback journal, not WAL: the file is the whole store between
	// writes (no -wal or -shm left beside it for a backup to miss), and
	// zooid record --decrypt shares it with a running daemon through
	// sqlite's locks, waiting out the other's writes (busy_timeout).
	raw, err := sql.Open("sqlite", "file:"+path+"?_pragma=foreign_keys(1)&_pragma=journal_mode(DELETE)&_pragma=synchronous(FULL)&_pragma=busy_timeout(10000)")
	if err != nil {
		return nil, fmt.Errorf("e2ee: opening %s: %w", path, err)
	}
	db, err := dbutil.NewWithDB(raw, "sqlite3")
	if err != nil {
		_ = raw.Close()
		return nil, fmt.Errorf("e2ee: opening %s: %w", path, err)
	}
	if _, err := db.Exec(ctx, `CREATE TABLE IF NOT EXISTS zooid_device (user_id TEXT PRIMARY KEY, device_id TEXT NOT NULL)`); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("e2ee: preparing %s: %w", path, err)
	}
	return db, nil
}

// deviceName is the display name other members' clients show for an
// agent's device.
func deviceName(a Agent) string { return "Zooid agent " + a.Name }

func (d *Devices) openDevice(ctx context.Context, a Agent, pickleKey []byte, zl zerolog.Logger) (*device, error) {
	base := d.opts.Client(a.UserID)
	if base == nil {
		return nil, fmt.Errorf("e2ee: no client for %s", a.UserID)
	}
	cli, err := mautrix.NewClient(base.HomeserverURL.String(), a.UserID, base.AccessToken)
	if err != nil {
		return nil, fmt.Errorf("e2ee: client for %s: %w", a.UserID, err)
	}
	cli.Client = base.Client
	cli.SetAppServiceUserID = true
	cli.Log = zl

	devID, err := deviceIDOf(ctx, d.db, a.UserID)
	if err != nil {
		return nil, err
	}
	fresh := devID == ""
	if fresh {
		devID = newDeviceID()
	}
	// PUT /devices/{id} as the appservice creates the device, or keeps the
	// one an earlier start created (200), without a login (MSC4190).
	if err := cli.CreateDeviceMSC4190(ctx, devID, deviceName(a)); err != nil {
		return nil, fmt.Errorf("e2ee: creating %s's device %s (the homeserver must allow appservices to manage devices, MSC4190: Synapse's registration io.element.msc4190: true): %w", a.UserID, devID, err)
	}
	if fresh {
		if _, err := d.db.Exec(ctx, `INSERT INTO zooid_device (user_id, device_id) VALUES ($1, $2)`, a.UserID, devID); err != nil {
			return nil, fmt.Errorf("e2ee: recording %s's device id: %w", a.UserID, err)
		}
	}
	cli.DeviceID = devID
	mach, err := loadMachine(ctx, d.db, cli, pickleKey, zl, stateStore{d})
	if err != nil {
		return nil, err
	}
	if mach.GetAccount().Shared {
		// The homeserver may have lost the device's keys (a device deleted
		// by an admin and made again above): upload them again then.
		has, err := d.serverHasKeys(ctx, cli, devID)
		if err != nil {
			return nil, err
		}
		if !has {
			d.log.Warn("the homeserver has no keys for an agent's device; uploading them again", "agent", a.Name, "device", devID)
			mach.GetAccount().Shared = false
		}
	}
	if err := mach.ShareKeys(ctx, -1); err != nil {
		return nil, fmt.Errorf("e2ee: uploading the keys of %s's device %s: %w", a.UserID, devID, err)
	}
	d.log.Info("agent device ready", "agent", a.Name, "user", a.UserID, "device", devID, "identity_key", mach.OwnIdentity().IdentityKey, "new", fresh)
	mach.SessionReceived = d.keyReceived
	return &device{agent: a, mach: mach}, nil
}

// serverHasKeys says whether the homeserver holds device keys for devID.
func (d *Devices) serverHasKeys(ctx context.Context, cli *mautrix.Client, devID id.DeviceID) (bool, error) {
	resp, err := cli.QueryKeys(ctx, &mautrix.ReqQueryKeys{DeviceKeys: mautrix.DeviceKeysRequest{cli.UserID: {devID}}})
	if err != nil {
		return false, fmt.Errorf("e2ee: asking the homeserver for the keys of %s's device %s: %w", cli.UserID, devID, err)
	}
	_, ok := resp.DeviceKeys[cli.UserID][devID]
	return ok, nil
}

// deviceIDOf is the device id kept for user, "" when none was made yet.
func deviceIDOf(ctx context.Context, db *dbutil.Database, user id.UserID) (id.DeviceID, error) {
	var devID id.DeviceID
	err := db.QueryRow(ctx, `SELECT device_id FROM zooid_device WHERE user_id = $1`, user).Scan(&devID)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("e2ee: reading %s's device id: %w", user, err)
	}
	return devID, nil
}

// loadMachine is the olm machine of cli's user and device over the crypto
// store in db: its account as stored (or a new one, not yet saved).
func loadMachine(ctx context.Context, db *dbutil.Database, cli *mautrix.Client, pickleKey []byte, zl zerolog.Logger, rooms crypto.StateStore) (*crypto.OlmMachine, error) {
	store := crypto.NewSQLCryptoStore(db, dbutil.ZeroLogger(zl), string(cli.UserID), cli.DeviceID, pickleKey)
	if err := store.DB.Upgrade(ctx); err != nil {
		return nil, fmt.Errorf("e2ee: preparing the crypto store: %w", err)
	}
	mach := crypto.NewOlmMachine(cli, &zl, store, rooms)
	if err := mach.Load(ctx); err != nil {
		return nil, fmt.Errorf("e2ee: loading %s's olm account: %w", cli.UserID, err)
	}
	return mach, nil
}

// decryptWith decrypts ev, an m.room.encrypted event, with mach's room keys
// as they are now. It works on a copy: mautrix decrypts in place.
func decryptWith(ctx context.Context, mach *crypto.OlmMachine, ev *event.Event) (*event.Event, error) {
	if ev.Type.Type != event.EventEncrypted.Type {
		return nil, fmt.Errorf("e2ee: %s is %s, not %s", ev.ID, ev.Type.Type, event.EventEncrypted.Type)
	}
	cp := *ev
	cp.Type.Class = event.MessageEventType
	if _, ok := cp.Content.Parsed.(*event.EncryptedEventContent); !ok {
		if err := cp.Content.ParseRaw(event.EventEncrypted); err != nil {
			return nil, fmt.Errorf("e2ee: reading the encrypted content of %s: %w", ev.ID, err)
		}
	}
	return mach.DecryptMegolmEvent(ctx, &cp)
}

// newDeviceID is a device id of the kind Synapse makes: ten capital letters,
// prefixed so an operator knows the daemon made it.
func newDeviceID() id.DeviceID {
	const letters = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = letters[int(b[i])%len(letters)]
	}
	return id.DeviceID("ZOOID" + string(b))
}

// DeviceID is the device of user, "" for a user with none.
func (d *Devices) DeviceID(user id.UserID) id.DeviceID {
	if dev := d.byUser[user]; dev != nil {
		return dev.mach.Client.DeviceID
	}
	return ""
}

// IdentityKey is the curve25519 key of user's device, "" for a user with none.
func (d *Devices) IdentityKey(user id.UserID) id.IdentityKey {
	if dev := d.byUser[user]; dev != nil {
		return dev.mach.OwnIdentity().IdentityKey
	}
	return ""
}

// Close ends the inbox reads running in the background and closes the key
// store; the machines hold nothing else.
func (d *Devices) Close() error {
	d.closeMu.Lock()
	defer d.closeMu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	d.bgStop()
	d.bg.Wait()
	return d.db.Close()
}

// Zerolog is a zerolog logger for mautrix that writes into log, at info and
// above (mautrix's debug lines are one per key and message): the daemon's
// devices log through it, and so do the harness's humans' devices.
func Zerolog(log *slog.Logger) zerolog.Logger {
	return zerolog.New(slogWriter{log: log}).Level(zerolog.InfoLevel)
}

// slogWriter passes mautrix's zerolog lines to the daemon's slog, at the
// level each line names. mautrix logs ids and public keys, never a private
// key or a decrypted body (TestNoKeyInTheLog).
type slogWriter struct{ log *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	var line map[string]any
	if err := json.Unmarshal(p, &line); err != nil {
		w.log.Debug(strings.TrimSpace(string(p)))
		return len(p), nil
	}
	msg, _ := line["message"].(string)
	level := slog.LevelDebug
	switch line["level"] {
	case "warn":
		level = slog.LevelWarn
	case "error", "fatal", "panic":
		level = slog.LevelError
	case "info":
		level = slog.LevelInfo
	}
	delete(line, "message")
	delete(line, "level")
	attrs := make([]any, 0, 2*len(line))
	for k, v := range line {
		attrs = append(attrs, k, v)
	}
	w.log.Log(context.Background(), level, "mautrix crypto: "+msg, attrs...)
	return len(p), nil
}

// stateStore answers mautrix's questions about rooms from the daemon's room
// state.
type stateStore struct{ d *Devices }

func (s stateStore) IsEncrypted(ctx context.Context, room id.RoomID) (bool, error) {
	rs, err := s.d.opts.Rooms.Room(ctx, room)
	if errors.Is(err, roomstate.ErrUnknownRoom) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return rs.Encryption != "", nil
}

func (s stateStore) GetEncryptionEvent(ctx context.Context, room id.RoomID) (*event.EncryptionEventContent, error) {
	rs, err := s.d.opts.Rooms.Room(ctx, room)
	if err != nil || rs.Encryption == "" {
		return nil, err
	}
	return &event.EncryptionEventContent{Algorithm: rs.Encryption}, nil
}

// GetHistoryVisibility answers "shared", the default: the room state cache
// does not keep the room's history visibility, and mautrix uses it only to
// say which members a new session is meant for, which Encrypt names itself.
func (s stateStore) GetHistoryVisibility(context.Context, id.RoomID) (*event.HistoryVisibilityEventContent, error) {
	return &event.HistoryVisibilityEventContent{HistoryVisibility: event.HistoryVisibilityShared}, nil
}

func (s stateStore) FindSharedRooms(ctx context.Context, user id.UserID) ([]id.RoomID, error) {
	var out []id.RoomID
	for _, room := range s.d.opts.BoundRooms() {
		rs, err := s.d.opts.Rooms.Room(ctx, room)
		if err != nil {
			continue
		}
		if rs.Encryption != "" && rs.Joined(user) {
			out = append(out, room)
		}
	}
	return out, nil
}
