//go:build !linux

package mcpserver

import "net"

// ProcessOf fails off Linux: without SO_PEERCRED and /proc the server can't
// check a socket's peer, so it makes no binding at all.
func ProcessOf(pid int) (Process, error) { return Process{}, errNoPeerChecks }

type peer struct {
	pid int
	uid uint32
}

func (peer) close() {}

func (peer) allowed(Process) bool { return false }

func peerOf(nc net.Conn) (peer, error) { return peer{}, errNoPeerChecks }

// PeerPidfdSupported is false off Linux.
func PeerPidfdSupported() bool { return false }
