package mcpserver_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/zooid-dev/zooid/zooid/bridge"
	"github.com/zooid-dev/zooid/zooid/mcpserver"
	"github.com/zooid-dev/zooid/zooid/tools"
)

// TestMain makes the test binary its own bridge: re-executed as `<test> mcp
// --socket …` (binding in $ZOOID_BINDING) it runs the real `zooid mcp` code
// path. Re-executed as `<test> agent CMD ARGS…` it stands in for an agent
// process (see agentMain).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "mcp" {
		os.Exit(bridge.Main(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	if len(os.Args) > 2 && os.Args[1] == "agent" {
		os.Exit(agentMain(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// self is this test process as a binding's agent process: the bridges a test
// starts are its children, so they are served, as an agent's bridge is.
func self(t testing.TB) mcpserver.Process {
	t.Helper()
	p, err := mcpserver.ProcessOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// envOf is a bridge entry's environment as KEY=VALUE (the binding id).
func envOf(e *acp.McpServerStdio) []string {
	var env []string
	for _, v := range e.Env {
		env = append(env, v.Name+"="+v.Value)
	}
	return env
}

// newServer starts an MCP server whose bridge is this test binary.
func newServer(t testing.TB, rooms tools.Rooms, tasks tools.Tasks, tune ...func(*mcpserver.Options)) *mcpserver.Server {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Unix socket paths are short (108 bytes); t.TempDir can be long.
	dir, err := os.MkdirTemp("", "zmcp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	opts := mcpserver.Options{
		RunDir:        filepath.Join(dir, "run"),
		Rooms:         rooms,
		Tasks:         tasks,
		Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		BridgeCommand: []string{exe, "mcp"},
	}
	for _, f := range tune {
		f(&opts)
	}
	srv, err := mcpserver.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("closing server: %v", err)
		}
	})
	return srv
}

// connect starts the bridge for a binding exactly as an agent would (from the
// StdioEntry) and initializes an mcp-go stdio client over it.
func connect(t testing.TB, srv *mcpserver.Server, binding string) *client.Client {
	t.Helper()
	entry := srv.StdioEntry(binding)
	if entry.Stdio == nil {
		t.Fatal("no stdio entry")
	}
	cl, err := client.NewStdioMCPClient(entry.Stdio.Command, envOf(entry.Stdio), entry.Stdio.Args...)
	if err != nil {
		t.Fatalf("starting bridge: %v", err)
	}
	t.Cleanup(func() { cl.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// NewStdioMCPClient starts the transport but not the client, which wires
	// notification delivery.
	if err := cl.Start(ctx); err != nil {
		t.Fatalf("starting client: %v", err)
	}
	var init mcp.InitializeRequest
	init.Params.ProtocolVersion = mcp.ProtocolVersion20250618
	init.Params.ClientInfo = mcp.Implementation{Name: "test", Version: "1"}
	if _, err := cl.Initialize(ctx, init); err != nil {
		t.Fatalf("initialize: %v", err)
	}
	return cl
}

func listNames(t testing.TB, cl *client.Client) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := cl.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	return names
}

// callTool calls a tool and returns its JSON text and whether it is an error.
func callTool(t testing.TB, cl *client.Client, name string, args map[string]any) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var req mcp.CallToolRequest
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := cl.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("tools/call %s: %v", name, err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("%s: %d contents", name, len(res.Content))
	}
	tc, ok := res.Content[0].(mcp.TextContent)
	if !ok {
		t.Fatalf("%s: content %T", name, res.Content[0])
	}
	if !res.IsError {
		if res.StructuredContent == nil {
			t.Fatalf("%s: no structured content", name)
		}
		sc, _ := json.Marshal(res.StructuredContent)
		var a, b any
		_ = json.Unmarshal(sc, &a)
		_ = json.Unmarshal([]byte(tc.Text), &b)
		as, _ := json.Marshal(a)
		bs, _ := json.Marshal(b)
		if string(as) != string(bs) {
			t.Fatalf("%s: structured %s != text %s", name, as, bs)
		}
	}
	return tc.Text, res.IsError
}

func decodeAs[T any](t testing.TB, text string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Fatalf("decoding %s: %v", text, err)
	}
	return v
}

func mustPrefix(t testing.TB, text, prefix string) {
	t.Helper()
	if !strings.HasPrefix(text, prefix) {
		t.Fatalf("want %q…, got %q", prefix, text)
	}
}

// callErr calls a tool that must be refused at the protocol level (unknown tool).
func callErr(t testing.TB, cl *client.Client, name string, args map[string]any) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var req mcp.CallToolRequest
	req.Params.Name = name
	req.Params.Arguments = args
	res, err := cl.CallTool(ctx, req)
	if err == nil {
		t.Fatalf("tools/call %s was not refused: %+v", name, res)
	}
	return err.Error()
}
