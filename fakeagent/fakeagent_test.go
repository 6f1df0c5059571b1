package fakeagent_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/zooid-dev/zooid/fakeagent"
	"github.com/zooid-dev/zooid/zooid/acpagent"
)

// The test binary is both the scripted agent and a tiny stdio MCP server.
func TestMain(m *testing.M) {
	fakeagent.ExecIfRequested()
	if os.Getenv(fakeagent.ExecEnv) == "mcp-server" {
		os.Exit(runMCPServer())
	}
	os.Exit(m.Run())
}

func runMCPServer() int {
	srv := server.NewMCPServer("test-tools", "0")
	srv.AddTool(mcp.NewTool("echo", mcp.WithString("text", mcp.Required())),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			text, err := req.RequireString("text")
			if err != nil {
				return mcp.NewToolResultError(err.Error()), nil
			}
			return mcp.NewToolResultText(os.Getenv("GREETING") + " " + text), nil
		})
	srv.AddTool(mcp.NewTool("fail"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultError("this tool always fails"), nil
	})
	srv.AddTool(mcp.NewTool("whereami"), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		wd, _ := os.Getwd()
		return mcp.NewToolResultStructured(map[string]any{"cwd": wd, "greeting": os.Getenv("GREETING")}, wd), nil
	})
	if err := server.ServeStdio(srv); err != nil {
		fmt.Fprintln(os.Stderr, "mcp server:", err)
		return 1
	}
	return 0
}

func exe(t *testing.T) string {
	t.Helper()
	p, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func startAgent(t *testing.T, ctl *fakeagent.Controller, name string) *acpagent.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := acpagent.Start(ctx, acpagent.Spec{
		Command: exe(t),
		Args:    ctl.Args(name),
		Env:     []string{fakeagent.ExecEnv + "=fake-agent", "PATH=" + os.Getenv("PATH")},
	}, acpagent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ctx10(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestToolCallsThroughStdioMCPServer(t *testing.T) {
	ctl := fakeagent.NewController(t)
	c := startAgent(t, ctl, "tooly")
	cwd := t.TempDir()
	entry := acp.McpServer{Stdio: &acp.McpServerStdio{
		Name:    "zooid",
		Command: exe(t),
		Args:    []string{"mcp"},
		Env:     []acp.EnvVariable{{Name: fakeagent.ExecEnv, Value: "mcp-server"}, {Name: "GREETING", Value: "hi"}},
	}}
	s, err := c.NewSession(ctx10(t), cwd, []acp.McpServer{entry})
	if err != nil {
		t.Fatal(err)
	}
	lists, err := ctl.WaitToolLists(ctx10(t), "tooly", 1)
	if err != nil {
		t.Fatalf("%v (mcp errors: %+v)", err, ctl.MCPErrors("tooly"))
	}
	want := []string{"echo", "fail", "whereami"}
	got := slices.Sorted(slices.Values(lists[0]))
	if !slices.Equal(got, want) {
		t.Fatalf("tools on start = %v, want %v", got, want)
	}

	ctl.Queue("tooly", fakeagent.Turn{
		fakeagent.CallTool("echo", map[string]any{"text": "there"}),
		fakeagent.CallTool("fail", nil),
		fakeagent.CallTool("nonexistent", nil),
		fakeagent.CallTool("whereami", nil),
		fakeagent.ListTools(),
		fakeagent.Say("all done"),
	})
	var toolCalls, toolUpdates int
	var texts []string
	stop, err := s.Prompt(ctx10(t), "use your tools", func(u acpagent.Update) {
		if u.ToolCall != nil {
			toolCalls++
		}
		if u.ToolCallUpdate != nil {
			toolUpdates++
		}
		if u.Text != "" {
			texts = append(texts, u.Text)
		}
	})
	if err != nil || stop != acp.StopReasonEndTurn {
		t.Fatalf("prompt: %q %v", stop, err)
	}
	if toolCalls != 4 || toolUpdates != 4 || !slices.Equal(texts, []string{"all done"}) {
		t.Fatalf("updates: %d tool calls, %d tool updates, texts %q", toolCalls, toolUpdates, texts)
	}

	rs := ctl.ToolResults("tooly")
	if len(rs) != 4 {
		t.Fatalf("tool results %+v", rs)
	}
	if r := rs[0]; r.Tool != "echo" || r.IsError || r.Text != "hi there" || r.Err != "" || r.SessionID != s.ID() || r.Args["text"] != "there" {
		t.Errorf("echo result %+v", r)
	}
	if r := rs[1]; r.Tool != "fail" || !r.IsError || r.Text != "this tool always fails" {
		t.Errorf("fail result %+v", r)
	}
	if r := rs[2]; r.Err == "" || !r.InvalidParams || !strings.Contains(r.Err, "nonexistent") {
		t.Errorf("missing tool result %+v", r)
	}
	st, _ := rs[3].Structured.(map[string]any)
	if st["cwd"] != cwd || st["greeting"] != "hi" {
		t.Errorf("whereami structured %#v, want cwd %s (session cwd) and greeting hi (entry env)", rs[3].Structured, cwd)
	}
	if lists := ctl.ToolLists("tooly"); len(lists) != 2 || len(lists[1]) != 3 {
		t.Errorf("tool lists %v, want a second list of 3", lists)
	}
	infos := ctl.Sessions("tooly")
	if len(infos) != 1 || len(infos[0].McpServers) != 1 || infos[0].McpServers[0].Stdio == nil ||
		infos[0].McpServers[0].Stdio.Command != exe(t) || infos[0].McpServers[0].Stdio.Args[0] != "mcp" {
		t.Errorf("session info %+v", infos)
	}
}

func TestMCPServerFailureIsReported(t *testing.T) {
	ctl := fakeagent.NewController(t)
	c := startAgent(t, ctl, "a")
	entry := acp.McpServer{Stdio: &acp.McpServerStdio{Name: "broken", Command: filepath.Join(t.TempDir(), "nope"), Args: []string{}, Env: []acp.EnvVariable{}}}
	s, err := c.NewSession(ctx10(t), t.TempDir(), []acp.McpServer{entry})
	if err != nil {
		t.Fatal(err)
	}
	errs, err := ctl.WaitMCPErrors(ctx10(t), "a", 1)
	if err != nil {
		t.Fatal(err)
	}
	if errs[0].Server != "broken" || errs[0].SessionID != s.ID() {
		t.Fatalf("mcp error %+v", errs[0])
	}
	ctl.Queue("a", fakeagent.Turn{fakeagent.CallTool("echo", map[string]any{"text": "x"})})
	if _, err := s.Prompt(ctx10(t), "try", nil); err != nil {
		t.Fatal(err)
	}
	rs := ctl.ToolResults("a")
	if len(rs) != 1 || rs[0].Err == "" {
		t.Fatalf("tool result without a server: %+v", rs)
	}
}

func TestTurnsConsumedInOrderAcrossProcesses(t *testing.T) {
	ctl := fakeagent.NewController(t)
	ctl.Queue("a", fakeagent.Turn{fakeagent.Say("first")}, fakeagent.Turn{fakeagent.Say("second")})
	ctl.Queue("b", fakeagent.Turn{fakeagent.Say("for b")})
	var got []string
	for _, name := range []string{"a", "b", "a", "a"} {
		c := startAgent(t, ctl, name)
		s, err := c.NewSession(ctx10(t), t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		var text string
		if _, err := s.Prompt(ctx10(t), "hi", func(u acpagent.Update) { text += u.Text }); err != nil {
			t.Fatal(err)
		}
		got = append(got, text)
	}
	want := []string{"first", "for b", "second", fakeagent.DefaultReply}
	if !slices.Equal(got, want) {
		t.Fatalf("replies %q, want %q", got, want)
	}
	if ctl.Pending("a") != 0 || len(ctl.Prompts("a")) != 3 || len(ctl.Prompts("b")) != 1 {
		t.Fatalf("pending %d, prompts a=%d b=%d", ctl.Pending("a"), len(ctl.Prompts("a")), len(ctl.Prompts("b")))
	}
}

func TestWaitTimesOut(t *testing.T) {
	ctl := fakeagent.NewController(t)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := ctl.WaitPrompts(ctx, "nobody", 1); err == nil {
		t.Fatal("WaitPrompts returned without prompts")
	}
}

func TestWaitInterruptedByActivity(t *testing.T) {
	ctl := fakeagent.NewController(t)
	c := startAgent(t, ctl, "a")
	done := make(chan error, 1)
	go func() {
		_, err := ctl.WaitSessions(ctx10(t), "a", 1)
		done <- err
	}()
	if _, err := c.NewSession(ctx10(t), t.TempDir(), nil); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestSocketPathIsShortAndRemoved(t *testing.T) {
	ctl, err := fakeagent.StartController("")
	if err != nil {
		t.Fatal(err)
	}
	sock := ctl.Socket()
	if len(sock) >= 104 {
		t.Fatalf("socket path %q too long", sock)
	}
	if args := ctl.Args("x"); !slices.Equal(args, []string{"fake-agent", "--control", sock, "--agent", "x"}) {
		t.Fatalf("args %v", args)
	}
	if err := ctl.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := net.Dial("unix", sock); err == nil {
		t.Fatal("socket still accepts after Close")
	}
	if _, err := os.Stat(filepath.Dir(sock)); !os.IsNotExist(err) {
		t.Fatalf("temp dir not removed: %v", err)
	}
}

func TestMainRejectsBadArgs(t *testing.T) {
	var out, errb strings.Builder
	if code := fakeagent.Main([]string{"--agent", "a"}, strings.NewReader(""), &out, &errb); code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	if !strings.Contains(errb.String(), "--control") {
		t.Fatalf("stderr %q", errb.String())
	}
	sock := filepath.Join(t.TempDir(), "none.sock")
	errb.Reset()
	if code := fakeagent.Main([]string{"fake-agent", "--control", sock, "--agent", "a"}, strings.NewReader(""), &out, &errb); code != 2 {
		t.Fatalf("exit %d without controller, want 2", code)
	}
}
