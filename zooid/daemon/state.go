package daemon

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// cursorKey is the key that signs history cursors, kept in the state dir so a
// cursor an agent holds stays good across a daemon restart.
func cursorKey(stateDir string) ([]byte, error) {
	path := filepath.Join(stateDir, "cursor.key")
	key, err := os.ReadFile(path)
	if err == nil && len(key) == 32 {
		return key, nil
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading cursor key: %w", err)
	}
	key = make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("making cursor key: %w", err)
	}
	if err := os.WriteFile(path, key, 0o600); err != nil {
		return nil, fmt.Errorf("saving cursor key: %w", err)
	}
	return key, nil
}
