//go:build !linux

package mcpserver

import "net"

// ProcessOf fails off Linux: without SO_PEERCRED and /proc the server can't
// check a socket's peer, so it makes no binding at all.
func ProcessOf(pid int) (Process, error) { return Process{}, errNoPeerChecks }

func peerOf(nc net.Conn) (int, uint32, error) { return 0, 0, errNoPeerChecks }

func descends(pid int, uid uint32, agent Process) bool { return false }
