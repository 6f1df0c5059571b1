package freeport

import (
	"net"
	"testing"
)

func TestAddrIsBindableAndOutsideTheEphemeralRange(t *testing.T) {
	for range 20 {
		addr, err := Addr()
		if err != nil {
			t.Fatal(err)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("%s was reported free but can't be bound: %v", addr, err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if port < lo || port >= hi {
			t.Fatalf("port %d outside [%d, %d)", port, lo, hi)
		}
	}
}

func TestPortMatchesAddr(t *testing.T) {
	p, err := Port()
	if err != nil || p < lo || p >= hi {
		t.Fatalf("Port() = %d, %v", p, err)
	}
}
