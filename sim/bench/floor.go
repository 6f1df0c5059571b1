package bench

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/zooid-dev/zooid/zooid/handshake"

	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/zooid-dev/zooid/zooid/mcpserver"
	"github.com/zooid-dev/zooid/zooid/tools"
)

// BenchEchoUnixSocket is the floor of a tool call: one JSON-RPC line written
// to and echoed back over a unix socket by a goroutine of the same process;
// no second process, no JSON decoding. It is the repository's one bare echo:
// the benchmarks it is the floor of live beside it, so `zooid bench` can put
// them side by side (zooid/... tests don't import this package: it imports
// steps, the harness, which imports zooid/... itself).
func BenchEchoUnixSocket(b *testing.B) {
	ln, sock := listenUnix(b, "zecho")
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
	c, err := net.Dial("unix", sock)
	if err != nil {
		ln.Close()
		<-done
		fatal(b, err)
	}
	defer func() { c.Close(); ln.Close(); <-done }()
	r := bufio.NewReader(c)
	msg := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"zooid_get_room_info","arguments":{}}}` + "\n")
	cpu0 := cpuTime()
	for b.Loop() {
		if _, err := c.Write(msg); err != nil {
			fatal(b, err)
		}
		if _, err := r.ReadBytes('\n'); err != nil {
			fatal(b, err)
		}
	}
	reportCPU(b, cpu0)
}

// BenchEchoCrossProcess is the bare round trip across a process boundary, as
// a tool call's crosses them: the same line written to a unix socket and read
// back, echoed by another process (`<this executable> echo`, internal/echo)
// that reads it and writes it back, no JSON decoding on either side. A path
// that crosses processes pays the other process's wake-up each way, which
// BenchEchoUnixSocket (one process) does not.
func BenchEchoCrossProcess(b *testing.B) {
	exe := executable(b)
	ln, sock := listenUnix(b, "zxecho")
	defer ln.Close()
	cmd := exec.Command(exe, "echo", "--socket", sock)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		fatal(b, fmt.Errorf("starting the echo %s echo: %w", exe, err))
	}
	// Closing the connection ends the echo; Wait reaps it. A failure before
	// the connection came kills it.
	var c net.Conn
	defer func() {
		if c != nil {
			c.Close()
		} else {
			_ = cmd.Process.Kill()
		}
		_ = cmd.Wait()
	}()
	if ul, ok := ln.(*net.UnixListener); ok {
		_ = ul.SetDeadline(time.Now().Add(30 * time.Second))
	}
	var err error
	if c, err = ln.Accept(); err != nil {
		fatal(b, fmt.Errorf("waiting for the echo process to connect: %w", err))
	}
	r := bufio.NewReader(c)
	msg := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"zooid_get_room_info","arguments":{}}}` + "\n")
	// The first round trip wakes the new process; it is not part of a call.
	if _, err := c.Write(msg); err != nil {
		fatal(b, err)
	}
	if _, err := r.ReadBytes('\n'); err != nil {
		fatal(b, err)
	}
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
	exe := executable(b)
	ln, sock := listenUnix(b, "zbridge")
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
	cmd.Env = append(os.Environ(), handshake.BindingEnv+"=bench")
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

// staticRooms answers zooid_get_room_info with a fixed record and nothing
// else: the tool-call path with no homeserver behind it. (The embedded
// interface is nil; it is named apart from its Rooms method.)
type staticRooms struct{ unanswered }

type unanswered = tools.Rooms

func (staticRooms) RoomInfo(_ context.Context, c tools.Caller) (tools.RoomInfo, error) {
	return tools.RoomInfo{ID: c.Room, Name: "ops", Transport: c.Transport}, nil
}

// BenchToolCallNoHomeserver is a zooid_get_room_info call through everything
// but the homeserver: mcp-go's stdio client (as the fake agent uses it) → the
// real bridge process → the agent's socket → the daemon's MCP server and
// handler, answered from memory. Its excess over BenchEchoViaBridge is the
// MCP JSON-RPC layers on both sides; the tool call end to end adds the
// homeserver requests.
func BenchToolCallNoHomeserver(b *testing.B) {
	exe := executable(b)
	dir := shortDir(b, "zmcp")
	srv, err := mcpserver.New(mcpserver.Options{
		RunDir:        filepath.Join(dir, "run"),
		Rooms:         staticRooms{},
		Logger:        slog.New(slog.DiscardHandler),
		BridgeCommand: []string{exe, "mcp"},
	})
	if err != nil {
		fatal(b, err)
	}
	defer func() {
		if err := srv.Close(); err != nil {
			fatal(b, err)
		}
	}()
	if _, err := srv.ListenAgent("agent-a"); err != nil {
		fatal(b, err)
	}
	// The bridge the client starts is this process's child, so it passes the
	// server's peer check as an agent's bridge does.
	self, err := mcpserver.ProcessOf(os.Getpid())
	if err != nil {
		fatal(b, err)
	}
	caller := tools.Caller{Agent: "agent-a", UserID: "@agent-a:localhost", Transport: "matrix",
		Room: "!ops:localhost", Thread: "$root", SessionKey: "agent-a/$root", Kind: tools.Conversation}
	entry := srv.StdioEntry(srv.Bind(caller, self)).Stdio
	var env []string
	for _, v := range entry.Env {
		env = append(env, v.Name+"="+v.Value)
	}
	cl, err := mcpclient.NewStdioMCPClient(entry.Command, env, entry.Args...)
	if err != nil {
		fatal(b, fmt.Errorf("starting the bridge: %w", err))
	}
	defer cl.Close()
	callLoop(b, cl)
}

// BenchToolCallCanned is the floor of a tool call with the agent's MCP
// client: the same zooid_get_room_info call, by mcp-go's stdio client (as
// the fake agent makes it), through the real bridge process, answered by a
// server that reads only the request's id and writes a canned result line.
// Whatever an MCP server does on top of that is above this floor.
func BenchToolCallCanned(b *testing.B) {
	exe := executable(b)
	ln, sock := listenUnix(b, "zcanned")
	initResult := fmt.Sprintf(`{"protocolVersion":%q,"capabilities":{"tools":{}},"serverInfo":{"name":"canned","version":"0"}}`, mcp.LATEST_PROTOCOL_VERSION)
	callResult := `{"content":[{"type":"text","text":"{\"id\":\"!ops:localhost\",\"name\":\"ops\",\"transport\":\"matrix\"}"}],"structuredContent":{"id":"!ops:localhost","name":"ops","transport":"matrix"}}`
	done := make(chan struct{})
	go func() { // owner: BenchToolCallCanned; ends when the bridge goes
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
		var out []byte
		for {
			line, err := r.ReadBytes('\n')
			if err != nil {
				return
			}
			var probe struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(line, &probe) != nil || len(probe.ID) == 0 {
				continue // a notification
			}
			result := callResult
			if probe.Method == "initialize" {
				result = initResult
			}
			out = append(append(append(append(out[:0], `{"jsonrpc":"2.0","id":`...), probe.ID...), `,"result":`...), result...)
			if _, err := c.Write(append(out, "}\n"...)); err != nil {
				return
			}
		}
	}()
	defer func() { ln.Close(); <-done }()
	cl, err := mcpclient.NewStdioMCPClient(exe, append(os.Environ(), handshake.BindingEnv+"=bench"), "mcp", "--socket", sock)
	if err != nil {
		fatal(b, fmt.Errorf("starting the bridge: %w", err))
	}
	defer cl.Close()
	callLoop(b, cl)
}

// callLoop initializes cl and makes b.N zooid_get_room_info calls.
func callLoop(b *testing.B, cl *mcpclient.Client) {
	ctx := context.Background()
	if err := cl.Start(ctx); err != nil {
		fatal(b, err)
	}
	var init mcp.InitializeRequest
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "zooid-bench", Version: "0"}
	if _, err := cl.Initialize(ctx, init); err != nil {
		fatal(b, fmt.Errorf("initialize: %w", err))
	}
	var req mcp.CallToolRequest
	req.Params.Name = tools.GetRoomInfo
	req.Params.Arguments = map[string]any{}
	cpu0 := cpuTime()
	for b.Loop() {
		res, err := cl.CallTool(ctx, req)
		if err != nil {
			fatal(b, err)
		}
		if res.IsError || len(res.Content) != 1 {
			fatal(b, fmt.Errorf("%s answered %v (error %v)", tools.GetRoomInfo, res.Content, res.IsError))
		}
	}
	reportCPU(b, cpu0)
}

// cpuTime is this process's CPU time so far, user and system. Per call it
// says what a layer costs whatever else the machine is doing, which the
// wall time of a call on a loaded machine does not.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the process's CPU time since start per iteration, as
// "cpu-ns/op".
func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
}

// executable is this binary, which serves the bridge (`<exe> mcp`).
func executable(b *testing.B) string {
	exe, err := os.Executable()
	if err != nil {
		fatal(b, err)
	}
	return exe
}

// shortDir is a private temporary directory removed when the benchmark ends,
// with a short path: a unix socket path holds 108 bytes, and b.TempDir's
// carry the benchmark's name.
func shortDir(b *testing.B, prefix string) string {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		fatal(b, err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// listenUnix listens on a unix socket in a fresh shortDir; it returns the
// listener and the socket's path.
func listenUnix(b *testing.B, prefix string) (net.Listener, string) {
	sock := filepath.Join(shortDir(b, prefix), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		fatal(b, err)
	}
	return ln, sock
}
