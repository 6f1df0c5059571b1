//go:build linux

package acpagent

import "syscall"

// sysProcAttr puts the agent in its own process group (so Close can reach its
// helpers, e.g. npx → node) and asks the kernel to kill it if the daemon dies
// without running Close.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
