// Package sandbox holds a local agent to what it may reach, with Landlock:
// the daemon plans each agent process's Policy (Plan: the system's files to
// read, the agent's own directories to write, the daemon's config, state and
// other agents' directories carved out of every grant), and the agent is
// started through `zooid sandbox -- COMMAND ARGS…` (Main), which applies the
// policy to itself and execs the command. Go cannot run code between fork
// and exec, so the restriction is applied by the daemon's own binary in the
// child, before the agent's program replaces it; Landlock is inherited
// across exec and by every process the agent starts (its tools, its MCP
// bridge), and none of them can lift it.
//
// Landlock is an allow-list: what no rule grants is refused. Beyond files
// it restricts ptrace (a sandboxed process can trace only processes in its
// own domain or one nested in it, so not the daemon and not another agent),
// and from ABI 6 signals and abstract unix sockets aimed outside the domain;
// from ABI 4, TCP connect and bind when an agent's sandbox names ports; from
// ABI 9, connecting to pathname unix sockets not granted (another agent's
// socket). On an older kernel what it has is applied and Enforcement says
// what is missing (best effort, said plainly).
package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Modes of an agent's sandbox (zooid.yaml sandbox:).
const (
	// Landlock holds the agent to its Policy (the default for local agents).
	Landlock = "landlock"
	// None runs the agent with everything its uid can reach.
	None = "none"
)

// Env carries the Policy, as JSON, from the daemon to `zooid sandbox`; the
// wrapper removes it before it execs the agent.
const Env = "ZOOID_SANDBOX"

// Ports are TCP ports an agent may connect to or bind. Nil means the
// direction is not restricted; an empty, non-nil list allows no port.
type Ports []uint16

// Policy is what one agent process may reach, as absolute paths after
// symlinks (Landlock judges the file a path resolves to). A path may be a
// directory (the rights hold for everything beneath it) or a single file.
type Policy struct {
	// Read may be read and executed.
	Read []string `json:"read,omitempty"`
	// Write may be read, written, created in, removed from, renamed
	// between and executed; a pathname unix socket beneath may be
	// connected to (ABI 9).
	Write []string `json:"write,omitempty"`
	// Devices are device files (and directories of them, /dev/pts) that
	// may be read, written and given ioctls.
	Devices []string `json:"devices,omitempty"`
	// List may be listed only (/dev: a listing, not its disks).
	List []string `json:"list,omitempty"`
	// Sockets are directories whose pathname unix sockets may be
	// connected to (the agent's own socket directory).
	Sockets []string `json:"sockets,omitempty"`
	// Connect and Bind restrict TCP (ABI 4); nil leaves a direction open.
	Connect Ports `json:"connect"`
	Bind    Ports `json:"bind"`
}

// DefaultSystem are the system's roots every sandboxed agent may read and
// execute, so the tools it starts work: programs, libraries, the system's
// configuration, and the kernel's views of itself (/proc: a process's own
// entries; another's environ, memory and descriptors need ptrace, which
// Landlock refuses across domains). A root that is missing is left out.
var DefaultSystem = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix/store", "/snap", "/proc", "/sys"}

// DefaultDevices are the device files a program expects to open: the data
// sinks and sources, the terminal, pseudo-terminals and shared memory.
// Not /dev as a whole: a disk's device file would hold every file on it.
var DefaultDevices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/pts", "/dev/shm"}

// Request is what the daemon knows of one agent process, from which Plan
// derives its Policy.
type Request struct {
	// System are the roots to read (DefaultSystem when nil); the targets of
	// symlinks directly in /etc (resolv.conf pointing into /run, say) are
	// read too when a root is /etc.
	System []string
	// Devices are read, written and given ioctls (DefaultDevices when nil).
	Devices []string
	// Write are the agent's own: its working directory, temp dir, HOME,
	// pi directory, and its sandbox.write. They are kept when they lie
	// inside a protected path (the default working directory is in the
	// state dir), and split around any protected path inside them.
	Write []string
	// Read are read and executed: its sandbox.read and the programs it
	// runs by path (the bridge).
	Read []string
	// Bins are directories it runs programs from: each directory of its
	// PATH and its command's. Each is read; one named bin, .bin or sbin
	// brings its parent too, where its programs keep what they load
	// (<prefix>/lib beside <prefix>/bin, node_modules/<package> beside
	// node_modules/.bin).
	Bins []string
	// Command is the agent's program as started: its directory is a Bin,
	// and the directory of the file it resolves to is read.
	Command string
	// Socket is the agent's own socket directory.
	Socket string
	// Protect are paths no grant may reach: zooid.yaml, its token files,
	// the state dir, the run dir, the trace dir and the other agents'
	// directories. A grant that holds one is split around it (its other
	// entries granted instead, level by level); a grant that is one, or
	// lies in one and is not the agent's own, is dropped.
	Protect []string
	// Connect and Bind are the agent's TCP rules (nil: unrestricted).
	Connect, Bind Ports
}

// Plan derives the Policy of one agent process. Notes say what was carved
// or left out and why, for the daemon's log. Directories are read as the
// caller (the daemon); paths that do not exist are left out.
func Plan(r Request) (Policy, []string) {
	pl := planner{protect: resolveAll(r.Protect)}
	system := r.System
	if system == nil {
		system = DefaultSystem
	}
	devices := r.Devices
	if devices == nil {
		devices = DefaultDevices
	}
	read := slices.Clone(system)
	for _, s := range system {
		if filepath.Clean(s) == "/etc" {
			for _, t := range symlinkTargets(s) {
				if !slices.ContainsFunc(system, func(root string) bool { return t == root || within(t, root) }) {
					read = append(read, t)
				}
			}
		}
	}
	read = append(read, r.Read...)
	for _, b := range r.Bins {
		read = append(read, binDirs(b)...)
	}
	if r.Command != "" && filepath.IsAbs(r.Command) {
		// A program directly in a temp dir everyone shares gets its own
		// file, not the whole temp dir.
		read = append(read, r.Command)
		read = append(read, binDirs(filepath.Dir(r.Command))...)
		if t, err := filepath.EvalSymlinks(r.Command); err == nil && !sharedTemp(filepath.Dir(t)) {
			read = append(read, filepath.Dir(t))
		}
	}
	var p Policy
	p.Write = pl.grants(r.Write, true, true)
	p.Read = pl.grants(read, false, true)
	// Devices and /dev's listing are granted whole or not at all: what a
	// device directory holds besides the daemon's files (other programs'
	// shared memory) is not the agent's.
	p.Devices = pl.grants(devices, false, false)
	p.List = pl.grants([]string{"/dev"}, false, false)
	if r.Socket != "" {
		p.Sockets = pl.grants([]string{r.Socket}, true, false)
	}
	p.Connect, p.Bind = r.Connect, r.Bind
	return p, pl.notes
}

// sharedTemp says dir is a temp dir every process of the machine shares.
func sharedTemp(dir string) bool {
	dir = filepath.Clean(dir)
	return dir == "/tmp" || dir == "/var/tmp" || dir == "/dev/shm" || dir == filepath.Clean(os.TempDir())
}

// binDirs is dir, and its parent when dir is a bin directory; neither when
// it is / or a temp dir everyone shares (a PATH may name them: everything,
// or every process's temp files, would come with them).
func binDirs(dir string) []string {
	if !filepath.IsAbs(dir) {
		return nil // a relative PATH entry names nothing fixed
	}
	dir = filepath.Clean(dir)
	if dir == "/" || sharedTemp(dir) {
		return nil
	}
	switch parent := filepath.Dir(dir); filepath.Base(dir) {
	case "bin", ".bin", "sbin":
		if parent != "/" && !sharedTemp(parent) {
			return []string{dir, parent}
		}
	}
	return []string{dir}
}

// symlinkTargets are the targets of the symlinks directly in dir
// (/etc/resolv.conf into /run): Landlock judges the file a path resolves
// to, so reading them needs their targets.
func symlinkTargets(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.Type()&fs.ModeSymlink == 0 {
			continue
		}
		// /etc/mtab names /proc/self/mounts: /proc is read anyway, and
		// "self" would resolve to the daemon.
		if t, err := filepath.EvalSymlinks(filepath.Join(dir, e.Name())); err == nil && !within(t, "/proc") {
			out = append(out, t)
		}
	}
	return out
}

// planner carves grants around protected paths.
type planner struct {
	protect []string
	notes   []string
}

// grants resolves paths and carves each around the protected paths; own
// says they are the agent's own, kept even inside a protected path; split
// says a path holding a protected one is granted entry by entry around it
// (else it is left out).
func (pl *planner) grants(paths []string, own, split bool) []string {
	var out []string
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			continue
		}
		r, err := filepath.EvalSymlinks(p)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				pl.notef("%s left out: %v", p, err)
			}
			continue
		}
		if !split && pl.holds(r) {
			pl.notef("%s holds the daemon's files: left out", r)
			continue
		}
		out = append(out, pl.carve(r, own)...)
	}
	slices.Sort(out)
	// One rule for a directory covers what lies in it: fewer rules to add
	// at every start.
	var kept []string
	for _, p := range slices.Compact(out) {
		if n := len(kept); n == 0 || !within(p, kept[n-1]) {
			kept = append(kept, p)
		}
	}
	return kept
}

// carve is path, or what of it may be granted: nothing when it is a
// protected path or (not being the agent's own) lies in one; its entries,
// carved in turn, when a protected path lies inside it.
func (pl *planner) carve(path string, own bool) []string {
	for _, p := range pl.protect {
		if path == p {
			return nil
		}
		if !own && within(path, p) {
			return nil
		}
	}
	if !pl.holds(path) {
		return []string{path}
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		pl.notef("%s holds the daemon's files and could not be listed to grant the rest of it: %v", path, err)
		return nil
	}
	pl.notef("%s holds the daemon's files: only its other entries are granted, so nothing new can be made directly in it", path)
	var out []string
	for _, e := range entries {
		child := filepath.Join(path, e.Name())
		if e.Type()&fs.ModeSymlink != 0 {
			// The target is what Landlock would grant: one that is, holds
			// or lies in a protected path is left out.
			t, err := filepath.EvalSymlinks(child)
			if err != nil || pl.touches(t) {
				continue
			}
			out = append(out, t)
			continue
		}
		out = append(out, pl.carve(child, own)...)
	}
	return out
}

// holds says a protected path lies inside path.
func (pl *planner) holds(path string) bool {
	for _, p := range pl.protect {
		if within(p, path) {
			return true
		}
	}
	return false
}

// touches says path is, holds or lies in a protected path.
func (pl *planner) touches(path string) bool {
	for _, p := range pl.protect {
		if path == p || within(path, p) || within(p, path) {
			return true
		}
	}
	return false
}

// notef adds a note once: a directory several grants reach (the working
// directory, HOME and TMPDIR under one parent) is noted once, not per grant.
func (pl *planner) notef(format string, args ...any) {
	n := fmt.Sprintf(format, args...)
	if !slices.Contains(pl.notes, n) {
		pl.notes = append(pl.notes, n)
	}
}

// within says path lies strictly inside dir.
func within(path, dir string) bool {
	if dir == "/" {
		return path != "/"
	}
	return strings.HasPrefix(path, dir+"/")
}

// resolveAll makes paths absolute and clean, after symlinks where they
// exist (a protected path that does not exist yet is kept as written, so a
// grant made later still avoids it).
func resolveAll(paths []string) []string {
	var out []string
	for _, p := range paths {
		if p == "" {
			continue
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		out = append(out, abs)
		if r, err := filepath.EvalSymlinks(abs); err == nil && r != abs {
			out = append(out, r)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
