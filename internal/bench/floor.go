package bench

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/zooid-dev/zooid/zooid/bridge"
)

// BenchEchoUnixSocket is the floor of a tool call: one JSON-RPC line written
// to and echoed back over a unix socket by a goroutine of the same process;
// no second process, no JSON decoding.
func BenchEchoUnixSocket(b *testing.B) {
	dir, err := os.MkdirTemp("", "zecho")
	if err != nil {
		fatal(b, err)
	}
	defer os.RemoveAll(dir)
	ln, err := net.Listen("unix", filepath.Join(dir, "e.sock"))
	if err != nil {
		fatal(b, err)
	}
	done := make(chan struct{})
	go func() { // owner: BenchEchoUnixSocket; ends when the client closes
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return
			}
			if _, err := c.Write(line); err != nil {
				return
			}
		}
	}()
	c, err := net.Dial("unix", filepath.Join(dir, "e.sock"))
	if err != nil {
		ln.Close()
		<-done
		fatal(b, err)
	}
	defer func() { c.Close(); ln.Close(); <-done }()
	r := bufio.NewReader(c)
	msg := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"zooid_get_room_info","arguments":{}}}` + "\n")
	for b.Loop() {
		if _, err := c.Write(msg); err != nil {
			fatal(b, err)
		}
		if _, err := r.ReadBytes('\n'); err != nil {
			fatal(b, err)
		}
	}
}

// BenchCPU is a unit of this machine's CPU right now: SHA-256 of 256 KiB. An
// absolute time (a scenario's setup) divided by it is a ratio that a slower
// or busier machine changes less.
func BenchCPU(b *testing.B) {
	buf := make([]byte, 256<<10)
	for b.Loop() {
		_ = sha256.Sum256(buf)
	}
}

// BenchEchoViaBridge is the same round trip through the real bridge process
// (`<this executable> mcp`, as an agent starts `zooid mcp`): a line written to
// its stdin crosses to the socket, an in-process server echoes it, and it
// comes back on the bridge's stdout. It is the floor a tool call cannot go
// below without dropping the bridge: two process hops each way.
func BenchEchoViaBridge(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		fatal(b, err)
	}
	dir, err := os.MkdirTemp("", "zbridge")
	if err != nil {
		fatal(b, err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		fatal(b, err)
	}
	done := make(chan struct{})
	go func() { // owner: BenchEchoViaBridge; ends when the bridge goes
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		if _, err := r.ReadBytes('\n'); err != nil { // the bridge's hello
			return
		}
		if _, err := c.Write([]byte(`{"zooid_ok":true}` + "\n")); err != nil {
			return
		}
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return
			}
			if _, err := c.Write(line); err != nil {
				return
			}
		}
	}()
	defer func() { ln.Close(); <-done }()
	cmd := exec.Command(exe, "mcp", "--socket", sock)
	cmd.Env = append(os.Environ(), bridge.BindingEnv+"=bench")
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		fatal(b, err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		fatal(b, err)
	}
	if err := cmd.Start(); err != nil {
		fatal(b, fmt.Errorf("starting the bridge %s mcp: %w", exe, err))
	}
	// Closing stdin ends the bridge; Wait reaps it.
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	r := bufio.NewReader(stdout)
	msg := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"zooid_get_room_info","arguments":{}}}` + "\n")
	// The first round trip waits for the bridge to start and connect; it is
	// not part of a call.
	if _, err := stdin.Write(msg); err != nil {
		fatal(b, err)
	}
	if _, err := r.ReadBytes('\n'); err != nil {
		fatal(b, err)
	}
	for b.Loop() {
		if _, err := stdin.Write(msg); err != nil {
			fatal(b, err)
		}
		if _, err := r.ReadBytes('\n'); err != nil {
			fatal(b, err)
		}
	}
}
