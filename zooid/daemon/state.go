package daemon

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/zooid-dev/zooid/zooid/config"
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

// refuseSecretsInArgv refuses a config that would put a token on an agent's
// command line or in its working directory path, where the agent can read it.
func refuseSecretsInArgv(cfg *config.Config) error {
	secrets := configSecrets(cfg)
	for _, a := range cfg.Agents {
		command, args := a.ACP.Resolve()
		for _, part := range append([]string{command, a.Dir}, args...) {
			if carriesSecret("="+part, secrets) {
				return fmt.Errorf("daemon: agent %s: a transport token appears in its command, args or dir; agents must never see tokens", a.Name)
			}
		}
	}
	return nil
}
