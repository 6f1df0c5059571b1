//go:build !linux

// Package childproc is how tests start the processes they own: in their own
// process group, so cleanup can signal the group (see childproc_linux.go for
// the parent-death signal Linux adds).
package childproc

import "syscall"

// SysProcAttr puts the child in its own process group; only Linux can also
// have it killed when the test process dies.
func SysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
