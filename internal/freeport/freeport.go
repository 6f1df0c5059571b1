// Package freeport finds a loopback port for a server that must be named before
// it starts (an appservice URL in a homeserver's registration, a container with
// host networking).
package freeport

import (
	"fmt"
	"math/rand/v2"
	"net"
)

// The range lies below Linux's ephemeral ports (32768 and up), so no outgoing
// connection of a busy test process can be handed the port between the moment
// it is found free and the moment its server binds it: the window in which
// "listen on :0, close, reuse" goes wrong.
const lo, hi = 20000, 32000

// Addr returns "127.0.0.1:PORT" for a port that was free a moment ago.
func Addr() (string, error) {
	start := rand.IntN(hi - lo)
	for i := range hi - lo {
		addr := fmt.Sprintf("127.0.0.1:%d", lo+(start+i)%(hi-lo))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		if err := ln.Close(); err != nil {
			return "", fmt.Errorf("freeing port %s: %w", addr, err)
		}
		return addr, nil
	}
	return "", fmt.Errorf("no free loopback port between %d and %d", lo, hi)
}

// Port is Addr's port number.
func Port() (int, error) {
	addr, err := Addr()
	if err != nil {
		return 0, err
	}
	_, port, _ := net.SplitHostPort(addr)
	var n int
	_, err = fmt.Sscan(port, &n)
	return n, err
}
