//go:build linux

package mcpserver

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// TestDescendsComparesStartTimeAndUid: a reused pid (same pid, another start
// time) is not the agent, nor is another uid, nor the agent's parent.
func TestDescendsComparesStartTimeAndUid(t *testing.T) {
	me, err := ProcessOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !descends(os.Getpid(), me.uid, me) {
		t.Fatal("the agent process itself is not served")
	}
	reused := me
	reused.start++
	if descends(os.Getpid(), me.uid, reused) {
		t.Fatal("a process with the agent's pid but another start time is served")
	}
	if descends(os.Getpid(), me.uid+1, me) {
		t.Fatal("a peer of another uid is served")
	}
	if descends(os.Getppid(), me.uid, me) {
		t.Fatal("the agent's parent is served")
	}
}

// TestPeerPidfdClosesThePidReuseRace: SO_PEERPIDFD names the process that
// connected, so a peer that exited is refused even when its pid now names a
// live descendant of the agent, which the pid alone would let through.
func TestPeerPidfdClosesThePidReuseRace(t *testing.T) {
	if !PeerPidfdSupported() {
		t.Fatal("this kernel has no SO_PEERPIDFD (Linux 6.5+): the pid reuse race is open here, and this test asks for it closed")
	}
	me, err := ProcessOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// A real connection: the kernel names this process and hands a pidfd.
	dir, err := os.MkdirTemp("", "zpeer")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	ln, err := net.Listen("unix", filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	client, err := net.Dial("unix", filepath.Join(dir, "s"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	p, err := peerOf(server)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.close)
	if p.pid != os.Getpid() || p.pidfd < 0 {
		t.Fatalf("peerOf = pid %d, pidfd %d; want pid %d and a pidfd", p.pid, p.pidfd, os.Getpid())
	}
	if !p.allowed(me) {
		t.Fatal("the agent process itself, named by pidfd, is refused")
	}

	// The race, staged: the pidfd of a descendant that exited, and its pid
	// (as if reused) naming a live descendant.
	start := func() *exec.Cmd {
		cmd := exec.Command("sleep", "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	pidfd := func(pid int) int {
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(fd) })
		return fd
	}
	dead := start()
	deadFD := pidfd(dead.Process.Pid)
	_ = dead.Process.Kill()
	_ = dead.Wait()
	live := start()
	if (peer{pid: live.Process.Pid, uid: me.uid, pidfd: deadFD}).allowed(me) {
		t.Fatal("a peer that exited was taken for the live descendant now holding its pid")
	}
	if !(peer{pid: live.Process.Pid, uid: me.uid, pidfd: pidfd(live.Process.Pid)}).allowed(me) {
		t.Fatal("a live descendant named by its own pidfd is refused")
	}
	// Without a pidfd (kernels before 6.5) the pid alone decides: the gap
	// docs/security.md names.
	if !(peer{pid: live.Process.Pid, uid: me.uid, pidfd: -1}).allowed(me) {
		t.Fatal("the pid-only fallback refuses a live descendant")
	}
}

// TestAReusedParentPidBreaksTheChain: a parent pid read from the peer's stat
// that, by the time the walk reads it, names a process younger than the peer
// (the parent died and its pid was reused) does not lead to the agent.
func TestAReusedParentPidBreaksTheChain(t *testing.T) {
	agent := Process{Pid: 10, start: 100, uid: 1000}
	tree := map[int]procStat{
		10: {ppid: 1, start: 100, uid: 1000},
		20: {ppid: 10, start: 150, uid: 1000}, // the agent's child
		30: {ppid: 20, start: 160, uid: 1000}, // the peer
	}
	read := func(pid int) (procStat, error) {
		st, ok := tree[pid]
		if !ok {
			return procStat{}, os.ErrNotExist
		}
		return st, nil
	}
	if !descendsVia(read, 30, 1000, agent) {
		t.Fatal("a grandchild of the agent is refused")
	}
	// The peer's real parent died; pid 20 went to a younger descendant of the agent.
	tree[20] = procStat{ppid: 10, start: 170, uid: 1000}
	if descendsVia(read, 30, 1000, agent) {
		t.Fatal("a parent pid reused by a process younger than the peer was taken for its parent")
	}
}
