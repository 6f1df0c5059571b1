//go:build unix && !linux

package acpagent

import "syscall"

// sysProcAttr puts the agent in its own process group so Close can reach its
// helpers; only Linux offers a parent-death signal.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
