//go:build goolm

package e2ee

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/rs/zerolog"
	"go.mau.fi/util/dbutil"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/crypto"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// Reader decrypts with the keys one agent's device already holds, for a
// tool beside the daemon (zooid record --decrypt): it makes no device,
// uploads no key and shares none, and opens nothing a daemon has not made.
type Reader struct {
	db   *dbutil.Database
	mach *crypto.OlmMachine
}

// OpenReader opens the device of user kept in dir (a daemon's
// <state_dir>/e2ee) for decryption; cli acts as user (a daemon may be
// running on the same files: sqlite lets the two share them).
func OpenReader(ctx context.Context, dir string, user id.UserID, cli *mautrix.Client, log *slog.Logger) (*Reader, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	path := filepath.Join(dir, dbFile)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("e2ee: no devices in %s (a daemon with encryption: true makes them at its first start): %w", dir, err)
	}
	pickleKey, err := loadPickleKey(filepath.Join(dir, keyFile))
	if err != nil {
		return nil, err
	}
	db, err := openDB(ctx, path)
	if err != nil {
		return nil, err
	}
	devID, err := deviceIDOf(ctx, db, user)
	if err == nil && devID == "" {
		err = fmt.Errorf("e2ee: %s has no device in %s: is it one of that daemon's agents?", user, dir)
	}
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	zl := zerolog.New(slogWriter{log: log.With("component", "e2ee")}).Level(zerolog.WarnLevel)
	cli.DeviceID = devID
	cli.Log = zl
	mach, err := loadMachine(ctx, db, cli, pickleKey, zl, noRooms{})
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return &Reader{db: db, mach: mach}, nil
}

// Decrypt decrypts ev, an m.room.encrypted event, with the room keys the
// device holds now.
func (r *Reader) Decrypt(ctx context.Context, ev *event.Event) (*event.Event, error) {
	dec, err := decryptWith(ctx, r.mach, ev)
	if err != nil {
		return nil, fmt.Errorf("e2ee: decrypting %s: %w: %w", ev.ID, err, ErrUndecryptable)
	}
	return dec, nil
}

// Close closes the key store.
func (r *Reader) Close() error { return r.db.Close() }

// noRooms answers mautrix's room questions for a Reader, which only
// decrypts: nothing is shared or encrypted through it.
type noRooms struct{}

func (noRooms) IsEncrypted(context.Context, id.RoomID) (bool, error) { return false, nil }
func (noRooms) GetEncryptionEvent(context.Context, id.RoomID) (*event.EncryptionEventContent, error) {
	return nil, nil
}
func (noRooms) GetHistoryVisibility(context.Context, id.RoomID) (*event.HistoryVisibilityEventContent, error) {
	return nil, nil
}
func (noRooms) FindSharedRooms(context.Context, id.UserID) ([]id.RoomID, error) { return nil, nil }
