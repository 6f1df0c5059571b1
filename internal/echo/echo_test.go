package echo

import (
	"bufio"
	"net"
	"path/filepath"
	"testing"
)

// Serve writes each line back as it came and returns nil once the other end
// closes.
func TestServeEchoesLinesUntilClosed(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "e.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	done := make(chan error, 1)
	go func() { done <- Serve(sock) }() // owner: this test; ends when c closes
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	for _, line := range []string{"{\"id\":1}\n", "second line\n"} {
		if _, err := c.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
		got, err := r.ReadString('\n')
		if err != nil || got != line {
			t.Fatalf("echoed %q, %v; want %q", got, err, line)
		}
	}
	c.Close()
	if err := <-done; err != nil {
		t.Fatalf("Serve after the other end closed: %v", err)
	}
}

func TestMainWantsASocket(t *testing.T) {
	var errb testWriter
	if code := Main(nil, &errb); code != 2 || errb.s == "" {
		t.Fatalf("Main without --socket: %d %q, want 2 and a message", code, errb.s)
	}
}

type testWriter struct{ s string }

func (w *testWriter) Write(p []byte) (int, error) { w.s += string(p); return len(p), nil }
