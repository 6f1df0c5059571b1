// Package demoagent is Zooid's built-in demo agent (`preset: demo`, `zooid demo-agent`): an
// ACP agent with no model behind it, so an operator can try the daemon before giving any
// agent a model key. It answers every prompt, and for a few words it asks the daemon
// through the Zooid MCP server session/new hands it (the bridge) and posts what it got:
// "threads", "thread", "history", "who is here", "room", "rooms". It is product code, not
// a test double: it runs in the daemon's own binary, scripted by nobody.
package demoagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	acp "github.com/coder/acp-go-sdk"
	mcpclient "github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/zooid-dev/zooid/zooid/tools"
)

// Name is how the demo agent introduces itself over ACP and MCP.
const Name = "zooid-demo-agent"

// callTimeout bounds starting the MCP server and each tool call; the daemon's own
// tool_timeout (default 30 s) answers first when the homeserver is slow.
const callTimeout = 45 * time.Second

// Main runs the demo agent on stdin and stdout (ACP) until its input ends; diagnostics go
// to stderr. It returns the exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "zooid demo-agent: takes no arguments (it speaks ACP on stdin and stdout), got %q\n", args)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	a := &agent{log: log, stderr: stderr, sessions: map[acp.SessionId]*session{}}
	conn := acp.NewAgentSideConnection(a, stdout, stdin)
	conn.SetLogger(log)
	a.conn = conn
	<-conn.Done()
	a.closeAll()
	return 0
}

type agent struct {
	conn   *acp.AgentSideConnection
	log    *slog.Logger
	stderr io.Writer
	next   atomic.Int64

	mu       sync.Mutex
	sessions map[acp.SessionId]*session
}

// session is one thread's conversation: where to find the Zooid tools, and what the first
// prompt's header said about the thread.
type session struct {
	id      acp.SessionId
	cwd     string
	servers []acp.McpServer

	mu     sync.Mutex
	mcp    *mcpclient.Client // started at the first tool call, closed with the agent
	thread string            // the thread's root, from the session header
	from   string            // who spoke first, from the session header
}

var _ acp.Agent = (*agent)(nil)

func (a *agent) Initialize(context.Context, acp.InitializeRequest) (acp.InitializeResponse, error) {
	resp := acp.InitializeResponse{
		ProtocolVersion: acp.ProtocolVersionNumber,
		AgentInfo:       &acp.Implementation{Name: Name, Version: "1"},
		AuthMethods:     []acp.AuthMethod{},
	}
	// It holds nothing per session worth keeping a process for.
	resp.AgentCapabilities.SessionCapabilities.Close = &acp.SessionCloseCapabilities{}
	return resp, nil
}

func (a *agent) Authenticate(context.Context, acp.AuthenticateRequest) (acp.AuthenticateResponse, error) {
	return acp.AuthenticateResponse{}, nil
}

func (a *agent) NewSession(_ context.Context, req acp.NewSessionRequest) (acp.NewSessionResponse, error) {
	id := acp.SessionId(fmt.Sprintf("demo-%d-%d", os.Getpid(), a.next.Add(1)))
	a.mu.Lock()
	a.sessions[id] = &session{id: id, cwd: req.Cwd, servers: req.McpServers}
	a.mu.Unlock()
	return acp.NewSessionResponse{SessionId: id}, nil
}

func (a *agent) session(id acp.SessionId) *session {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.sessions[id]
}

func (a *agent) CloseSession(_ context.Context, req acp.CloseSessionRequest) (acp.CloseSessionResponse, error) {
	a.mu.Lock()
	s := a.sessions[req.SessionId]
	delete(a.sessions, req.SessionId)
	a.mu.Unlock()
	if s == nil {
		return acp.CloseSessionResponse{}, acp.NewInvalidParams(map[string]any{"error": "no session " + string(req.SessionId)})
	}
	s.close()
	return acp.CloseSessionResponse{}, nil
}

func (a *agent) closeAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.sessions {
		s.close()
	}
}

func (s *session) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mcp != nil {
		_ = s.mcp.Close()
		s.mcp = nil
	}
}

// Cancel has nothing to stop: a turn is one tool call at most, bounded by callTimeout.
func (a *agent) Cancel(context.Context, acp.CancelNotification) error { return nil }

func (a *agent) ListSessions(context.Context, acp.ListSessionsRequest) (acp.ListSessionsResponse, error) {
	return acp.ListSessionsResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionList)
}

func (a *agent) ResumeSession(context.Context, acp.ResumeSessionRequest) (acp.ResumeSessionResponse, error) {
	return acp.ResumeSessionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionResume)
}

func (a *agent) SetSessionConfigOption(context.Context, acp.SetSessionConfigOptionRequest) (acp.SetSessionConfigOptionResponse, error) {
	return acp.SetSessionConfigOptionResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetConfigOption)
}

func (a *agent) SetSessionMode(context.Context, acp.SetSessionModeRequest) (acp.SetSessionModeResponse, error) {
	return acp.SetSessionModeResponse{}, acp.NewMethodNotFound(acp.AgentMethodSessionSetMode)
}

// Prompt answers one message: with a tool's result when the message asks for one, else
// with what the demo can do.
func (a *agent) Prompt(ctx context.Context, req acp.PromptRequest) (acp.PromptResponse, error) {
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
	msg := s.readHeader(text.String())
	c, ok := commandFor(msg)
	if !ok {
		if err := a.say(ctx, s, intro(s.from)); err != nil {
			return acp.PromptResponse{}, err
		}
		return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
	}
	args := c.args
	if c.tool == tools.GetThreadHistory {
		if s.thread == "" {
			err := a.say(ctx, s, "I don't know this thread's id: ask me \"thread\" in a new thread, whose first message tells me.")
			return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, err
		}
		args = map[string]any{"thread_id": s.thread, "limit": 20}
	}
	if err := a.say(ctx, s, fmt.Sprintf("Asking the daemon with %s, through the Zooid MCP server it gave me…", c.tool)); err != nil {
		return acp.PromptResponse{}, err
	}
	result, err := a.call(ctx, s, c.tool, args)
	var answer string
	if err != nil {
		answer = fmt.Sprintf("%s failed: %v", c.tool, err)
	} else {
		answer = c.format(result)
	}
	if err := a.say(ctx, s, answer); err != nil {
		return acp.PromptResponse{}, err
	}
	return acp.PromptResponse{StopReason: acp.StopReasonEndTurn}, nil
}

// readHeader takes the daemon's session header ("[zooid] room: … · thread: $root · from:
// Name (@id)" lines, then a blank line) off a prompt, remembering the thread and the
// speaker, and returns the message itself.
func (s *session) readHeader(text string) string {
	if !strings.HasPrefix(text, "[zooid] ") {
		return text
	}
	header, msg, _ := strings.Cut(text, "\n\n")
	for _, part := range strings.Split(strings.SplitN(header, "\n", 2)[0], " · ") {
		switch {
		case strings.HasPrefix(part, "thread: "):
			s.thread = strings.TrimPrefix(part, "thread: ")
		case strings.HasPrefix(part, "from: "):
			from := strings.TrimPrefix(part, "from: ")
			if name, _, ok := strings.Cut(from, " ("); ok {
				from = name
			}
			s.from = from
		}
	}
	return msg
}

func intro(from string) string {
	hello := "Hello!"
	if from != "" {
		hello = "Hello " + from + "!"
	}
	return hello + " I am Zooid's demo agent: no model behind me, I only show the daemon working. " +
		"Mention me with one of these words and I will ask the daemon through my Zooid tools and post what it says:\n" +
		"- \"who is here\" (zooid_get_members)\n" +
		"- \"threads\" (zooid_get_recent_threads)\n" +
		"- \"thread\" (zooid_get_thread_history of this thread)\n" +
		"- \"history\" (zooid_get_history)\n" +
		"- \"room\" (zooid_get_room_info) or \"rooms\" (zooid_get_rooms)\n" +
		"Reply in this thread without mentioning me and I still answer: the thread is our conversation."
}

func (a *agent) say(ctx context.Context, s *session, text string) error {
	if err := a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: s.id, Update: acp.UpdateAgentMessageText(text)}); err != nil {
		return fmt.Errorf("sending the answer: %w", err)
	}
	return nil
}

// call runs one Zooid tool, announced to the client as an ACP tool call (which also makes
// the daemon post what was said before it as a message of its own).
func (a *agent) call(ctx context.Context, s *session, tool string, args map[string]any) (string, error) {
	callID := acp.ToolCallId(fmt.Sprintf("%s-%d", tool, a.next.Add(1)))
	_ = a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: s.id,
		Update: acp.StartToolCall(callID, tool, acp.WithStartKind(acp.ToolKindFetch), acp.WithStartStatus(acp.ToolCallStatusInProgress), acp.WithStartRawInput(args))})
	out, err := s.callTool(ctx, a.stderr, tool, args)
	status := acp.ToolCallStatusCompleted
	if err != nil {
		status = acp.ToolCallStatusFailed
	}
	_ = a.conn.SessionUpdate(ctx, acp.SessionNotification{SessionId: s.id, Update: acp.UpdateToolCall(callID, acp.WithUpdateStatus(status))})
	return out, err
}

// callTool calls tool on the session's Zooid MCP server, started on first use the way
// agents start theirs: the entry's command, args and env, in the session's cwd. The
// daemon serves it only to this process and its children, so it must be this process
// that starts it.
func (s *session) callTool(ctx context.Context, stderr io.Writer, tool string, args map[string]any) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	cl, err := s.client(ctx, stderr)
	if err != nil {
		return "", err
	}
	var req mcp.CallToolRequest
	req.Params.Name = tool
	req.Params.Arguments = args
	res, err := cl.CallTool(ctx, req)
	if err != nil {
		return "", fmt.Errorf("calling %s: %w", tool, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if tc, ok := mcp.AsTextContent(c); ok {
			text.WriteString(tc.Text)
		}
	}
	if res.IsError {
		return "", errors.New(text.String())
	}
	return text.String(), nil
}

func (s *session) client(ctx context.Context, stderr io.Writer) (*mcpclient.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.mcp != nil {
		return s.mcp, nil
	}
	var entry *acp.McpServerStdio
	for _, srv := range s.servers {
		if srv.Stdio != nil && srv.Stdio.Name == "zooid" {
			entry = srv.Stdio
		}
	}
	if entry == nil {
		return nil, errors.New("session/new gave me no zooid MCP server (an HTTP-bound agent gets none)")
	}
	env := make([]string, 0, len(entry.Env))
	for _, v := range entry.Env {
		env = append(env, v.Name+"="+v.Value)
	}
	cwd := s.cwd
	start := func(ctx context.Context, command string, env []string, args []string) (*exec.Cmd, error) {
		cmd := exec.CommandContext(ctx, command, args...)
		cmd.Env = append(os.Environ(), env...)
		cmd.Dir = cwd
		cmd.Stderr = stderr
		return cmd, nil
	}
	cl, err := mcpclient.NewStdioMCPClientWithOptions(entry.Command, env, entry.Args, transport.WithCommandFunc(start))
	if err != nil {
		return nil, fmt.Errorf("starting the zooid MCP server: %w", err)
	}
	var init mcp.InitializeRequest
	init.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: Name, Version: "1"}
	if _, err := cl.Initialize(ctx, init); err != nil {
		_ = cl.Close()
		return nil, fmt.Errorf("initializing the zooid MCP server: %w", err)
	}
	s.mcp = cl
	return cl, nil
}

// command is a word the demo answers with a tool's result.
type command struct {
	tool   string
	args   map[string]any
	format func(result string) string
}

// commandFor picks the tool a message asks for, by its words; ok is false for any other
// message.
func commandFor(msg string) (command, bool) {
	words := strings.FieldsFunc(strings.ToLower(msg), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r == '-')
	})
	has := func(w ...string) bool {
		for _, x := range words {
			for _, y := range w {
				if x == y {
					return true
				}
			}
		}
		return false
	}
	switch {
	case has("who", "members", "member"):
		return command{tool: tools.GetMembers, format: formatMembers}, true
	case has("threads"):
		return command{tool: tools.GetRecentThreads, args: map[string]any{"limit": 10}, format: formatThreads}, true
	case has("thread"):
		return command{tool: tools.GetThreadHistory, format: formatMessages("This thread")}, true
	case has("history"):
		return command{tool: tools.GetHistory, args: map[string]any{"limit": 10}, format: formatMessages("The room's latest messages")}, true
	case has("rooms"):
		return command{tool: tools.GetRooms, format: formatRooms}, true
	case has("room"):
		return command{tool: tools.GetRoomInfo, format: formatRoom}, true
	}
	return command{}, false
}

func formatMembers(result string) string {
	var r struct {
		Members []struct {
			ID        string `json:"id"`
			Name      string `json:"name"`
			IsAgent   bool   `json:"is_agent"`
			AgentName string `json:"agent_name"`
		} `json:"members"`
	}
	if json.Unmarshal([]byte(result), &r) != nil {
		return "zooid_get_members said: " + result
	}
	var b strings.Builder
	fmt.Fprintf(&b, "In this room (zooid_get_members), %d members:", len(r.Members))
	for _, m := range r.Members {
		fmt.Fprintf(&b, "\n- %s (%s)", m.Name, m.ID)
		if m.IsAgent {
			fmt.Fprintf(&b, ", agent %s", m.AgentName)
		}
	}
	return b.String()
}

func formatThreads(result string) string {
	var r struct {
		Threads []struct {
			Sender     string `json:"sender"`
			Text       string `json:"text"`
			ReplyCount int    `json:"reply_count"`
		} `json:"threads"`
		HasMore bool `json:"has_more"`
	}
	if json.Unmarshal([]byte(result), &r) != nil {
		return "zooid_get_recent_threads said: " + result
	}
	var b strings.Builder
	fmt.Fprintf(&b, "The room's latest threads and messages, newest first (zooid_get_recent_threads):")
	for _, t := range r.Threads {
		fmt.Fprintf(&b, "\n- %s: %s (%d %s)", t.Sender, clip(t.Text), t.ReplyCount, plural(t.ReplyCount, "reply", "replies"))
	}
	if r.HasMore {
		b.WriteString("\n(and older ones)")
	}
	return b.String()
}

func formatMessages(title string) func(string) string {
	return func(result string) string {
		var r struct {
			Messages []struct {
				Sender string `json:"sender"`
				Text   string `json:"text"`
			} `json:"messages"`
		}
		if json.Unmarshal([]byte(result), &r) != nil {
			return title + ": " + result
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s, %d %s:", title, len(r.Messages), plural(len(r.Messages), "message", "messages"))
		for _, m := range r.Messages {
			fmt.Fprintf(&b, "\n- %s: %s", m.Sender, clip(m.Text))
		}
		return b.String()
	}
}

func formatRoom(result string) string {
	var r struct {
		ID, Name, Transport string
	}
	if json.Unmarshal([]byte(result), &r) != nil {
		return "zooid_get_room_info said: " + result
	}
	return fmt.Sprintf("This room (zooid_get_room_info): %s, %s, over %s.", r.Name, r.ID, r.Transport)
}

func formatRooms(result string) string {
	var r struct {
		Rooms []struct{ ID, Name string } `json:"rooms"`
	}
	if json.Unmarshal([]byte(result), &r) != nil {
		return "zooid_get_rooms said: " + result
	}
	var b strings.Builder
	fmt.Fprintf(&b, "The rooms I am bound to and in (zooid_get_rooms):")
	for _, room := range r.Rooms {
		fmt.Fprintf(&b, "\n- %s (%s)", room.Name, room.ID)
	}
	return b.String()
}

// clip keeps a message to one short line.
func clip(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > 80 {
		return string(r[:79]) + "…"
	}
	return s
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
