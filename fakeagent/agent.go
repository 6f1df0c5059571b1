package fakeagent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	acp "github.com/coder/acp-go-sdk"
	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/zooid-dev/zooid/zooid/acpagent"
)

// ExecEnv is the environment variable a test binary checks to run as a child
// program instead of running tests (see ExecIfRequested).
const ExecEnv = "ZOOID_TEST_EXEC"

// ExecIfRequested runs the fake agent and exits when the process was started
// with ExecEnv=fake-agent and arguments "fake-agent ...". Call it first in
// TestMain so os.Executable() can serve as the agent command.
func ExecIfRequested() {
	if os.Getenv(ExecEnv) == "fake-agent" && len(os.Args) > 1 && os.Args[1] == "fake-agent" {
		os.Exit(Main(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
}

// mcpTimeout bounds starting an MCP server and each call to it.
const mcpTimeout = 30 * time.Second

// Main is the agent program: ACP over stdin/stdout, scripted by the
// controller at --control. It returns the exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "fake-agent" {
		args = args[1:]
	}
	fs := flag.NewFlagSet("fake-agent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	control := fs.String("control", "", "controller unix socket (the harness's); or --script")
	script := fs.String("script", "", "a script file of turns in the features' wording (fakeagent.ParseScript), for an agent run by hand")
	name := fs.String("agent", "", "agent name the script is keyed by")
	linger := fs.Bool("linger", false, "ignore SIGTERM and SIGINT, and stay after stdin ends until the controller goes: an agent that won't end")
	closeSessions := fs.Bool("close-sessions", false, "advertise session/close (sessionCapabilities.close) at initialize, as agents built to hold several sessions do")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *name == "" || (*control == "") == (*script == "") {
		fmt.Fprintln(stderr, "fake-agent: --agent and one of --control (a test controller) or --script FILE (turns in the features' wording; scenarios/README.md) are required")
		return 2
	}
	if *script != "" {
		// Run by hand: this process serves itself the controller the harness
		// would, queued with the file's turns for this agent.
		self, err := scriptController(*script, *name)
		if err != nil {
			fmt.Fprintf(stderr, "fake-agent: %v\n", err)
			return 2
		}
		defer self.Close()
		*control = self.Socket()
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if *linger {
		signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
	}
	ctl, err := dialControl(*control, *name)
	if err != nil {
		fmt.Fprintf(stderr, "fake-agent: %v\n", err)
		return 2
	}
	defer ctl.close()
	wd, _ := os.Getwd()
	if err := ctl.call("hello", hello{Pid: os.Getpid(), Argv: os.Args, Env: os.Environ(), Wd: wd}, nil); err != nil {
		fmt.Fprintf(stderr, "fake-agent: %v\n", err)
		return 2
	}

	a := &agent{ctl: ctl, log: log, stderr: stderr, sessions: map[acp.SessionId]*session{}, ready: make(chan struct{}), closeSessions: *closeSessions}
	gate := acpagent.NewGatedReader(stdin)
	conn := acp.NewAgentSideConnection(a, stdout, gate)
	conn.SetLogger(log)
	gate.Open()
	a.conn = conn
	close(a.ready)
	<-conn.Done()
	a.shutdown()
	if *linger {
		// Like an agent that ignores the end of its input and SIGTERM: only
		// SIGKILL (or the controller going away) ends it.
		_, _ = io.Copy(io.Discard, ctl.conn)
	}
	return 0
}

// scriptController starts a controller in this process holding the turns the
// script file at path gives agent.
func scriptController(path, agent string) (*Controller, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening the script: %w", err)
	}
	defer f.Close()
	turns, err := ParseScript(f, path)
	if err != nil {
		return nil, err
	}
	c, err := StartController("")
	if err != nil {
		return nil, err
	}
	c.Queue(agent, turns[agent]...)
	return c, nil
}

// control is the agent's end of the control socket: synchronous calls, so
// every observation is recorded before the agent goes on.
type control struct {
	agent string
	mu    sync.Mutex
	conn  net.Conn
	rd    *bufio.Scanner
	next  int64
}

func dialControl(sock, agent string) (*control, error) {
	conn, err := net.Dial("unix", sock)
	if err != nil {
		return nil, fmt.Errorf("dialing controller: %w", err)
	}
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	return &control{agent: agent, conn: conn, rd: sc}, nil
}

func (c *control) close() { _ = c.conn.Close() }

func (c *control) call(op string, data any, reply *message) error {
	raw, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("control %s: %w", op, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.next++
	line, err := json.Marshal(message{ID: c.next, Op: op, Agent: c.agent, Data: raw})
	if err != nil {
		return fmt.Errorf("control %s: %w", op, err)
	}
	if _, err := c.conn.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("control %s: %w", op, err)
	}
	if !c.rd.Scan() {
		err := c.rd.Err()
		if err == nil {
			err = io.EOF
		}
		return fmt.Errorf("control %s: reading reply: %w", op, err)
	}
	var m message
	if err := json.Unmarshal(c.rd.Bytes(), &m); err != nil {
		return fmt.Errorf("control %s: %w", op, err)
	}
	if m.Err != "" {
		return fmt.Errorf("control %s: %s", op, m.Err)
	}
	if reply != nil {
		*reply = m
	}
	return nil
}

type agent struct {
	ctl    *control
	log    *slog.Logger
	stderr io.Writer
	conn   *acp.AgentSideConnection
	ready  chan struct{} // closed once conn is set; handlers may run before that
	nextID atomic.Int64

	mu       sync.Mutex
	sessions map[acp.SessionId]*session

	closeSessions bool // advertises session/close
}

type session struct {
	id  acp.SessionId
	cwd string
	// servers are the session's MCP server entries (Raw calls start a
	// bridge of their own from the first).
	servers []acp.McpServer

	mcpReady chan struct{} // closed when every MCP server was started (or failed)
	mcps     []*mcpConn    // written before mcpReady closes

	mu         sync.Mutex
	cancelTurn context.CancelFunc // non-nil while a turn runs
}

type mcpConn struct {
	name   string
	client *mcpclient.Client
	tools  []string
}

var _ acp.Agent = (*agent)(nil)

func (a *agent) shutdown() {
	a.mu.Lock()
	ss := make([]*session, 0, len(a.sessions))
	for _, s := range a.sessions {
		ss = append(ss, s)
	}
	a.mu.Unlock()
	for _, s := range ss {
		<-s.mcpReady
		for _, m := range s.mcps {
			_ = m.client.Close()
		}
	}
}

func (a *agent) Initialize(ctx context.Context, req acp.InitializeRequest) (acp.InitializeResponse, error) {
	resp := acp.InitializeResponse{
		ProtocolVersion: acp.ProtocolVersionNumber,
		AgentInfo:       &acp.Implementation{Name: "zooid-fake-agent", Version: "0"},
		AuthMethods:     []acp.AuthMethod{},
	}
	if a.closeSessions {
		resp.AgentCapabilities.SessionCapabilities.Close = &acp.SessionCloseCapabilities{}
	}
	return resp, nil
}

func (a *agent) Authenticate(ctx context.Context, req acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}

func (a *agent) NewSession(ctx context.Context, req acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	id := acp.SessionId(fmt.Sprintf("fake-%d-%d", os.Getpid(), a.nextID.Add(1)))
	s := &session{id: id, cwd: req.Cwd, servers: req.McpServers, mcpReady: make(chan struct{})}
	a.mu.Lock()
	a.sessions[id] = s
	a.mu.Unlock()
	if err := a.ctl.call("session", SessionInfo{SessionID: id, Cwd: req.Cwd, McpServers: req.McpServers}, nil); err != nil {
		return acp.NewSessionResponse{}, err
	}
	// Real agents bring their MCP servers up alongside the session; doing it in
	// the background also keeps session/new from waiting on the daemon.
	go a.startMCP(s, req.McpServers)
	return acp.NewSessionResponse{SessionId: id}, nil
}

func (a *agent) startMCP(s *session, servers []acp.McpServer) {
	defer close(s.mcpReady)
	for _, srv := range servers {
		if srv.Stdio == nil {
			a.report("mcp_error", MCPError{SessionID: s.id, Err: "only stdio MCP servers are supported"})
			continue
		}
		m, err := a.dialMCP(s.cwd, srv.Stdio)
		if err != nil {
			a.report("mcp_error", MCPError{SessionID: s.id, Server: srv.Stdio.Name, Err: err.Error()})
			continue
		}
		s.mcps = append(s.mcps, m)
		a.report("tool_list", m.tools)
	}
}

// dialMCP starts one stdio MCP server the way agents do: the entry's command
// and args, the agent's environment plus the entry's env, in the session cwd.
func (a *agent) dialMCP(cwd string, e *acp.McpServerStdio) (*mcpConn, error) {
	env := make([]string, 0, len(e.Env))
	for _, v := range e.Env {
		env = append(env, v.Name+"="+v.Value)
	}
	cmdFunc := func(ctx context.Context, command string, env []string, args []string) (*exec.Cmd, error) {
		cmd := exec.CommandContext(ctx, command, args...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Dir = cwd
		cmd.Stderr = a.stderr
		return cmd, nil
	}
	cl, err := mcpclient.NewStdioMCPClientWithOptions(e.Command, env, e.Args, transport.WithCommandFunc(cmdFunc))
	if err != nil {
		return nil, fmt.Errorf("starting MCP server %s: %w", e.Name, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), mcpTimeout)
	defer cancel()
	var init mcp.InitializeRequest
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "zooid-fake-agent", Version: "0"}
	if _, err := cl.Initialize(ctx, init); err != nil {
		_ = cl.Close()
		return nil, fmt.Errorf("initializing MCP server %s: %w", e.Name, err)
	}
	m := &mcpConn{name: e.Name, client: cl}
	names, err := m.list(ctx)
	if err != nil {
		_ = cl.Close()
		return nil, err
	}
	m.tools = names
	return m, nil
}

func (m *mcpConn) list(ctx context.Context) ([]string, error) {
	res, err := m.client.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return nil, fmt.Errorf("listing tools of MCP server %s: %w", m.name, err)
	}
	names := make([]string, 0, len(res.Tools))
	for _, t := range res.Tools {
		names = append(names, t.Name)
	}
	return names, nil
}

// report sends an observation; a broken control socket only gets logged
// because the test will notice the missing observation anyway.
func (a *agent) report(op string, data any) {
	if err := a.ctl.call(op, data, nil); err != nil {
		a.log.Warn("reporting to controller", "op", op, "err", err)
	}
}

func (a *agent) session(id acp.SessionId) *session {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sessions[id]
}

func (a *agent) Cancel(ctx context.Context, n acp.CancelNotification) error {
	a.report("cancel", Cancel{SessionID: n.SessionId})
	if s := a.session(n.SessionId); s != nil {
		s.mu.Lock()
		if s.cancelTurn != nil {
			s.cancelTurn()
		}
		s.mu.Unlock()
	}
	return nil
}

func (a *agent) Prompt(ctx context.Context, req acp.PromptRequest) (acp.PromptResponse, error) {
	<-a.ready
	s := a.session(req.SessionId)
	if s == nil {
		return acp.PromptResponse{}, acp.NewInvalidParams(map[string]any{"error": "unknown session " + string(req.SessionId)})
	}
	var text strings.Builder
	for _, b := range req.Prompt {
		if b.Text != nil {
			text.WriteString(b.Text.Text)
		}
	}
	var reply message
	if err := a.ctl.call("prompt", Prompt{SessionID: s.id, Text: text.String()}, &reply); err != nil {
		return acp.PromptResponse{}, acp.NewInternalError(map[string]any{"error": err.Error()})
	}

	tctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s.mu.Lock()
	s.cancelTurn = cancel
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.cancelTurn = nil
		s.mu.Unlock()
	}()

	stop, err := a.run(tctx, s, reply.Turn)
	if tctx.Err() != nil {
		// ACP: a cancelled turn must end with the cancelled stop reason.
		return acp.PromptResponse{StopReason: acp.StopReasonCancelled}, nil
	}
	if err != nil {
		return acp.PromptResponse{}, acp.NewInternalError(map[string]any{"error": err.Error()})
	}
	return acp.PromptResponse{StopReason: stop}, nil
}

// untilReleased asks the controller, every few milliseconds, whether the
// scenario has released this agent yet. Asking rather than blocking keeps the
// one control connection free for the turn's other reports.
func (a *agent) untilReleased(ctx context.Context) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		var reply message
		if err := a.ctl.call("released", nil, &reply); err != nil {
			return err
		}
		var open bool
		if err := json.Unmarshal(reply.Data, &open); err != nil {
			return fmt.Errorf("control released: %w", err)
		}
		if open {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (a *agent) run(ctx context.Context, s *session, turn Turn) (acp.StopReason, error) {
	for _, act := range turn {
		if act.UntilReleased {
			if err := a.untilReleased(ctx); err != nil {
				if ctx.Err() != nil {
					return acp.StopReasonCancelled, nil
				}
				return "", err
			}
		}
		if act.Wait > 0 {
			t := time.NewTimer(act.Wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return acp.StopReasonCancelled, nil
			}
		}
		if act.Say != "" {
			if err := a.say(ctx, s, act.Say); err != nil {
				return "", err
			}
		}
		for _, part := range act.Chunks {
			if err := a.say(ctx, s, part); err != nil {
				return "", err
			}
		}
		if act.ListTools {
			if err := a.listTools(ctx, s); err != nil {
				return "", err
			}
		}
		if act.CallTool != "" && act.Raw {
			a.callToolRaw(ctx, s, act.CallTool, act.Args, max(1, act.Repeat))
		}
		for i := 0; act.CallTool != "" && !act.Raw && i < max(1, act.Repeat); i++ {
			if err := a.callTool(ctx, s, act.CallTool, act.Args); err != nil {
				return "", err
			}
		}
		for _, target := range act.Reach {
			a.report("reach", Try(target))
		}
		if act.Permission != "" {
			a.askPermission(ctx, s, act.Permission)
		}
		if act.ReadFile != "" {
			pr := Probe{SessionID: s.id, Op: "read_file", Path: act.ReadFile}
			if b, err := os.ReadFile(act.ReadFile); err != nil {
				pr.Err = err.Error()
			} else {
				pr.Out = string(b)
			}
			a.report("probe", pr)
		}
		if act.Dial != "" {
			pr := Probe{SessionID: s.id, Op: "dial", Path: act.Dial}
			if c, err := net.DialTimeout("unix", act.Dial, 5*time.Second); err != nil {
				pr.Err = err.Error()
			} else {
				_ = c.Close()
			}
			a.report("probe", pr)
		}
		if len(act.Run) > 0 {
			a.report("probe", run(ctx, s.id, act.Run))
		}
		if act.Crash {
			os.Exit(3)
		}
		if act.Hang {
			<-ctx.Done()
			return acp.StopReasonCancelled, nil
		}
		if act.Stop != "" {
			return act.Stop, nil
		}
		if ctx.Err() != nil {
			return acp.StopReasonCancelled, nil
		}
	}
	return acp.StopReasonEndTurn, nil
}

func (a *agent) say(ctx context.Context, s *session, text string) error {
	err := a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: s.id, Update: acp.UpdateAgentMessageText(text)})
	if err != nil {
		return fmt.Errorf("sending chunk: %w", err)
	}
	return nil
}

func (a *agent) waitMCP(ctx context.Context, s *session) error {
	select {
	case <-s.mcpReady:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (a *agent) listTools(ctx context.Context, s *session) error {
	if err := a.waitMCP(ctx, s); err != nil {
		return nil // cancelled; Prompt reports the cancelled stop
	}
	var names []string
	for _, m := range s.mcps {
		lctx, cancel := context.WithTimeout(ctx, mcpTimeout)
		got, err := m.list(lctx)
		cancel()
		if err != nil {
			a.report("mcp_error", MCPError{SessionID: s.id, Server: m.name, Err: err.Error()})
			continue
		}
		names = append(names, got...)
	}
	if names == nil {
		names = []string{}
	}
	a.report("tool_list", names)
	return nil
}

func (a *agent) callTool(ctx context.Context, s *session, name string, args map[string]any) error {
	if err := a.waitMCP(ctx, s); err != nil {
		return nil
	}
	res := ToolResult{SessionID: s.id, Tool: name, Args: args}
	var target *mcpConn
	for _, m := range s.mcps {
		for _, t := range m.tools {
			if t == name {
				target = m
			}
		}
		if target != nil {
			break
		}
	}
	if target == nil && len(s.mcps) > 0 {
		// A real client may call a tool it was not offered (a stale list, a
		// model guessing): the server must refuse it, so send it to the first.
		target = s.mcps[0]
	}
	if target == nil {
		res.Err = fmt.Sprintf("no MCP server in this session to offer tool %q", name)
		a.report("tool_result", res)
		return nil
	}
	callID := acp.ToolCallId(fmt.Sprintf("call-%d", a.nextID.Add(1)))
	start := acp.StartToolCall(callID, name, acp.WithStartKind(acp.ToolKindOther),
		acp.WithStartStatus(acp.ToolCallStatusInProgress), acp.WithStartRawInput(args))
	if err := a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: s.id, Update: start}); err != nil {
		return fmt.Errorf("sending tool call: %w", err)
	}

	var req mcp.CallToolRequest
	req.Params.Name = name
	req.Params.Arguments = args
	cctx, cancel := context.WithTimeout(ctx, mcpTimeout)
	t0 := time.Now()
	out, err := target.client.CallTool(cctx, req)
	res.Elapsed = time.Since(t0)
	cancel()
	status := acp.ToolCallStatusCompleted
	switch {
	case err != nil:
		res.Err = err.Error()
		res.InvalidParams = errors.Is(err, mcp.ErrInvalidParams)
		status = acp.ToolCallStatusFailed
	default:
		res.IsError = out.IsError
		res.Structured = out.StructuredContent
		var texts []string
		for _, c := range out.Content {
			if tc, ok := mcp.AsTextContent(c); ok {
				texts = append(texts, tc.Text)
			}
		}
		res.Text = strings.Join(texts, "\n")
		if out.IsError {
			status = acp.ToolCallStatusFailed
		}
	}
	a.report("tool_result", res)
	upd := acp.UpdateToolCall(callID, acp.WithUpdateStatus(status), acp.WithUpdateRawOutput(res))
	if err := a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: s.id, Update: upd}); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("sending tool call update: %w", err)
	}
	return nil
}

func (a *agent) askPermission(ctx context.Context, s *session, title string) {
	callID := acp.ToolCallId(fmt.Sprintf("perm-%d", a.nextID.Add(1)))
	resp, err := a.conn.RequestPermission(ctx, acp.RequestPermissionRequest{
		SessionId: s.id,
		ToolCall:  acp.ToolCallUpdate{ToolCallId: callID, Title: &title},
		Options: []acp.PermissionOption{
			{Kind: acp.PermissionOptionKindAllowOnce, Name: "Allow", OptionId: "allow"},
			{Kind: acp.PermissionOptionKindRejectOnce, Name: "Reject", OptionId: "reject"},
		},
	})
	out := PermissionResult{SessionID: s.id, Title: title}
	switch {
	case err != nil:
		out.Outcome = "error: " + err.Error()
	case resp.Outcome.Selected != nil:
		out.Outcome = string(resp.Outcome.Selected.OptionId)
	default:
		out.Outcome = "cancelled"
	}
	a.report("permission", out)
}

func (a *agent) CloseSession(ctx context.Context, req acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	if !a.closeSessions {
		return acp.CloseSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionClose)
	}
	a.mu.Lock()
	_, ok := a.sessions[req.SessionId]
	delete(a.sessions, req.SessionId)
	a.mu.Unlock()
	if !ok {
		return acp.CloseSessionResponse{}, acp.NewInvalidParams(map[string]any{"error": "no session " + string(req.SessionId)})
	}
	a.report("closed", Closed{SessionID: req.SessionId})
	return acp.CloseSessionResponse{}, nil
}

func (a *agent) ListSessions(ctx context.Context, req acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	return acp.ListSessionsResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionList)
}

func (a *agent) ResumeSession(ctx context.Context, req acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	return acp.ResumeSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionResume)
}

func (a *agent) SetSessionConfigOption(ctx context.Context, req acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	return acp.SetSessionConfigOptionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetConfigOption)
}

func (a *agent) SetSessionMode(ctx context.Context, req acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return acp.SetSessionModeResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetMode)
}
