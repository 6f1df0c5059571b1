package mcpserver

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
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

// peer is a socket's peer as the kernel named it at connect time.
type peer struct {
	pid int
	uid uint32
	// pidfd refers to the very process that connected (SO_PEERPIDFD, Linux
	// 6.5+), or is -1 where the kernel has no such option. Unlike the pid it
	// can't come to name another process.
	pidfd int
}

func (p peer) close() {
	if p.pidfd >= 0 {
		_ = syscall.Close(p.pidfd)
	}
}

// peerOf asks the kernel which process connected: SO_PEERCRED gives its pid and
// uid, SO_PEERPIDFD a pidfd for it where the kernel has the option.
func peerOf(nc net.Conn) (peer, error) {
	p := peer{pidfd: -1}
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		return p, fmt.Errorf("peer credentials: %T is not a unix socket", nc)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return p, fmt.Errorf("peer credentials: %w", err)
	}
	var cred *syscall.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
		if credErr == nil && soPeerPidfd > 0 {
			if pfd, err := syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, soPeerPidfd); err == nil {
				p.pidfd = pfd
			}
		}
	}); err != nil {
		return p, fmt.Errorf("peer credentials: %w", err)
	}
	if credErr != nil {
		return p, fmt.Errorf("peer credentials: %w", credErr)
	}
	p.pid, p.uid = int(cred.Pid), cred.Uid
	return p, nil
}

// PeerPidfdSupported says whether this kernel names a socket's peer by pidfd
// (SO_PEERPIDFD), which closes the pid reuse race of a pid-only check.
func PeerPidfdSupported() bool {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil || soPeerPidfd <= 0 {
		return false
	}
	defer syscall.Close(fds[0])
	defer syscall.Close(fds[1])
	pfd, err := syscall.GetsockoptInt(fds[0], syscall.SOL_SOCKET, soPeerPidfd)
	if err != nil {
		return false
	}
	_ = syscall.Close(pfd)
	return true
}

// allowed says whether the peer is agent itself or one of its descendants,
// with agent's uid; see descends. With a pidfd it also makes sure the process
// that connected was alive through the whole walk: then its pid, and so
// everything read from /proc under it, was its own, not a reused one.
func (p peer) allowed(agent Process) bool {
	if !descends(p.pid, p.uid, agent) {
		return false
	}
	if p.pidfd < 0 {
		return true
	}
	// Signal 0 only asks whether the process still exists (a zombie, still
	// holding its pid, counts). EPERM means it exists and isn't ours to signal.
	err := unix.PidfdSendSignal(p.pidfd, 0, nil, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// descends says whether pid is agent itself or one of its descendants, and has
// agent's uid. It walks the parent chain through /proc: a live process's parent
// is live (orphans are re-parented to init or a subreaper), so the chain leads
// to the agent only if the process really is its descendant. Each step must
// lead to a process started no later than the one before (a parent is older
// than its child), so a parent pid reused during the walk by a younger process
// breaks the chain; the agent's start time must match, so a pid reused after
// the agent ended is not taken for it. Start times count clock ticks, so a
// reuse within the same tick (10 ms) as the original's start is not told
// apart this way. The peer's own pid is made safe by its pidfd (peer.allowed);
// without one (kernels before 6.5), a peer that connects and exits, its pid
// taken by a new descendant of the agent before this walk, is taken for that
// descendant. Nothing here stops a same-uid process that ptraces the agent
// from acting through it.
func descends(pid int, uid uint32, agent Process) bool {
	return descendsVia(readStat, pid, uid, agent)
}

// descendsVia is descends reading processes with read (tests stage a tree).
func descendsVia(read func(pid int) (procStat, error), pid int, uid uint32, agent Process) bool {
	if uid != agent.uid {
		return false
	}
	younger := uint64(math.MaxUint64)
	for range 4096 { // far deeper than any real process tree; a bound, not a limit
		if pid <= 0 {
			return false
		}
		st, err := read(pid)
		if err != nil || st.start > younger {
			return false
		}
		if pid == agent.Pid {
			return st.start == agent.start
		}
		if pid == 1 {
			return false
		}
		pid, younger = st.ppid, st.start
	}
	return false
}
