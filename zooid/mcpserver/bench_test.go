package mcpserver_test

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/zooid-dev/zooid/zooid/tools"
)

// BenchmarkToolCallViaBridge is one zooid_get_room_info call end to end: mcp-go
// stdio client → bridge process → agent socket → MCP server → handler (an
// in-memory backend, so the figure is the transport's cost).
func BenchmarkToolCallViaBridge(b *testing.B) {
	srv := newServer(b, &echoRooms{}, nil)
	if _, err := srv.ListenAgent("agent-a"); err != nil {
		b.Fatal(err)
	}
	cl := connect(b, srv, srv.Bind(conversation("agent-a"), self(b)))
	b.ResetTimer()
	for b.Loop() {
		if text, isErr := callTool(b, cl, tools.GetRoomInfo, map[string]any{}); isErr {
			b.Fatal(text)
		}
	}
}

// BenchmarkEchoUnixSocket is the floor: one line written to and echoed back over
// the same kind of unix socket, by a goroutine, no processes, no JSON.
func BenchmarkEchoUnixSocket(b *testing.B) {
	dir, err := os.MkdirTemp("", "zecho")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	ln, err := net.Listen("unix", filepath.Join(dir, "e.sock"))
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
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
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close(); ln.Close(); <-done })
	r := bufio.NewReader(c)
	msg := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"zooid_get_room_info","arguments":{}}}` + "\n")
	for b.Loop() {
		if _, err := c.Write(msg); err != nil {
			b.Fatal(err)
		}
		if _, err := r.ReadBytes('\n'); err != nil {
			b.Fatal(err)
		}
	}
}
