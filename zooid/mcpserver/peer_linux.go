package mcpserver

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// ProcessOf reads what identifies a running process: its start time and uid.
func ProcessOf(pid int) (Process, error) {
	st, err := readStat(pid)
	if err != nil {
		return Process{}, fmt.Errorf("reading agent process %d: %w", pid, err)
	}
	return Process{Pid: pid, start: st.start, uid: st.uid}, nil
}

type procStat struct {
	ppid  int
	start uint64
	uid   uint32
}

// readStat parses /proc/<pid>/stat for the parent pid (field 4) and the start
// time (field 22), and /proc/<pid>/status for the real uid.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, err
	}
	// The command name (field 2) is in parentheses and may hold spaces and
	// parentheses itself: the fields after it start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: parent pid: %w", pid, err)
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: start time: %w", pid, err)
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procStat{}, err
	}
	uid := -1
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			if fs := strings.Fields(rest); len(fs) > 0 {
				if n, err := strconv.Atoi(fs[0]); err == nil {
					uid = n
				}
			}
			break
		}
	}
	if uid < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/status: no uid", pid)
	}
	return procStat{ppid: ppid, start: start, uid: uint32(uid)}, nil
}

// peerOf asks the kernel which process connected (SO_PEERCRED: the pid and uid
// of the process that called connect).
func peerOf(nc net.Conn) (pid int, uid uint32, err error) {
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		return 0, 0, fmt.Errorf("peer credentials: %T is not a unix socket", nc)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return 0, 0, fmt.Errorf("peer credentials: %w", err)
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return 0, 0, fmt.Errorf("peer credentials: %w", err)
	}
	if credErr != nil {
		return 0, 0, fmt.Errorf("peer credentials: %w", credErr)
	}
	return int(cred.Pid), cred.Uid, nil
}

// descends says whether pid is agent itself or one of its descendants, and has
// agent's uid. It walks the parent chain through /proc: a live process's parent
// is live (orphans are re-parented to init or a subreaper), so the chain leads
// to the agent only if the process really is its descendant; the agent's start
// time must match, so a pid reused after the agent ended is not taken for it.
// Not closed: SO_PEERCRED names the pid at connect time, so a peer that exits
// and whose pid is taken by a new descendant of the agent before this walk is
// taken for that descendant (a pidfd would close it); and nothing here stops a
// same-uid process that ptraces the agent from acting through it.
func descends(pid int, uid uint32, agent Process) bool {
	if uid != agent.uid {
		return false
	}
	for range 4096 { // far deeper than any real process tree; a bound, not a limit
		if pid <= 0 {
			return false
		}
		st, err := readStat(pid)
		if err != nil {
			return false
		}
		if pid == agent.Pid {
			return st.start == agent.start
		}
		if pid == 1 {
			return false
		}
		pid = st.ppid
	}
	return false
}
