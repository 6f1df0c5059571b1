package childproc

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Process is one process as /proc/PID/stat shows it (Linux).
type Process struct {
	PID, PPID int
	// State is stat's one-letter state: R, S, D, T, … and Z for a zombie
	// (ended, not yet waited for by its parent), X while it is removed.
	State string
}

// Ended reports whether the process has ended: a zombie or one being removed.
func (p Process) Ended() bool { return p.State == "Z" || p.State == "X" }

// Processes lists every process in /proc; one that ends while it is read is
// left out. Tests use it to find what a process under test left running.
func Processes() ([]Process, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	var out []Process
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, err := Lookup(pid); err == nil {
			out = append(out, p)
		} // else ended meanwhile
	}
	return out, nil
}

// Lookup reads one process from /proc/PID/stat; an error once it is gone
// (a zombie is still there, Ended).
func Lookup(pid int) (Process, error) {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return Process{}, fmt.Errorf("process %d: %w", pid, err)
	}
	// "pid (comm) state ppid …": comm may hold spaces and parentheses,
	// so the fields are counted after its last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return Process{}, fmt.Errorf("process %d: no command name in its stat", pid)
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 2 {
		return Process{}, fmt.Errorf("process %d: %d fields after the command name in its stat", pid, len(f))
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return Process{}, fmt.Errorf("process %d: parent %q: %w", pid, f[1], err)
	}
	return Process{PID: pid, PPID: ppid, State: f[0]}, nil
}

// Cmdline is the process's arguments joined by spaces: "" once it has ended
// (a zombie keeps none).
func Cmdline(pid int) string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	if err != nil {
		return ""
	}
	return strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " ")
}

// Owner is the process's real and effective user id (/proc/PID/status).
func Owner(pid int) (uid, euid uint32, err error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, 0, fmt.Errorf("process %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		v, ok := strings.CutPrefix(line, "Uid:")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) < 2 {
			break
		}
		r, err1 := strconv.ParseUint(f[0], 10, 32)
		e, err2 := strconv.ParseUint(f[1], 10, 32)
		if err1 != nil || err2 != nil {
			break
		}
		return uint32(r), uint32(e), nil
	}
	return 0, 0, fmt.Errorf("process %d: no Uid line in /proc/%d/status", pid, pid)
}

// Children lists the processes whose parent is pid, zombies included (a
// child not yet waited for has not been cleaned up). It finds them by their
// parent, not by process group: a test binary's children are in groups of
// their own (SysProcAttr).
func Children(pid int) ([]Process, error) {
	all, err := Processes()
	if err != nil {
		return nil, err
	}
	var out []Process
	for _, p := range all {
		if p.PPID == pid {
			out = append(out, p)
		}
	}
	return out, nil
}

// LiveChildren is the pids of Children(pid) that have not ended (zombies
// left out); none when /proc cannot be read.
func LiveChildren(pid int) []int {
	kids, _ := Children(pid)
	var out []int
	for _, k := range kids {
		if !k.Ended() {
			out = append(out, k.PID)
		}
	}
	return out
}
