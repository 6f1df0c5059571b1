//go:build linux && (amd64 || arm64 || riscv64 || ppc64le || s390x || loong64)

package unixuser

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// As runs fn on a thread of its own whose filesystem uid and gid and
// supplementary groups are u's, so every file access fn makes is judged as
// if u made it. The rest of the daemon keeps its own credentials: they are
// per thread in Linux, and the raw system calls here, unlike glibc's, change
// only this one. Afterwards the thread's own ids and capabilities are put
// back and checked; only then is it handed back to the scheduler. If they
// could not be, the goroutine exits still locked, and the runtime retires the
// thread instead of running anything else on it.
func As(u User, fn func() error) error {
	errc := make(chan error, 1)
	go func() { // owner: As; ends when fn returns
		runtime.LockOSThread()
		before, err := threadCreds()
		if err != nil {
			errc <- fmt.Errorf("probing as %s: %w", u, err)
			runtime.UnlockOSThread()
			return
		}
		err = take(u.UID, u.GID, withPrimary(u.Groups, u.GID))
		if err == nil {
			err = fn()
		} else {
			err = fmt.Errorf("probing as %s: %w", u, err)
		}
		errc <- err
		if take(before.uid, before.gid, before.groups) != nil {
			return // stays locked: the thread is retired
		}
		if after, err := threadCreds(); err != nil || !after.equal(before) {
			return
		}
		runtime.UnlockOSThread()
	}()
	return <-errc
}

func withPrimary(groups []uint32, gid uint32) []uint32 {
	if len(groups) == 0 {
		return []uint32{gid}
	}
	return groups
}

// take sets this thread's filesystem uid and gid and its groups.
func take(uid, gid uint32, groups []uint32) error {
	var ptr uintptr
	if len(groups) > 0 {
		ptr = uintptr(unsafe.Pointer(&groups[0]))
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_SETGROUPS, uintptr(len(groups)), ptr, 0); e != 0 {
		return fmt.Errorf("setgroups: %w", e)
	}
	// setfsuid and setfsgid answer the previous value and fail silently:
	// a second call with -1 reads back what is in force.
	syscall.RawSyscall(syscall.SYS_SETFSGID, uintptr(gid), 0, 0)
	syscall.RawSyscall(syscall.SYS_SETFSUID, uintptr(uid), 0, 0)
	g, _, _ := syscall.RawSyscall(syscall.SYS_SETFSGID, ^uintptr(0), 0, 0)
	uu, _, _ := syscall.RawSyscall(syscall.SYS_SETFSUID, ^uintptr(0), 0, 0)
	if uint32(uu) != uid || uint32(g) != gid {
		return fmt.Errorf("the daemon may not take filesystem uid %d and gid %d (it needs CAP_SETUID and CAP_SETGID)", uid, gid)
	}
	return nil
}

// creds are one thread's filesystem ids, groups and effective capabilities.
type creds struct {
	uid, gid uint32
	groups   []uint32
	caps     uint64
}

func (c creds) equal(o creds) bool {
	return c.uid == o.uid && c.gid == o.gid && c.caps == o.caps && slices.Equal(c.groups, o.groups)
}

// threadCreds reads the calling thread's creds.
func threadCreds() (creds, error) {
	var c creds
	uu, _, _ := syscall.RawSyscall(syscall.SYS_SETFSUID, ^uintptr(0), 0, 0)
	g, _, _ := syscall.RawSyscall(syscall.SYS_SETFSGID, ^uintptr(0), 0, 0)
	c.uid, c.gid = uint32(uu), uint32(g)
	n, _, e := syscall.RawSyscall(syscall.SYS_GETGROUPS, 0, 0, 0)
	if e != 0 {
		return c, fmt.Errorf("getgroups: %w", e)
	}
	c.groups = make([]uint32, n)
	if n > 0 {
		if _, _, e := syscall.RawSyscall(syscall.SYS_GETGROUPS, n, uintptr(unsafe.Pointer(&c.groups[0])), 0); e != 0 {
			return c, fmt.Errorf("getgroups: %w", e)
		}
	}
	var err error
	c.caps, err = effectiveCaps()
	return c, err
}

func openRead(path string) (*os.File, error) { return os.Open(path) }

func statOK(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// execOK asks faccessat2 with AT_EACCESS, which judges by the thread's
// filesystem ids (plain access(2) would use the process's real ones).
func execOK(path string) bool {
	return unix.Faccessat2(unix.AT_FDCWD, path, unix.X_OK, unix.AT_EACCESS) == nil
}

// Capabilities the daemon needs to run agents as other users: switch uid and
// gid, hand the agent its socket and directory, and signal its processes.
var needed = []struct {
	bit  uint
	name string
}{
	{unix.CAP_SETUID, "CAP_SETUID"},
	{unix.CAP_SETGID, "CAP_SETGID"},
	{unix.CAP_CHOWN, "CAP_CHOWN"},
	{unix.CAP_KILL, "CAP_KILL"},
}

// Privileged says whether this process may start agents as other users: it
// needs CAP_SETUID, CAP_SETGID, CAP_CHOWN and CAP_KILL in its effective set
// (root has them unless a container or systemd took them away). The error
// names what is missing and the fix.
func Privileged() error {
	eff, err := effectiveCaps()
	if err != nil {
		return err
	}
	return missing(eff, os.Geteuid())
}

func missing(eff uint64, euid int) error {
	var lack []string
	for _, c := range needed {
		if eff&(1<<c.bit) == 0 {
			lack = append(lack, c.name)
		}
	}
	if len(lack) == 0 {
		return nil
	}
	return fmt.Errorf("the daemon (uid %d) lacks %s, so it can't start an agent as another user: run zooid as root, or grant it those capabilities (systemd: AmbientCapabilities=%s)", euid, strings.Join(lack, ", "), strings.Join(lack, " "))
}

// effectiveCaps reads the calling thread's effective capabilities (capget
// with pid 0 names the calling thread, where /proc/self would name the main
// thread, whatever a probe did to it).
func effectiveCaps() (uint64, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return 0, fmt.Errorf("reading own capabilities: %w", err)
	}
	return uint64(data[1].Effective)<<32 | uint64(data[0].Effective), nil
}
