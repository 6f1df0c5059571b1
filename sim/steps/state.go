package steps

import (
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
)

// persisted is every file docs/ARCHITECTURE.md ("Durability") says the daemon
// keeps under state_dir; agents/<name>/ (default working directories),
// pi/<name>/ (pi agents' default pi directories) and tmp/<name>/ (sandboxed
// agents' temp dirs) are the agents' own.
var persisted = map[string]bool{
	"cursor.key":       true,
	"matrix/matrix.db": true,
	"tasks/tasks.db":   true,
	"turns/turns.db":   true,
	"e2ee/crypto.db":   true,
	"e2ee/pickle.key":  true,
}

// checkStateDir fails when the daemon left a file under state_dir that the
// architecture document does not name: that sentence is a claim, this its test.
func checkStateDir(dir string) error {
	var extra []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "agents" || rel == "pi" || rel == "tmp" {
				return filepath.SkipDir
			}
			return nil
		}
		if !persisted[rel] {
			extra = append(extra, rel)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("listing the state dir: %w", err)
	}
	if len(extra) > 0 {
		return fmt.Errorf("the daemon kept %s under state_dir, which docs/ARCHITECTURE.md (Durability) does not name", strings.Join(extra, ", "))
	}
	return nil
}
