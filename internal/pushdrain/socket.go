package pushdrain

import (
	"fmt"
	"net"
	"os"
)

// Socket is an appservice push port, bound before the homeserver is told of
// it and held for as long as a homeserver may push to it. The drain and the
// daemon (in this process, or a child that inherits File) each serve on a
// duplicate of the socket, so between them the port is never unbound: no
// other scenario, and nothing else on the machine, can take it meanwhile,
// and pushes that arrive while nobody accepts wait in its backlog.
type Socket struct {
	// Addr is the host:port the registration's url names.
	Addr string
	// File is the bound socket; a child daemon inherits it.
	File *os.File
}

// Bind binds addr ("127.0.0.1:0" picks a port) and keeps it bound.
func Bind(addr string) (*Socket, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("binding the appservice push port %s: %w", addr, err)
	}
	defer ln.Close()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		return nil, fmt.Errorf("holding the appservice push port %s: %w", addr, err)
	}
	return &Socket{Addr: ln.Addr().String(), File: f}, nil
}

// Listener is a new listener on the held socket; closing it leaves the
// port bound.
func (s *Socket) Listener() (net.Listener, error) {
	ln, err := net.FileListener(s.File)
	if err != nil {
		return nil, fmt.Errorf("listening on the held push port %s: %w", s.Addr, err)
	}
	return ln, nil
}

// Close unbinds the port (once every listener on it is closed too).
func (s *Socket) Close() error { return s.File.Close() }

// StartOn serves pushes on a listener of the held socket (see Start).
func StartOn(s *Socket, hsToken string) (*Drain, error) {
	ln, err := s.Listener()
	if err != nil {
		return nil, fmt.Errorf("draining pushes: %w", err)
	}
	return Start(ln, hsToken), nil
}
