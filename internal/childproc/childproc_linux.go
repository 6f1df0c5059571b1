//go:build linux

// Package childproc is how tests start the processes they own (a daemon, a
// fake homeserver, node): in their own process group, so cleanup can signal
// the group, and, on Linux, killed by the kernel when the test binary dies
// without cleaning up (a test killed on timeout, a developer's ^\), so no
// orphan keeps a port or a state dir.
package childproc

import "syscall"

// SysProcAttr puts the child in its own process group and, on Linux, asks the
// kernel to SIGKILL it when the test process dies. Pdeathsig follows the OS
// thread that started the child; the Go runtime keeps its threads alive unless
// a goroutine exits while locked to one, which no test starting a child does.
func SysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
