package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/zooid-dev/zooid/zooid/unixuser"
)

// user reads a user: value (a name, uid or uid:gid) and resolves it on this
// machine. Root and the daemon's own user are refused: either could read
// everything the daemon keeps from agents.
func (p *parser) user(f field, path string) (*unixuser.User, int) {
	if f.val == nil {
		return nil, 0
	}
	v, ok := p.str(f, path)
	if !ok {
		return nil, 0
	}
	line := f.val.Line
	if v == "" {
		p.errorf(f.key, path, "must not be empty (a user name, uid or uid:gid)")
		return nil, line
	}
	u, err := unixuser.Resolve(v)
	switch {
	case err != nil:
		p.errorf(f.val, path, "%v", err)
		return nil, line
	case u.UID == 0:
		p.errorf(f.val, path, "%s is root, which can read everything the daemon keeps from agents: give the agent a user of its own", u)
		return nil, line
	case int(u.UID) == os.Geteuid():
		p.errorf(f.val, path, "%s is the daemon's own user, which can read zooid.yaml and the state dir: give the agent a user of its own", u)
		return nil, line
	}
	return &u, line
}

// checkUsers refuses, for every agent with a user of its own, what would not
// work or not hold at run time: a daemon that may not switch users, and a
// config, token file or state dir that user could read. What the user can
// reach is asked of the kernel as that user (unixuser.As), so modes, ACLs
// and parent directories all count.
func (p *parser) checkUsers(cfg *Config) {
	if !cfg.AgentUsers() {
		return
	}
	type seen struct{ uid, gid uint32 }
	done := map[seen]bool{}
	privileged := true
	for _, a := range cfg.Agents {
		if a.User == nil {
			continue
		}
		u := *a.User
		line, path := p.userLines[a.Name], "agents."+a.Name+".user"
		fail := func(format string, args ...any) {
			p.errorAt(line, path, "%s: "+format, append([]any{u}, args...)...)
		}
		if privileged {
			if err := unixuser.Privileged(); err != nil {
				p.errorAt(line, path, "%v", err)
				privileged = false
			}
		}
		if !privileged {
			continue
		}
		can := func(probe func(unixuser.User, string) (bool, error), target string) bool {
			ok, err := probe(u, target)
			if err != nil {
				fail("%v", err)
				return false
			}
			return ok
		}
		// What the agent's user must reach: its working directory, its socket
		// under the run dir, and the zooid binary it runs as its bridge.
		if a.Dir != "" {
			if !can(unixuser.CanSearch, a.Dir) {
				fail("can't reach its working directory %s: make it (and its parents) searchable for that user, or set dir: to one it can use", a.Dir)
			}
		} else if parent := filepath.Dir(cfg.StateDir); !exists(parent) || !can(unixuser.CanSearch, parent) {
			fail("can't reach its working directory under the state dir %s: %s must exist and be searchable for that user (chmod o+x; the state dir itself stays unlistable), or set dir: for the agent", cfg.StateDir, parent)
		}
		if runDir := cfg.RunDir; runDir != "" {
			target := runDir
			if !exists(runDir) {
				target = filepath.Dir(runDir)
			}
			if !exists(target) || !can(unixuser.CanSearch, target) {
				fail("can't reach its socket in run dir %s: %s must exist and be searchable for that user (chmod 711 it), or set run_dir to one it can reach", runDir, target)
			}
		}
		if exe, err := os.Executable(); err == nil && !can(unixuser.CanExec, exe) {
			fail("can't run %s, the zooid binary its agent starts as its Zooid MCP bridge: install zooid where that user can execute it (e.g. /usr/local/bin, mode 755)", exe)
		}

		// What it must not read. Users already judged are not probed again.
		key := seen{u.UID, u.GID}
		if done[key] {
			continue
		}
		done[key] = true
		if abs, err := filepath.Abs(p.file); err == nil && can(unixuser.CanOpen, abs) {
			fail("can read the config %s, which holds the daemon's tokens or where they come from: chmod 600 it (and keep it from that user's groups)", abs)
		}
		for _, sf := range p.secretFiles {
			if can(unixuser.CanOpen, sf.path) {
				p.errorAt(sf.line, sf.key, "%s can read the token file %s (the agent of %s runs as that user): chmod 600 it", u, sf.path, a.Name)
			}
		}
		// The flight recorder holds every room's messages: outside the state
		// dir by choice, it must be as private.
		if cfg.Trace != nil && cfg.Trace.Dir != "" && exists(cfg.Trace.Dir) &&
			(can(unixuser.CanOpen, cfg.Trace.Dir) || can(unixuser.CanSearch, cfg.Trace.Dir)) {
			fail("can reach the trace dir %s, which holds every room's messages: chmod 700 it", cfg.Trace.Dir)
		}
		own := map[string]bool{}
		for _, b := range cfg.Agents {
			if b.User != nil && b.User.UID == u.UID {
				own[b.Name] = true
			}
		}
		p.checkStateDir(cfg.StateDir, u, own, fail, can)
	}
}

// checkStateDir: the state dir must be the daemon's and not listable by u,
// and nothing in it reachable by u but the working and pi directories of the
// agents that run as u (own). The daemon
// makes it 0711 when agents have users (so each can reach its own directory
// under agents/) and everything else in it 0700 or 0600; this catches what
// an earlier run or an operator left looser.
func (p *parser) checkStateDir(dir string, u unixuser.User, own map[string]bool, fail func(string, ...any), can func(func(unixuser.User, string) (bool, error), string) bool) {
	st, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return // the daemon creates it private
	}
	if err != nil {
		fail("state dir %s: %v", dir, err)
		return
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok && int(sys.Uid) != os.Geteuid() {
		fail("the state dir %s is owned by uid %d, not by the daemon's user (uid %d): chown it to the daemon's user", dir, sys.Uid, os.Geteuid())
		return
	}
	if can(unixuser.CanOpen, dir) {
		fail("can list the state dir %s: chmod 711 it (the daemon keeps it so when agents have users)", dir)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		fail("reading the state dir %s: %v", dir, err)
		return
	}
	reachable := func(path string, isDir bool) bool {
		return can(unixuser.CanOpen, path) || (isDir && can(unixuser.CanSearch, path))
	}
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		// agents/ holds the default working directories, pi/ the default pi
		// directories, tmp/ the sandboxed agents' temp dirs: one per agent,
		// each its own user's.
		if e.Name() != "agents" && e.Name() != "pi" && e.Name() != "tmp" {
			if reachable(path, e.IsDir()) {
				fail("can reach %s in the state dir: chmod go-rwx it", path)
			}
			continue
		}
		others, err := os.ReadDir(path)
		if err != nil {
			fail("reading %s: %v", path, err)
			continue
		}
		for _, o := range others {
			op := filepath.Join(path, o.Name())
			if !own[o.Name()] && reachable(op, o.IsDir()) {
				fail("can reach %s, another agent's directory: chmod go-rwx it", op)
			}
		}
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
