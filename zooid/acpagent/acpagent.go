// Package acpagent talks ACP over stdio to one coding-agent child process: it
// spawns the process, initializes it, opens sessions, streams prompt turns,
// cancels them, answers permission requests by policy and notices crashes.
package acpagent

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// ErrCrashed is wrapped by errors returned when the agent process dies (or
// closes its output) while a request is outstanding.
var ErrCrashed = errors.New("agent process exited")

// ErrClosed is returned by calls made after Close.
var ErrClosed = errors.New("agent connection closed")

// Spec says how to run an agent process.
type Spec struct {
	// Command is the program to run. Without a slash it is looked up on the
	// PATH of Env first, then on the daemon's.
	Command string
	// Args are the arguments after the command name.
	Args []string
	// Env is the whole environment of the child as KEY=VALUE pairs. Nothing is
	// inherited from the daemon: nil means an empty environment, so secrets
	// reach an agent only when the daemon puts them here.
	Env []string
	// Dir is the working directory of the process; empty means the daemon's.
	Dir string
	// Credential, when set, starts the process as that uid, gid and
	// supplementary groups (the agent's user:); the daemon must be allowed
	// to switch (root, or CAP_SETUID and CAP_SETGID).
	Credential *syscall.Credential
}

// Options tune a connection. The zero value is usable: permission requests
// are denied and nothing is logged.
type Options struct {
	// Logger receives the child's stderr (line by line) and protocol events.
	Logger *slog.Logger
	// Permission decides session/request_permission; nil means deny (select
	// the reject option, or cancelled when none). The daemon posts a notice
	// when it denies.
	Permission func(ctx context.Context, req acp.RequestPermissionRequest) acp.RequestPermissionResponse
	// OnPermission observes every decision; optional.
	OnPermission func(req acp.RequestPermissionRequest, granted bool)
	// CancelWait bounds how long Prompt waits for the agent's cancelled stop
	// after its context ended and session/cancel was sent. Default 5s.
	CancelWait time.Duration
	// KillGrace is how long Close waits after SIGTERM before SIGKILL. Default 3s.
	KillGrace time.Duration
}

// Update is one session/update notification seen during a prompt turn.
type Update struct {
	// Text is the text of an agent_message_chunk; empty for other updates.
	Text string
	// ToolCall is set for a tool_call update.
	ToolCall *acp.SessionUpdateToolCall
	// ToolCallUpdate is set for a tool_call_update update.
	ToolCallUpdate *acp.SessionToolCallUpdate
	// Raw is the whole update, kept for logs.
	Raw acp.SessionUpdate
}

// Conn is one running agent process and its ACP connection.
type Conn struct {
	log  *slog.Logger
	opts Options
	cmd  *exec.Cmd
	pid  int
	env  []string
	// authMethods are those initialize offered, for NewSession's one retry
	// after authenticate (see envAuthMethod).
	authMethods []acp.AuthMethod
	// caps are what the agent said it can at initialize.
	caps acp.AgentCapabilities
	acp  *acp.ClientSideConnection

	stdin io.Closer
	out   *updateCounter
	// delivered counts session/update notifications handled, to compare with
	// out.updates when draining after a crash.
	delivered atomic.Int64

	done    chan struct{}
	exitErr error // set before done is closed

	mu       sync.Mutex
	sessions map[acp.SessionId]*Session
	closed   bool

	closeOnce sync.Once
	closeErr  error
}

// stderrLineMax bounds one logged stderr line so a runaway agent cannot blow
// up the daemon's logs or memory.
const stderrLineMax = 4096

// Start spawns the agent and runs initialize (protocol version 1, no fs and no
// terminal capabilities). ctx bounds the start-up only, not the process life;
// call Close to stop the process.
func Start(ctx context.Context, spec Spec, opts Options) (*Conn, error) {
	if spec.Command == "" {
		return nil, errors.New("starting agent: empty command")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.CancelWait <= 0 {
		opts.CancelWait = 5 * time.Second
	}
	if opts.KillGrace <= 0 {
		opts.KillGrace = 3 * time.Second
	}

	cmd := exec.Command(lookCommand(spec.Command, spec.Env), spec.Args...)
	cmd.Env = spec.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.Dir = spec.Dir
	cmd.SysProcAttr = sysProcAttr()
	cmd.SysProcAttr.Credential = spec.Credential

	// Own pipes (not cmd.StdoutPipe) so that cmd.Wait never races our readers
	// and output written just before a crash is still read.
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("starting agent: stdin pipe: %w", err)
	}
	stdoutR, stdoutW, err := os.Pipe()
	if err != nil {
		closeAll(stdinR, stdinW)
		return nil, fmt.Errorf("starting agent: stdout pipe: %w", err)
	}
	stderrR, stderrW, err := os.Pipe()
	if err != nil {
		closeAll(stdinR, stdinW, stdoutR, stdoutW)
		return nil, fmt.Errorf("starting agent: stderr pipe: %w", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, stdoutW, stderrW
	if err := cmd.Start(); err != nil {
		closeAll(stdinR, stdinW, stdoutR, stdoutW, stderrR, stderrW)
		return nil, fmt.Errorf("starting agent %s: %w", spec.Command, err)
	}
	closeAll(stdinR, stdoutW, stderrW)

	c := &Conn{
		opts:     opts,
		cmd:      cmd,
		pid:      cmd.Process.Pid,
		env:      cmd.Env,
		stdin:    stdinW,
		done:     make(chan struct{}),
		sessions: map[acp.SessionId]*Session{},
	}
	c.log = opts.Logger.With("pid", c.pid)
	c.out = newUpdateCounter(stdoutR)
	gate := NewGatedReader(c.out)
	c.acp = acp.NewClientSideConnection(&client{c: c}, stdinW, gate)
	c.acp.SetLogger(c.log)
	gate.Open()

	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		logLines(c.log, stderrR)
	}()
	go c.wait(stdoutR, stderrR, stdinW, stderrDone)

	c.log.Info("agent started", "command", spec.Command, "args", spec.Args)

	init, err := c.acp.Initialize(ctx, acp.InitializeRequest{
		ProtocolVersion: acp.ProtocolVersionNumber,
		ClientCapabilities: acp.ClientCapabilities{
			Fs:       acp.FileSystemCapabilities{ReadTextFile: false, WriteTextFile: false},
			Terminal: false,
		},
		ClientInfo: &acp.Implementation{Name: "zooid", Version: "0"},
	})
	if err != nil {
		err = c.classify(err)
		_ = c.Close()
		return nil, fmt.Errorf("initializing agent %s: %w", spec.Command, err)
	}
	c.authMethods = init.AuthMethods
	c.caps = init.AgentCapabilities
	return c, nil
}

// wait owns the process: it reaps it, lets the protocol reader drain what was
// written before the exit, then releases the pipes and closes done.
func (c *Conn) wait(stdoutR, stderrR *os.File, stdinW io.Closer, stderrDone <-chan struct{}) {
	err := c.cmd.Wait()
	if err != nil {
		err = fmt.Errorf("agent pid %d: %w", c.pid, err)
	}
	c.exitErr = err
	c.log.Info("agent exited", "err", err)
	// A helper that inherited stdout may keep it open; bound the wait.
	t := time.NewTimer(2 * time.Second)
	select {
	case <-c.acp.Done():
	case <-t.C:
	}
	t.Stop()
	_ = stdoutR.Close()
	t = time.NewTimer(time.Second)
	select {
	case <-stderrDone:
	case <-t.C:
	}
	t.Stop()
	_ = stderrR.Close()
	<-stderrDone
	_ = stdinW.Close()
	close(c.done)
}

// logLines copies r to the logger a line at a time, truncating long lines.
func logLines(log *slog.Logger, r io.Reader) {
	br := bufio.NewReaderSize(r, stderrLineMax)
	var line []byte
	truncated := false
	for {
		part, isPrefix, err := br.ReadLine()
		if len(part) > 0 {
			if room := stderrLineMax - len(line); room > 0 {
				if len(part) > room {
					part, truncated = part[:room], true
				}
				line = append(line, part...)
			} else {
				truncated = true
			}
		}
		if err != nil {
			if len(line) > 0 {
				log.Info("agent stderr", "line", string(line), "truncated", truncated)
			}
			return
		}
		if !isPrefix {
			log.Info("agent stderr", "line", string(line), "truncated", truncated)
			line, truncated = line[:0], false
		}
	}
}

// Pid is the process id of the agent.
func (c *Conn) Pid() int { return c.pid }

// Done is closed when the process has exited and its output is drained.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err says why the process exited (exit status or signal) once Done is
// closed; nil before that and for a clean exit with status 0.
func (c *Conn) Err() error {
	select {
	case <-c.done:
		return c.exitErr
	default:
		return nil
	}
}

// Close terminates the agent: it closes stdin, sends SIGTERM to the process
// group, then SIGKILL after the grace period, and waits for the exit. It is
// idempotent and safe to call concurrently.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.mu.Unlock()
		_ = c.stdin.Close()
		if err := c.signalGroup(syscall.SIGTERM); err != nil {
			c.closeErr = err
		}
		t := time.NewTimer(c.opts.KillGrace)
		select {
		case <-c.done:
		case <-t.C:
			c.log.Warn("agent ignored SIGTERM; killing")
		}
		t.Stop()
		// Also after a clean exit: helpers left in the group must not outlive it.
		if err := c.signalGroup(syscall.SIGKILL); err != nil && c.closeErr == nil {
			c.closeErr = err
		}
		<-c.done
	})
	return c.closeErr
}

func (c *Conn) signalGroup(sig syscall.Signal) error {
	err := syscall.Kill(-c.pid, sig)
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("signalling agent group %d: %w", c.pid, err)
	}
	return nil
}

// drainUpdates waits (bounded) until every session/update the agent wrote
// before its output ended has been delivered: the protocol library hands
// queued notifications over after it has already failed the pending request,
// and chunks sent just before a crash belong to the turn.
func (c *Conn) drainUpdates() {
	deadline := time.Now().Add(5 * time.Second)
	select {
	case <-c.out.eof:
	case <-time.After(time.Until(deadline)):
		return
	}
	for c.delivered.Load() < c.out.updates.Load() && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
}

// isClosed reports whether Close has begun.
func (c *Conn) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// exited reports whether the process or its protocol stream has ended.
func (c *Conn) exited() bool {
	select {
	case <-c.done:
		return true
	case <-c.acp.Done():
		return true
	default:
		return false
	}
}

// classify turns a request error into one wrapping ErrCrashed when the cause
// is the process going away.
func (c *Conn) classify(err error) error {
	if err == nil {
		return nil
	}
	// A write to a dead process can fail before the reader notices EOF.
	t := time.NewTimer(200 * time.Millisecond)
	defer t.Stop()
	select {
	case <-c.done:
	case <-c.acp.Done():
	case <-t.C:
		return err
	}
	if c.isClosed() {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	t2 := time.NewTimer(3 * time.Second)
	defer t2.Stop()
	select {
	case <-c.done:
		if c.exitErr != nil {
			return fmt.Errorf("%w: %w", ErrCrashed, c.exitErr)
		}
		return fmt.Errorf("%w: exit status 0", ErrCrashed)
	case <-t2.C:
		return fmt.Errorf("%w: agent closed its output", ErrCrashed)
	}
}

// NewSession runs session/new with the given working directory and MCP
// servers.
func (c *Conn) NewSession(ctx context.Context, cwd string, mcpServers []acp.McpServer) (*Session, error) {
	if c.isClosed() {
		return nil, ErrClosed
	}
	if c.exited() {
		return nil, fmt.Errorf("new session: %w", c.classify(ErrCrashed))
	}
	if mcpServers == nil {
		mcpServers = []acp.McpServer{}
	}
	req := acp.NewSessionRequest{Cwd: cwd, McpServers: mcpServers}
	resp, err := c.acp.NewSession(ctx, req)
	if m := c.envAuthMethod(); m != "" && authRequired(err) {
		// The agent wants authenticate first and offers a method whose
		// variables its environment has (an API key in acp.env or
		// inherit_env): choose it, as an editor would, and ask once more.
		c.log.Info("agent asked for authentication; using the method its environment provides", "method", m)
		if _, aerr := c.acp.Authenticate(ctx, acp.AuthenticateRequest{MethodId: m}); aerr != nil {
			return nil, fmt.Errorf("new session: authenticate with %s: %w", m, c.classify(aerr))
		}
		resp, err = c.acp.NewSession(ctx, req)
	}
	if err != nil {
		return nil, fmt.Errorf("new session: %w", c.classify(err))
	}
	s := &Session{c: c, id: resp.SessionId, turn: make(chan struct{}, 1)}
	c.mu.Lock()
	c.sessions[s.id] = s
	c.mu.Unlock()
	c.log.Info("agent session opened", "session", s.id, "cwd", cwd)
	return s, nil
}

// Close ends the session in the agent with session/close, so it can free
// what the session holds; the process goes on with its other sessions. Only
// for an agent whose Capabilities say it can (SessionCapabilities.Close).
func (s *Session) Close(ctx context.Context) error {
	if s.c.caps.SessionCapabilities.Close == nil {
		return fmt.Errorf("session/close: the agent does not advertise it")
	}
	if _, err := s.c.acp.CloseSession(ctx, acp.CloseSessionRequest{SessionId: s.id}); err != nil {
		return fmt.Errorf("session/close: %w", s.c.classify(err))
	}
	s.c.mu.Lock()
	delete(s.c.sessions, s.id)
	s.c.mu.Unlock()
	return nil
}

func (c *Conn) session(id acp.SessionId) *Session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[id]
}

// Session is one ACP session on a Conn. Turns on a session are serialised.
type Session struct {
	c    *Conn
	id   acp.SessionId
	turn chan struct{} // one-slot semaphore: a turn in progress

	hmu     sync.Mutex // held while delivering updates, so none arrive after Prompt returns
	handler func(Update)
}

// ID is the agent's session id.
func (s *Session) ID() acp.SessionId { return s.id }

// Capabilities are what the agent advertised when it was initialized.
func (c *Conn) Capabilities() acp.AgentCapabilities { return c.caps }

// Prompt sends one text prompt and streams updates to onUpdate (called from
// one goroutine, in order, never after Prompt returns) until the agent ends
// the turn. It returns the agent's stop reason. When the process dies
// mid-turn the error wraps ErrCrashed; when Close ends the turn, ErrClosed
// (also if the agent answered it as cancelled). When ctx ends it sends
// session/cancel, waits briefly for the agent's cancelled stop and returns
// ctx.Err().
func (s *Session) Prompt(ctx context.Context, text string, onUpdate func(Update)) (acp.StopReason, error) {
	select {
	case s.turn <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-s.turn }()

	c := s.c
	if c.isClosed() {
		return "", ErrClosed
	}
	if c.exited() {
		return "", fmt.Errorf("prompt: %w", c.classify(ErrCrashed))
	}

	s.setHandler(onUpdate)
	defer s.setHandler(nil)

	// The request outlives ctx so the agent can still report its cancelled stop.
	pctx, pcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer pcancel()
	type result struct {
		resp acp.PromptResponse
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		r, err := c.acp.Prompt(pctx, acp.PromptRequest{SessionId: s.id, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
		ch <- result{r, err}
	}()

	select {
	case r := <-ch:
		if r.err != nil {
			err := c.classify(r.err)
			if errors.Is(err, ErrCrashed) || errors.Is(err, ErrClosed) {
				c.drainUpdates()
			}
			return "", fmt.Errorf("prompt: %w", err)
		}
		if r.resp.StopReason == acp.StopReasonCancelled && c.isClosed() {
			// Nobody asked for this cancel: an agent whose input Close just
			// cut may end its turn as cancelled before it exits. The turn did
			// not finish, and the caller must not take it as a reply.
			return "", fmt.Errorf("prompt: agent stopped its turn as the connection closed: %w", ErrClosed)
		}
		return r.resp.StopReason, nil
	case <-ctx.Done():
	}

	cctx, ccancel := context.WithTimeout(context.Background(), c.opts.CancelWait)
	defer ccancel()
	if err := c.acp.Cancel(cctx, acp.CancelNotification{SessionId: s.id}); err != nil {
		c.log.Warn("sending session/cancel", "session", s.id, "err", err)
	}
	select {
	case r := <-ch:
		c.log.Info("agent turn cancelled", "session", s.id, "stop", r.resp.StopReason, "err", r.err)
	case <-cctx.Done():
		c.log.Warn("agent did not stop after session/cancel", "session", s.id)
		pcancel()
		<-ch
	}
	return "", ctx.Err()
}

// Cancel sends session/cancel for this session.
func (s *Session) Cancel(ctx context.Context) error {
	if err := s.c.acp.Cancel(ctx, acp.CancelNotification{SessionId: s.id}); err != nil {
		return fmt.Errorf("session/cancel: %w", err)
	}
	return nil
}

func (s *Session) setHandler(h func(Update)) {
	s.hmu.Lock()
	s.handler = h
	s.hmu.Unlock()
}

func (s *Session) deliver(u Update) {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	if s.handler != nil {
		s.handler(u)
	}
}

// client is the daemon's side of ACP: updates, permissions, and refusals of
// the fs/terminal methods it does not advertise.
type client struct{ c *Conn }

var _ acp.Client = (*client)(nil)

func (cl *client) SessionUpdate(ctx context.Context, n acp.SessionNotification) error {
	defer cl.c.delivered.Add(1)
	u := Update{Raw: n.Update, ToolCall: n.Update.ToolCall, ToolCallUpdate: n.Update.ToolCallUpdate}
	if m := n.Update.AgentMessageChunk; m != nil && m.Content.Text != nil {
		u.Text = m.Content.Text.Text
	}
	s := cl.c.session(n.SessionId)
	if s == nil {
		cl.c.log.Warn("update for unknown session", "session", n.SessionId)
		return nil
	}
	s.deliver(u)
	return nil
}

func (cl *client) RequestPermission(ctx context.Context, req acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	var resp acp.RequestPermissionResponse
	if cl.c.opts.Permission != nil {
		resp = cl.c.opts.Permission(ctx, req)
	} else {
		resp = Deny(req)
	}
	granted := Granted(req, resp)
	title, kind := "", ""
	if t := req.ToolCall.Title; t != nil {
		title = *t
		if len(title) > 200 {
			title = title[:200] + "…"
		}
	}
	if k := req.ToolCall.Kind; k != nil {
		kind = string(*k)
	}
	opts := make([]string, len(req.Options))
	for i, o := range req.Options {
		opts[i] = string(o.OptionId)
	}
	cl.c.log.Info("agent permission request", "session", req.SessionId, "tool", req.ToolCall.ToolCallId,
		"title", title, "kind", kind, "options", opts, "granted", granted)
	if raw, err := json.Marshal(req); err == nil {
		cl.c.log.Debug("agent permission request in full", "request", string(raw))
	}
	if cl.c.opts.OnPermission != nil {
		cl.c.opts.OnPermission(req, granted)
	}
	return resp, nil
}

// Deny answers a permission request with its reject option (reject_once
// preferred), or cancelled when it offers none.
func Deny(req acp.RequestPermissionRequest) acp.RequestPermissionResponse {
	return pick(req, acp.PermissionOptionKindRejectOnce, acp.PermissionOptionKindRejectAlways)
}

// Allow answers a permission request with its allow option (allow_once
// preferred), or cancelled when it offers none.
func Allow(req acp.RequestPermissionRequest) acp.RequestPermissionResponse {
	return pick(req, acp.PermissionOptionKindAllowOnce, acp.PermissionOptionKindAllowAlways)
}

func pick(req acp.RequestPermissionRequest, kinds ...acp.PermissionOptionKind) acp.RequestPermissionResponse {
	for _, k := range kinds {
		for _, o := range req.Options {
			if o.Kind == k {
				return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeSelected(o.OptionId)}
			}
		}
	}
	return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeCancelled()}
}

// Granted reports whether resp selects one of req's allow options.
func Granted(req acp.RequestPermissionRequest, resp acp.RequestPermissionResponse) bool {
	sel := resp.Outcome.Selected
	if sel == nil {
		return false
	}
	for _, o := range req.Options {
		if o.OptionId == sel.OptionId {
			return o.Kind == acp.PermissionOptionKindAllowOnce || o.Kind == acp.PermissionOptionKindAllowAlways
		}
	}
	return false
}

func (cl *client) ReadTextFile(context.Context, acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	return acp.ReadTextFileResponse{}, acp.NewMethodNotFound(acp.ClientMethodFsReadTextFile)
}

func (cl *client) WriteTextFile(context.Context, acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	return acp.WriteTextFileResponse{}, acp.NewMethodNotFound(acp.ClientMethodFsWriteTextFile)
}

func (cl *client) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalCreate)
}

func (cl *client) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalKill)
}

func (cl *client) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalOutput)
}

func (cl *client) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalRelease)
}

func (cl *client) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, acp.NewMethodNotFound(acp.ClientMethodTerminalWaitForExit)
}

func closeAll(fs ...*os.File) {
	for _, f := range fs {
		_ = f.Close()
	}
}

// updateCounter passes the agent's stdout through, counting session/update
// notifications so a crash can wait for the ones already read. It works
// around acp-go-sdk, which has no way to say how many notifications it still
// holds when the stream ends (see drainUpdates).
type updateCounter struct {
	r       io.Reader
	partial []byte
	updates atomic.Int64
	eof     chan struct{}
	eofOnce sync.Once
}

func newUpdateCounter(r io.Reader) *updateCounter {
	return &updateCounter{r: r, eof: make(chan struct{})}
}

// maxPartial bounds the bytes kept for a line still being read; longer lines
// are not counted (the protocol library refuses lines over 10 MiB too).
const maxPartial = 10 << 20

var sessionUpdateMethod = []byte(`"session/update"`)

func (u *updateCounter) Read(p []byte) (int, error) {
	n, err := u.r.Read(p)
	data := p[:n]
	for len(data) > 0 {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			if len(u.partial)+len(data) <= maxPartial {
				u.partial = append(u.partial, data...)
			} else {
				u.partial = u.partial[:0]
			}
			break
		}
		line := data[:i]
		if len(u.partial) > 0 {
			line = append(u.partial, line...)
		}
		u.count(line)
		u.partial = u.partial[:0]
		data = data[i+1:]
	}
	if err != nil {
		u.eofOnce.Do(func() { close(u.eof) })
	}
	return n, err
}

func (u *updateCounter) count(line []byte) {
	if !bytes.Contains(line, sessionUpdateMethod) {
		return
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(line, &m) == nil && m.ID == nil && m.Method == acp.ClientMethodSessionUpdate {
		u.updates.Add(1)
	}
}
