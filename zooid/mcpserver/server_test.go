package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/mark3labs/mcp-go/mcp"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/mcpserver"
	"github.com/zooid-dev/zooid/zooid/tools"
)

// echoRooms answers every read with the caller it was given, so tests can see
// that identity comes from the binding and not from arguments.
type echoRooms struct {
	mu    sync.Mutex
	calls []tools.Caller
}

func (e *echoRooms) seen(c tools.Caller) {
	e.mu.Lock()
	e.calls = append(e.calls, c)
	e.mu.Unlock()
}

func (e *echoRooms) RecentThreads(_ context.Context, c tools.Caller, limit int, _ string) (tools.ThreadPage, error) {
	e.seen(c)
	return tools.ThreadPage{}, nil
}
func (e *echoRooms) ThreadHistory(_ context.Context, c tools.Caller, _ id.EventID, _ int, _ string) (tools.MessagePage, error) {
	e.seen(c)
	return tools.MessagePage{}, nil
}
func (e *echoRooms) History(_ context.Context, c tools.Caller, _ int, _ string) (tools.MessagePage, error) {
	e.seen(c)
	return tools.MessagePage{}, nil
}
func (e *echoRooms) Members(_ context.Context, c tools.Caller) ([]tools.Member, error) {
	e.seen(c)
	return nil, nil
}
func (e *echoRooms) RoomInfo(_ context.Context, c tools.Caller) (tools.RoomInfo, error) {
	e.seen(c)
	return tools.RoomInfo{ID: c.Room, Name: string(c.UserID), Transport: c.Transport}, nil
}
func (e *echoRooms) Rooms(_ context.Context, c tools.Caller) ([]tools.RoomInfo, error) {
	e.seen(c)
	return nil, nil
}
func (e *echoRooms) Send(_ context.Context, c tools.Caller, _ string, _ id.EventID, _ string) (tools.SendResult, error) {
	e.seen(c)
	return tools.SendResult{EventID: "$sent"}, nil
}

func conversation(agent string) tools.Caller {
	return tools.Caller{Agent: agent, UserID: id.UserID("@" + agent + ":test"), Transport: "matrix", Room: "!room:test", Thread: "$root", SessionKey: agent + "/$root"}
}

func TestToolsListPerKindAndListChanged(t *testing.T) {
	srv := newServer(t, &echoRooms{}, nil)
	if _, err := srv.ListenAgent("agent-a"); err != nil {
		t.Fatal(err)
	}
	bid := srv.Bind(conversation("agent-a"), self(t))
	cl := connect(t, srv, bid)
	changed := make(chan struct{}, 4)
	cl.OnNotification(func(n mcp.JSONRPCNotification) {
		if n.Method == mcp.MethodNotificationToolsListChanged {
			changed <- struct{}{}
		}
	})
	names := listNames(t, cl)
	if len(names) != 9 || !slices.Contains(names, tools.StartTaskThreads) || slices.Contains(names, tools.CompleteTask) || !slices.Contains(names, tools.Handoff) {
		t.Fatalf("conversation tools: %v", names)
	}
	// A tool not offered is refused exactly like a tool that does not exist.
	hidden := callErr(t, cl, tools.CompleteTask, map[string]any{"summary": "x"})
	nonexistent := callErr(t, cl, "zooid_no_such_tool", map[string]any{})
	if strings.ReplaceAll(hidden, tools.CompleteTask, "X") != strings.ReplaceAll(nonexistent, "zooid_no_such_tool", "X") {
		t.Fatalf("hidden tool refused differently from an unknown one:\n%s\n%s", hidden, nonexistent)
	}

	srv.SetKind(bid, tools.TaskAssignee)
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/tools/list_changed after the role change")
	}
	names = listNames(t, cl)
	if len(names) != 9 || slices.Contains(names, tools.StartTaskThreads) || !slices.Contains(names, tools.CompleteTask) || !slices.Contains(names, tools.Handoff) {
		t.Fatalf("assignee tools: %v", names)
	}
	hidden = callErr(t, cl, tools.StartTaskThreads, map[string]any{"tasks": []any{map[string]any{"agent": "b", "prompt": "p"}}})
	if !strings.Contains(hidden, "not found") {
		t.Fatalf("start_task_threads for an assignee: %s", hidden)
	}
}

func TestIdentityComesFromBinding(t *testing.T) {
	rooms := &echoRooms{}
	srv := newServer(t, rooms, nil)
	if _, err := srv.ListenAgent("agent-a"); err != nil {
		t.Fatal(err)
	}
	cl := connect(t, srv, srv.Bind(conversation("agent-a"), self(t)))
	text, isErr := callTool(t, cl, tools.GetRoomInfo, map[string]any{})
	if isErr {
		t.Fatal(text)
	}
	info := decodeAs[tools.RoomInfo](t, text)
	if info.ID != "!room:test" || info.Name != "@agent-a:test" || info.Transport != "matrix" {
		t.Fatalf("room info %+v", info)
	}
	text, isErr = callTool(t, cl, tools.GetRoomInfo, map[string]any{"room_id": "!other:test"})
	if !isErr {
		t.Fatalf("a caller-identifying argument was accepted: %s", text)
	}
	mustPrefix(t, text, "invalid_argument: ")
	text, isErr = callTool(t, cl, tools.GetHistory, map[string]any{"limit": 0})
	if !isErr {
		t.Fatal(text)
	}
	mustPrefix(t, text, "invalid_argument: limit")
}

// A session opened ahead of its thread lists its tools at once but serves no
// call until the daemon assigns it a thread; then it answers as that thread.
func TestPendingBindingServesOnlyOnceAssigned(t *testing.T) {
	rooms := &echoRooms{}
	srv := newServer(t, rooms, nil)
	if _, err := srv.ListenAgent("agent-a"); err != nil {
		t.Fatal(err)
	}
	bid := srv.BindPending(tools.Caller{Agent: "agent-a", UserID: "@agent-a:test", Transport: "matrix"}, self(t))
	cl := connect(t, srv, bid)
	if names := listNames(t, cl); len(names) != 9 || !slices.Contains(names, tools.StartTaskThreads) {
		t.Fatalf("pending session's tools: %v, want the conversation's 9", names)
	}
	text, isErr := callTool(t, cl, tools.GetRoomInfo, map[string]any{})
	if !isErr || text != "unavailable: this session has no thread yet; try again once it is prompted" {
		t.Fatalf("a pending session's call: %q (error %v), want it refused as having no thread yet", text, isErr)
	}
	if srv.Assign(bid, conversation("agent-b")) {
		t.Fatal("a pending binding of agent-a was assigned to agent-b")
	}
	if !srv.Assign(bid, conversation("agent-a")) {
		t.Fatal("assigning the pending binding failed")
	}
	text, isErr = callTool(t, cl, tools.GetRoomInfo, map[string]any{})
	if isErr {
		t.Fatal(text)
	}
	if info := decodeAs[tools.RoomInfo](t, text); info.ID != "!room:test" {
		t.Fatalf("room info %+v, want the assigned thread's room !room:test", info)
	}
}

// rawBridge runs the bridge with raw stdio so tests can see exact lines and exit codes.
type rawBridge struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *strings.Builder
}

func startRaw(t *testing.T, e *acp.McpServerStdio) *rawBridge {
	t.Helper()
	cmd := exec.Command(e.Command, e.Args...)
	cmd.Env = envOf(e)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return &rawBridge{cmd: cmd, in: in, out: bufio.NewReader(out), stderr: &stderr}
}

func (b *rawBridge) roundTrip(t *testing.T, req string) map[string]any {
	t.Helper()
	if _, err := io.WriteString(b.in, req+"\n"); err != nil {
		t.Fatal(err)
	}
	line, err := b.out.ReadString('\n')
	if err != nil {
		t.Fatalf("reading answer to %s: %v (stderr %s)", req, err, b.stderr.String())
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(line), &m); err != nil {
		t.Fatalf("answer %q: %v", line, err)
	}
	return m
}

func TestProtocolVersionsInTheField(t *testing.T) {
	srv := newServer(t, &echoRooms{}, nil)
	if _, err := srv.ListenAgent("agent-a"); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"2024-11-05", "2025-03-26", "2025-06-18"} {
		t.Run(v, func(t *testing.T) {
			e := srv.StdioEntry(srv.Bind(conversation("agent-a"), self(t))).Stdio
			b := startRaw(t, e)
			resp := b.roundTrip(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+v+`","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
			result, _ := resp["result"].(map[string]any)
			if result == nil || result["protocolVersion"] != v {
				t.Fatalf("initialize %s: %v", v, resp)
			}
			if _, err := io.WriteString(b.in, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n"); err != nil {
				t.Fatal(err)
			}
			resp = b.roundTrip(t, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
			result, _ = resp["result"].(map[string]any)
			list, _ := result["tools"].([]any)
			if len(list) != 9 {
				t.Fatalf("tools/list under %s: %v", v, resp)
			}
			resp = b.roundTrip(t, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"zooid_get_history","arguments":{"limit":-1}}}`)
			result, _ = resp["result"].(map[string]any)
			if resp["error"] != nil || result == nil || result["isError"] != true {
				t.Fatalf("a model mistake must be a tool error, not a JSON-RPC error: %v", resp)
			}
			// Closing stdin ends the bridge cleanly.
			b.in.Close()
			if err := b.cmd.Wait(); err != nil {
				t.Fatalf("bridge exit: %v (stderr %s)", err, b.stderr.String())
			}
		})
	}
}

func TestUnbindClosesAndCloseRemovesSockets(t *testing.T) {
	srv := newServer(t, &echoRooms{}, nil)
	sock, err := srv.ListenAgent("agent-a")
	if err != nil {
		t.Fatal(err)
	}
	bid := srv.Bind(conversation("agent-a"), self(t))
	e := srv.StdioEntry(bid).Stdio
	b := startRaw(t, e)
	resp := b.roundTrip(t, `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if resp["error"] != nil {
		t.Fatalf("ping: %v", resp)
	}
	srv.Unbind(bid)
	done := make(chan error, 1)
	go func() { done <- b.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("bridge still running after Unbind")
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket left behind: %v", err)
	}
	if _, err := os.Stat(filepath.Dir(sock)); !os.IsNotExist(err) {
		t.Fatalf("agent-a's socket directory left behind: %v", err)
	}
}

// TestEachAgentHasItsOwnSocketDirectory: an agent's socket sits alone in a
// private directory of its own, the one directory a container gets mounted.
func TestEachAgentHasItsOwnSocketDirectory(t *testing.T) {
	srv := newServer(t, &echoRooms{}, nil)
	a, err := srv.ListenAgent("agent-a")
	if err != nil {
		t.Fatal(err)
	}
	b, err := srv.ListenAgent("agent-b")
	if err != nil {
		t.Fatal(err)
	}
	dirA, _ := srv.SocketDir("agent-a")
	if filepath.Dir(a) != dirA || filepath.Base(a) != mcpserver.SocketName || filepath.Base(dirA) != "agent-a" {
		t.Fatalf("agent-a's socket is %s in %s, want %s/%s", a, dirA, dirA, mcpserver.SocketName)
	}
	if filepath.Dir(b) == dirA {
		t.Fatalf("agent-b's socket %s shares agent-a's directory", b)
	}
	st, err := os.Stat(dirA)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o700 {
		t.Fatalf("agent-a's socket directory has mode %v, want 0700", st.Mode().Perm())
	}
	entries, err := os.ReadDir(dirA)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != mcpserver.SocketName {
		t.Fatalf("agent-a's socket directory holds %v, want only %s", entries, mcpserver.SocketName)
	}
}

type slowRooms struct{ echoRooms }

func (s *slowRooms) RoomInfo(ctx context.Context, c tools.Caller) (tools.RoomInfo, error) {
	select {
	case <-time.After(300 * time.Millisecond):
	case <-ctx.Done():
		return tools.RoomInfo{}, ctx.Err()
	}
	return tools.RoomInfo{ID: c.Room, Name: "slow", Transport: "matrix"}, nil
}

func TestAnswerArrivesAfterStdinCloses(t *testing.T) {
	srv := newServer(t, &slowRooms{}, nil)
	if _, err := srv.ListenAgent("agent-a"); err != nil {
		t.Fatal(err)
	}
	e := srv.StdioEntry(srv.Bind(conversation("agent-a"), self(t))).Stdio
	b := startRaw(t, e)
	b.roundTrip(t, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
	if _, err := io.WriteString(b.in, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"zooid_get_room_info","arguments":{}}}`+"\n"); err != nil {
		t.Fatal(err)
	}
	b.in.Close()
	line, err := b.out.ReadString('\n')
	if err != nil || !strings.Contains(line, `\"name\":\"slow\"`) {
		t.Fatalf("answer after stdin closed: %q %v", line, err)
	}
	if err := b.cmd.Wait(); err != nil {
		t.Fatalf("bridge exit: %v", err)
	}
}

// heldRooms never hears back from its homeserver: every call waits for its
// context, as a read or a send does on a homeserver that accepted the request
// and never answers.
type heldRooms struct {
	echoRooms
	held chan struct{} // one token per call that reached the backend
}

func (h *heldRooms) History(ctx context.Context, _ tools.Caller, _ int, _ string) (tools.MessagePage, error) {
	h.held <- struct{}{}
	<-ctx.Done()
	return tools.MessagePage{}, fmt.Errorf("reading history: %w", ctx.Err())
}

func (h *heldRooms) Send(ctx context.Context, _ tools.Caller, _ string, _ id.EventID, _ string) (tools.SendResult, error) {
	h.held <- struct{}{}
	<-ctx.Done()
	return tools.SendResult{}, fmt.Errorf("sending: %w", ctx.Err())
}

// A call the backend never answers ends at the call's deadline with the
// retryable "unavailable", saying how long it waited; a send says it may have
// landed. The connection goes on serving.
func TestCallDeadline(t *testing.T) {
	rooms := &heldRooms{held: make(chan struct{}, 2)}
	srv := newServer(t, rooms, nil, func(o *mcpserver.Options) { o.CallTimeout = 300 * time.Millisecond })
	if _, err := srv.ListenAgent("agent-a"); err != nil {
		t.Fatal(err)
	}
	cl := connect(t, srv, srv.Bind(conversation("agent-a"), self(t)))
	start := time.Now()
	text, isErr := callTool(t, cl, tools.GetHistory, map[string]any{"limit": 5})
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Fatalf("the call ended after %v, before its deadline", took)
	}
	if want := "unavailable: the homeserver did not answer within 300ms; try again"; !isErr || text != want {
		t.Fatalf("held read: isError=%v %q, want %q", isErr, text, want)
	}
	text, isErr = callTool(t, cl, tools.SendMessage, map[string]any{"room": "!room:test", "text": "hello"})
	if want := "unavailable: the homeserver did not answer within 300ms; the message may have been posted: read the thread before sending it again"; !isErr || text != want {
		t.Fatalf("held send: isError=%v %q, want %q", isErr, text, want)
	}
	if len(rooms.held) != 2 {
		t.Fatalf("%d calls reached the backend, want 2", len(rooms.held))
	}
	text, isErr = callTool(t, cl, tools.GetRoomInfo, map[string]any{})
	if isErr {
		t.Fatalf("a call after the deadlines: %s", text)
	}
}
