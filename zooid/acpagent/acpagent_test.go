package acpagent_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/zooid-dev/zooid/fakeagent"
	"github.com/zooid-dev/zooid/internal/childproc"
	"github.com/zooid-dev/zooid/zooid/acpagent"
)

// The test binary doubles as the scripted agent: the daemon side spawns it
// exactly as it would spawn a real agent.
func TestMain(m *testing.M) {
	fakeagent.ExecIfRequested()
	os.Exit(m.Run())
}

// syncBuffer collects log output written from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func agentSpec(t *testing.T, ctl *fakeagent.Controller, name string) acpagent.Spec {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return acpagent.Spec{
		Command: exe,
		Args:    ctl.Args(name),
		Env:     []string{fakeagent.ExecEnv + "=fake-agent", "PATH=" + os.Getenv("PATH")},
		Dir:     t.TempDir(),
	}
}

func start(t *testing.T, ctl *fakeagent.Controller, name string, opts acpagent.Options) *acpagent.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := acpagent.Start(ctx, agentSpec(t, ctl, name), opts)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func newSession(t *testing.T, c *acpagent.Conn, mcp []acp.McpServer) *acpagent.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := c.NewSession(ctx, t.TempDir(), mcp)
	if err != nil {
		t.Fatalf("new session: %v", err)
	}
	return s
}

func prompt(t *testing.T, s *acpagent.Session, text string) ([]string, acp.StopReason, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var texts []string
	stop, err := s.Prompt(ctx, text, func(u acpagent.Update) {
		if u.Text != "" {
			texts = append(texts, u.Text)
		}
	})
	return texts, stop, err
}

func TestStreamingChunksArriveInOrder(t *testing.T) {
	ctl := fakeagent.NewController(t)
	parts := make([]string, 50)
	for i := range parts {
		parts[i] = "part" + strconv.Itoa(i) + " "
	}
	ctl.Queue("a", fakeagent.Turn{fakeagent.SayInChunks(parts...), fakeagent.Say("done")})
	c := start(t, ctl, "a", acpagent.Options{})
	s := newSession(t, c, nil)

	texts, stop, err := prompt(t, s, "hello there")
	if err != nil {
		t.Fatalf("prompt: %v", err)
	}
	want := append(slices.Clone(parts), "done")
	if !slices.Equal(texts, want) {
		t.Fatalf("chunks = %q, want %q", texts, want)
	}
	if stop != acp.StopReasonEndTurn {
		t.Fatalf("stop = %q, want end_turn", stop)
	}
	ps := ctl.Prompts("a")
	if len(ps) != 1 || ps[0].Text != "hello there" || ps[0].SessionID != s.ID() {
		t.Fatalf("agent saw prompts %+v, want one %q on %s", ps, "hello there", s.ID())
	}
}

func TestDefaultReplyWhenNothingQueued(t *testing.T) {
	ctl := fakeagent.NewController(t)
	c := start(t, ctl, "a", acpagent.Options{})
	s := newSession(t, c, nil)
	texts, stop, err := prompt(t, s, "hi")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(texts, []string{fakeagent.DefaultReply}) || stop != acp.StopReasonEndTurn {
		t.Fatalf("got %q %q, want [%q] end_turn", texts, stop, fakeagent.DefaultReply)
	}
}

func TestStopReasonsPassThrough(t *testing.T) {
	ctl := fakeagent.NewController(t)
	reasons := []acp.StopReason{acp.StopReasonMaxTokens, acp.StopReasonRefusal, acp.StopReasonMaxTurnRequests, acp.StopReasonEndTurn}
	for _, r := range reasons {
		ctl.Queue("a", fakeagent.Turn{fakeagent.Say("x"), fakeagent.Stop(r), fakeagent.Say("never")})
	}
	c := start(t, ctl, "a", acpagent.Options{})
	s := newSession(t, c, nil)
	for _, r := range reasons {
		texts, stop, err := prompt(t, s, "go")
		if err != nil {
			t.Fatalf("%s: %v", r, err)
		}
		if stop != r {
			t.Errorf("stop = %q, want %q", stop, r)
		}
		if !slices.Equal(texts, []string{"x"}) {
			t.Errorf("%s: chunks %q, want [x] (nothing after the stop)", r, texts)
		}
	}
}

func TestCrashMidTurn(t *testing.T) {
	ctl := fakeagent.NewController(t)
	ctl.Queue("a", fakeagent.Turn{fakeagent.SayInChunks("one", "two"), fakeagent.Crash()})
	c := start(t, ctl, "a", acpagent.Options{})
	s := newSession(t, c, nil)

	texts, _, err := prompt(t, s, "crash please")
	if !errors.Is(err, acpagent.ErrCrashed) {
		t.Fatalf("err = %v, want ErrCrashed", err)
	}
	if !slices.Equal(texts, []string{"one", "two"}) {
		t.Fatalf("chunks before the crash = %q, want [one two]", texts)
	}
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Done not closed after crash")
	}
	if c.Err() == nil || !strings.Contains(c.Err().Error(), "exit status 3") {
		t.Fatalf("Err = %v, want exit status 3", c.Err())
	}
	if _, _, err := prompt(t, s, "again"); !errors.Is(err, acpagent.ErrCrashed) {
		t.Fatalf("prompt after crash: %v, want ErrCrashed", err)
	}
}

func TestHangThenContextCancelSendsSessionCancel(t *testing.T) {
	ctl := fakeagent.NewController(t)
	ctl.Queue("a", fakeagent.Turn{fakeagent.Say("working"), fakeagent.Hang()}, fakeagent.Turn{fakeagent.Say("after")})
	c := start(t, ctl, "a", acpagent.Options{})
	s := newSession(t, c, nil)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []string
	_, err := s.Prompt(ctx, "hang", func(u acpagent.Update) {
		got = append(got, u.Text)
		cancel() // the user gives up once the agent started talking
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	cancels, err := ctl.WaitCancels(wctx, "a", 1)
	if err != nil {
		t.Fatal(err)
	}
	if cancels[0].SessionID != s.ID() {
		t.Fatalf("cancel for %s, want %s", cancels[0].SessionID, s.ID())
	}
	// The agent ended the hung turn, so the session takes the next one.
	texts, stop, err := prompt(t, s, "next")
	if err != nil || stop != acp.StopReasonEndTurn || !slices.Equal(texts, []string{"after"}) {
		t.Fatalf("next turn: %q %q %v", texts, stop, err)
	}
}

func TestExplicitCancel(t *testing.T) {
	ctl := fakeagent.NewController(t)
	ctl.Queue("a", fakeagent.Turn{fakeagent.Hang()})
	c := start(t, ctl, "a", acpagent.Options{})
	s := newSession(t, c, nil)
	done := make(chan error, 1)
	var stop acp.StopReason
	go func() {
		var err error
		stop, err = s.Prompt(context.Background(), "hang", nil)
		done <- err
	}()
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if _, err := ctl.WaitPrompts(wctx, "a", 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Cancel(wctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil || stop != acp.StopReasonCancelled {
			t.Fatalf("prompt = %q, %v; want cancelled", stop, err)
		}
	case <-wctx.Done():
		t.Fatal("turn did not end after Cancel")
	}
}

func TestPermissionPolicy(t *testing.T) {
	for _, tc := range []struct {
		name    string
		policy  func(context.Context, acp.RequestPermissionRequest) acp.RequestPermissionResponse
		outcome string
		granted bool
	}{
		{"default denies", nil, "reject", false},
		{"explicit allow", func(_ context.Context, r acp.RequestPermissionRequest) acp.RequestPermissionResponse {
			return acpagent.Allow(r)
		}, "allow", true},
		{"cancelled", func(context.Context, acp.RequestPermissionRequest) acp.RequestPermissionResponse {
			return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeCancelled()}
		}, "cancelled", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctl := fakeagent.NewController(t)
			ctl.Queue("a", fakeagent.Turn{fakeagent.AskPermission("rm -rf /"), fakeagent.Say("done")})
			var mu sync.Mutex
			var seen []bool
			c := start(t, ctl, "a", acpagent.Options{
				Permission: tc.policy,
				OnPermission: func(req acp.RequestPermissionRequest, granted bool) {
					mu.Lock()
					seen = append(seen, granted)
					mu.Unlock()
				},
			})
			s := newSession(t, c, nil)
			if _, _, err := prompt(t, s, "do it"); err != nil {
				t.Fatal(err)
			}
			ps := ctl.Permissions("a")
			if len(ps) != 1 || ps[0].Outcome != tc.outcome || ps[0].Title != "rm -rf /" {
				t.Fatalf("agent got %+v, want outcome %q", ps, tc.outcome)
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(seen, []bool{tc.granted}) {
				t.Fatalf("OnPermission saw %v, want [%v]", seen, tc.granted)
			}
		})
	}
}

func TestEnvIsExactlyTheSpec(t *testing.T) {
	t.Setenv("ZOOID_TEST_SECRET", "hunter2")
	ctl := fakeagent.NewController(t)
	spec := agentSpec(t, ctl, "a")
	spec.Env = append(spec.Env, "AGENT_ONLY=yes")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := acpagent.Start(ctx, spec, acpagent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	cwd := t.TempDir()
	s, err := c.NewSession(ctx, cwd, nil)
	if err != nil {
		t.Fatal(err)
	}
	infos := ctl.Sessions("a")
	if len(infos) != 1 {
		t.Fatalf("sessions %+v", infos)
	}
	in := infos[0]
	if in.SessionID != s.ID() || in.Cwd != cwd || in.Pid != c.Pid() {
		t.Fatalf("session info %+v, want id %s cwd %s pid %d", in, s.ID(), cwd, c.Pid())
	}
	if !slices.Contains(in.Env, "AGENT_ONLY=yes") {
		t.Errorf("env %v lacks AGENT_ONLY", in.Env)
	}
	for _, kv := range in.Env {
		if strings.HasPrefix(kv, "ZOOID_TEST_SECRET=") || strings.HasPrefix(kv, "HOME=") {
			t.Errorf("agent inherited %q from the daemon", kv)
		}
	}
	if len(in.Argv) < 2 || in.Argv[1] != "fake-agent" {
		t.Errorf("argv %v", in.Argv)
	}
}

func TestStartFailsOnNonAgent(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := acpagent.Start(ctx, acpagent.Spec{Command: "true"}, acpagent.Options{})
	if !errors.Is(err, acpagent.ErrCrashed) {
		t.Fatalf("err = %v, want ErrCrashed", err)
	}
	_, err = acpagent.Start(ctx, acpagent.Spec{Command: filepath.Join(t.TempDir(), "missing")}, acpagent.Options{})
	if err == nil {
		t.Fatal("starting a missing program succeeded")
	}
}

func TestStderrGoesToLogger(t *testing.T) {
	var buf syncBuffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	script := "echo first line >&2; head -c 10000 /dev/zero | tr '\\0' x >&2; echo >&2; exit 7"
	_, err := acpagent.Start(ctx, acpagent.Spec{Command: "sh", Args: []string{"-c", script}, Env: []string{"PATH=" + os.Getenv("PATH")}}, acpagent.Options{Logger: log})
	if err == nil {
		t.Fatal("sh is not an agent")
	}
	out := buf.String()
	if !strings.Contains(out, "line=\"first line\"") {
		t.Fatalf("first stderr line not logged:\n%s", out)
	}
	if !strings.Contains(out, "truncated=true") || strings.Contains(out, strings.Repeat("x", 4097)) {
		t.Fatalf("long line not truncated to 4096 bytes:\n%.300s", out)
	}
	if !strings.Contains(err.Error(), "exit status 7") {
		t.Fatalf("err %v does not carry the exit status", err)
	}
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	p, err := childproc.Lookup(pid)
	return err == nil && !p.Ended()
}

func TestCloseKillsProcessGroup(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs /proc to find the agent's children")
	}
	ctl := fakeagent.NewController(t)
	c := start(t, ctl, "a", acpagent.Options{})
	// The agent starts this "MCP server" as its own child: a helper that a
	// real agent (npx → node) would leave behind if only the leader died.
	newSession(t, c, []acp.McpServer{{Stdio: &acp.McpServerStdio{Name: "sleeper", Command: "sleep", Args: []string{"300"}, Env: []acp.EnvVariable{}}}})
	var kids []int
	deadline := time.Now().Add(10 * time.Second)
	for len(kids) == 0 && time.Now().Before(deadline) {
		kids = childproc.LiveChildren(c.Pid())
		time.Sleep(20 * time.Millisecond)
	}
	if len(kids) == 0 {
		t.Fatal("agent never started its helper")
	}
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	select {
	case <-c.Done():
	default:
		t.Fatal("Close returned before the process exited")
	}
	if alive(c.Pid()) {
		t.Fatal("agent still alive after Close")
	}
	deadline = time.Now().Add(5 * time.Second)
	for _, k := range kids {
		for alive(k) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(k) {
			t.Fatalf("helper %d survived Close", k)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := c.NewSession(context.Background(), "/", nil); !errors.Is(err, acpagent.ErrClosed) {
		t.Fatalf("new session after close: %v, want ErrClosed", err)
	}
}

func TestCloseDuringTurnIsNotACrash(t *testing.T) {
	ctl := fakeagent.NewController(t)
	ctl.Queue("a", fakeagent.Turn{fakeagent.Hang()})
	c := start(t, ctl, "a", acpagent.Options{})
	closeDuringHangingTurn(t, ctl, c)
}

// closeDuringHangingTurn prompts agent "a" of c with a turn that hangs,
// closes c once the agent has the prompt, and wants the prompt to end with
// ErrClosed, not ErrCrashed.
func closeDuringHangingTurn(t *testing.T, ctl *fakeagent.Controller, c *acpagent.Conn) {
	t.Helper()
	s := newSession(t, c, nil)
	done := make(chan error, 1)
	go func() {
		_, err := s.Prompt(context.Background(), "hang", nil)
		done <- err
	}()
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	if _, err := ctl.WaitPrompts(wctx, "a", 1); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, acpagent.ErrClosed) || errors.Is(err, acpagent.ErrCrashed) {
			t.Fatalf("prompt during Close: %v, want ErrClosed", err)
		}
	case <-wctx.Done():
		t.Fatal("prompt did not return after Close")
	}
}

// TestCloseDuringTurnOfAnAgentThatAnswersCancelled pins the race the test
// above hits now and then: an agent that outlives the end of its input (it
// ignores SIGTERM) ends the hanging turn as cancelled when Close cuts stdin,
// and its answer arrives before it exits. No one asked for that cancel, so
// the turn is ErrClosed, not a reply.
func TestCloseDuringTurnOfAnAgentThatAnswersCancelled(t *testing.T) {
	ctl := fakeagent.NewController(t)
	ctl.Queue("a", fakeagent.Turn{fakeagent.Hang()})
	spec := agentSpec(t, ctl, "a")
	spec.Args = append(spec.Args, "--linger")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := acpagent.Start(ctx, spec, acpagent.Options{KillGrace: 500 * time.Millisecond})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	closeDuringHangingTurn(t, ctl, c)
}

// BenchmarkPromptRoundTrip measures one short turn (prompt, one chunk,
// end_turn) against a real agent process.
func BenchmarkPromptRoundTrip(b *testing.B) {
	ctl, err := fakeagent.StartController("")
	if err != nil {
		b.Fatal(err)
	}
	defer ctl.Close()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	c, err := acpagent.Start(ctx, acpagent.Spec{Command: exe, Args: ctl.Args("bench"), Env: []string{fakeagent.ExecEnv + "=fake-agent"}}, acpagent.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	s, err := c.NewSession(ctx, "/", nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for b.Loop() {
		n := 0
		if _, err := s.Prompt(ctx, "hi", func(u acpagent.Update) { n += len(u.Text) }); err != nil || n == 0 {
			b.Fatalf("prompt: %v (%d bytes)", err, n)
		}
	}
}

// BenchmarkStartAndClose measures spawning, initializing and tearing down an
// agent process: the cost of opening a thread's first session.
func BenchmarkStartAndClose(b *testing.B) {
	ctl, err := fakeagent.StartController("")
	if err != nil {
		b.Fatal(err)
	}
	defer ctl.Close()
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		c, err := acpagent.Start(context.Background(), acpagent.Spec{Command: exe, Args: ctl.Args("bench"), Env: []string{fakeagent.ExecEnv + "=fake-agent"}}, acpagent.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// An agent's command is found on the PATH its own environment gives it, which
// the daemon's PATH need not have: a symlink named like an adapter, in a
// directory only the spec's PATH lists, starts the scripted agent.
func TestCommandIsFoundOnTheAgentsPath(t *testing.T) {
	ctl := fakeagent.NewController(t)
	spec := agentSpec(t, ctl, "a")
	bin := t.TempDir()
	if err := os.Symlink(spec.Command, filepath.Join(bin, "zooid-test-adapter")); err != nil {
		t.Fatal(err)
	}
	spec.Command = "zooid-test-adapter"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := acpagent.Start(ctx, spec, acpagent.Options{}); err == nil {
		t.Fatal("started zooid-test-adapter without its directory on the agent's PATH")
	}
	spec.Env = append(spec.Env, "PATH=/nonexistent:relative/bin:"+bin+":"+os.Getenv("PATH"))
	c, err := acpagent.Start(ctx, spec, acpagent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.NewSession(ctx, t.TempDir(), nil); err != nil {
		t.Fatal(err)
	}
	if infos := ctl.Sessions("a"); len(infos) != 1 || infos[0].Pid != c.Pid() {
		t.Fatalf("sessions %+v, want one from pid %d", infos, c.Pid())
	}
}
