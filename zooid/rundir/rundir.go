// Package rundir makes and checks the directory that holds the agents' unix
// sockets: a directory nobody but the daemon's user can steer. A socket there
// receives every tool call of its agent, so a directory another user can
// replace, plant a symlink at, or write into would let them serve forged
// results. Rules: never follow a symlink, never use a directory owned by
// another uid or writable by group or others, and never chmod a directory
// the daemon did not create.
package rundir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Check inspects an existing run dir without changing anything; a missing
// one is fine (Prepare creates it). The error names the path and the fix.
func Check(dir string) error {
	st, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("run dir %s: %w", dir, err)
	}
	return checkInfo(dir, st)
}

func checkInfo(dir string, st fs.FileInfo) error {
	const fix = "remove it, or set run_dir to a private directory of your own"
	switch {
	case st.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("run dir %s is a symlink, which the daemon does not follow: %s", dir, fix)
	case !st.IsDir():
		return fmt.Errorf("run dir %s is not a directory: %s", dir, fix)
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
		return fmt.Errorf("run dir %s is owned by uid %d, not by this user (uid %d): %s", dir, sys.Uid, os.Geteuid(), fix)
	}
	if perm := st.Mode().Perm(); perm&0o022 != 0 {
		mode := uint32(perm)
		if st.Mode()&fs.ModeSticky != 0 {
			mode |= 0o1000
		}
		return fmt.Errorf("run dir %s is writable by group or others (mode %04o): chmod 700 it if it is yours alone, or set run_dir to a private directory of your own", dir, mode)
	}
	return nil
}

// Prepare makes dir ready for sockets and returns it. An empty dir means no
// directory was configured and $XDG_RUNTIME_DIR was unset: Prepare then makes
// a fresh directory with an unpredictable name under the temp dir (mode
// 0700), which nobody could have planted, and made reports true so the caller
// removes it when done. A named dir that is missing is created 0700 (parents
// too); one that exists must pass Check and is used as it is.
func Prepare(dir string) (path string, made bool, err error) {
	return prepare(dir, 0o700)
}

// PrepareSearchable is Prepare for a daemon whose agents run as users of
// their own: a directory it creates is 0711, so each agent's user can reach
// its own socket directory inside (which is its alone, 0700) but can't list
// the others. An existing one is left as it is; config.Load has made sure the
// agents' users can search it.
func PrepareSearchable(dir string) (path string, made bool, err error) {
	return prepare(dir, 0o711)
}

func prepare(dir string, mode fs.FileMode) (path string, made bool, err error) {
	if dir == "" {
		// Socket paths must stay under 108 bytes: a long TMPDIR falls back to /tmp.
		base := os.TempDir()
		if len(base) > 40 {
			base = "/tmp"
		}
		d, err := os.MkdirTemp(base, "zooid-")
		if err != nil {
			return "", false, fmt.Errorf("creating a private run dir under %s: %w", base, err)
		}
		if err := os.Chmod(d, mode); err != nil {
			_ = os.Remove(d)
			return "", false, fmt.Errorf("creating a private run dir under %s: %w", base, err)
		}
		return d, true, nil
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return "", false, fmt.Errorf("creating the parent of run dir %s: %w", dir, err)
	}
	err = os.Mkdir(dir, 0o700)
	switch {
	case err == nil && mode != 0o700:
		// Ours, just made: the mode the caller asked for, whatever the umask.
		if err := os.Chmod(dir, mode); err != nil {
			return "", false, fmt.Errorf("creating run dir %s: %w", dir, err)
		}
	case err != nil && !errors.Is(err, fs.ErrExist):
		return "", false, fmt.Errorf("creating run dir %s: %w", dir, err)
	}
	// Checked after the mkdir, created or not: what counts is what is there now.
	if err := Check(dir); err != nil {
		return "", false, err
	}
	return dir, false, nil
}
