// Package mcpserver serves the Zooid MCP tools over one private unix socket per
// agent. Each connection first names its session binding (an unguessable id the
// daemon put into the bridge's argv); the binding resolves to the tools.Caller, so
// no tool argument ever says who is calling.
package mcpserver

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/zooid-dev/zooid/zooid/bridge"
	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/rundir"
	"github.com/zooid-dev/zooid/zooid/tools"
	"github.com/zooid-dev/zooid/zooid/trace"
)

// Options configure a Server.
type Options struct {
	// RunDir holds the sockets. A missing one is created 0700; an existing
	// one must be a real directory of this user that group and others can't
	// write (see rundir.Prepare). Empty means a fresh private directory,
	// removed on Close.
	RunDir string
	// Rooms and Tasks are the tool backends; a nil backend makes its tools
	// answer "unavailable".
	Rooms tools.Rooms
	Tasks tools.Tasks
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// BridgeCommand is the argv prefix that starts the bridge; the default is
	// [os.Executable(), "mcp"].
	BridgeCommand []string
	// Version is reported to MCP clients; default "dev".
	Version string
	// Trace records every tool call with its arguments and result; nil
	// records nothing.
	Trace trace.Recorder
}

// Server is the daemon's MCP server: per-agent sockets, session bindings and
// one mcp-go server shared by all connections, each with its own client session.
type Server struct {
	opts   Options
	log    *slog.Logger
	mcp    *server.MCPServer
	bridge []string
	// madeDir says New made RunDir itself, so Close removes it.
	madeDir bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	closed    bool
	listeners map[string]*listener // by agent
	bindings  map[string]*binding
	conns     map[*conn]struct{}
}

type listener struct {
	agent string
	path  string
	ln    net.Listener
}

type binding struct {
	id     string
	caller tools.Caller
	conns  map[*conn]struct{}
}

// New creates the run directory and the MCP server; it listens on nothing yet.
func New(opts Options) (*Server, error) {
	dir, made, err := rundir.Prepare(opts.RunDir)
	if err != nil {
		return nil, fmt.Errorf("mcpserver: %w", err)
	}
	opts.RunDir = dir
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	bridgeCmd := opts.BridgeCommand
	if len(bridgeCmd) == 0 {
		exe, err := os.Executable()
		if err != nil {
			if made {
				_ = os.Remove(dir)
			}
			return nil, fmt.Errorf("finding own executable for the bridge: %w", err)
		}
		bridgeCmd = []string{exe, "mcp"}
	}
	version := opts.Version
	if version == "" {
		version = "dev"
	}
	opts.Trace = trace.Or(opts.Trace)
	s := &Server{
		madeDir:   made,
		opts:      opts,
		log:       log,
		bridge:    append([]string(nil), bridgeCmd...),
		listeners: map[string]*listener{},
		bindings:  map[string]*binding{},
		conns:     map[*conn]struct{}{},
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.mcp = server.NewMCPServer("zooid", version,
		server.WithToolCapabilities(true),
		server.WithToolFilter(s.filterTools),
		server.WithRecovery(),
		server.WithInstructions("Zooid connects you to a Matrix room. Room, thread and identity come from this connection: no tool takes them. "+
			"Start with zooid_get_recent_threads for an overview, then zooid_get_thread_history to drill in."),
	)
	for _, t := range tools.All() {
		mt := mcp.NewToolWithRawSchema(t.Name, t.Description, t.InputSchema)
		mt.Annotations.Title = t.Title
		ro := t.ReadOnly
		mt.Annotations.ReadOnlyHint = &ro
		s.mcp.AddTool(mt, s.handler(t.Name))
	}
	return s, nil
}

// ListenAgent opens the agent's socket (mode 0600) in RunDir and serves it until
// Close. It returns the socket path to mount or pass to the bridge.
func (s *Server) ListenAgent(agent string) (string, error) {
	if !config.ValidName(agent) {
		return "", fmt.Errorf("listening for agent %q: not a valid agent name", agent)
	}
	path := filepath.Join(s.opts.RunDir, agent+".sock")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", errors.New("listening for agent: server closed")
	}
	if l, ok := s.listeners[agent]; ok {
		return l.path, nil
	}
	// A stale socket from an earlier run would make bind fail.
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("removing stale socket %s: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return "", fmt.Errorf("listening on %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return "", fmt.Errorf("securing socket %s: %w", path, err)
	}
	if ul, ok := ln.(*net.UnixListener); ok {
		ul.SetUnlinkOnClose(true)
	}
	l := &listener{agent: agent, path: path, ln: ln}
	s.listeners[agent] = l
	s.wg.Add(1)
	go s.accept(l) // owner: Server; ends when Close closes the listener
	return path, nil
}

// Bind registers a session and returns its unguessable binding id.
func (s *Server) Bind(c tools.Caller) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("mcpserver: crypto/rand failed: %v", err))
	}
	bid := base64.RawURLEncoding.EncodeToString(b)
	s.mu.Lock()
	s.bindings[bid] = &binding{id: bid, caller: c, conns: map[*conn]struct{}{}}
	s.mu.Unlock()
	return bid
}

// SetKind changes a binding's session kind (its gating) and tells its live
// connections with notifications/tools/list_changed.
func (s *Server) SetKind(bindingID string, kind tools.SessionKind) {
	s.mu.Lock()
	b, ok := s.bindings[bindingID]
	if !ok || b.caller.Kind == kind {
		s.mu.Unlock()
		return
	}
	b.caller.Kind = kind
	var ids []string
	for c := range b.conns {
		ids = append(ids, c.id)
	}
	s.mu.Unlock()
	for _, sid := range ids {
		if err := s.mcp.SendNotificationToSpecificClient(sid, string(mcp.MethodNotificationToolsListChanged), nil); err != nil {
			s.log.Debug("tools/list_changed not delivered", "session", sid, "err", err)
		}
	}
}

// Unbind forgets a binding and closes its live connections.
func (s *Server) Unbind(bindingID string) {
	s.mu.Lock()
	b, ok := s.bindings[bindingID]
	delete(s.bindings, bindingID)
	var cs []*conn
	if ok {
		for c := range b.conns {
			cs = append(cs, c)
		}
	}
	s.mu.Unlock()
	for _, c := range cs {
		c.close()
	}
}

// StdioEntry is the session/new mcpServers entry that starts the bridge for a
// binding. It carries only the socket path and the binding id: no token.
func (s *Server) StdioEntry(bindingID string) acp.McpServer {
	s.mu.Lock()
	var path string
	if b, ok := s.bindings[bindingID]; ok {
		if l, ok := s.listeners[b.caller.Agent]; ok {
			path = l.path
		}
	}
	s.mu.Unlock()
	if path == "" {
		s.log.Error("stdio entry for a binding without a listening agent socket; the bridge will fail", "binding_known", false)
	}
	args := append(append([]string(nil), s.bridge[1:]...), "--socket", path, "--binding", bindingID)
	return acp.McpServer{Stdio: &acp.McpServerStdio{
		Name:    "zooid",
		Command: s.bridge[0],
		Args:    args,
		Env:     []acp.EnvVariable{},
	}}
}

// SocketPath returns the agent's socket path, if it listens.
func (s *Server) SocketPath(agent string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.listeners[agent]
	if !ok {
		return "", false
	}
	return l.path, true
}

// Close stops listening, closes every connection, removes the sockets and waits
// for all goroutines.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	var errs []error
	for _, l := range s.listeners {
		if err := l.ln.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing %s: %w", l.path, err))
		}
		if err := os.Remove(l.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing %s: %w", l.path, err))
		}
	}
	cs := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		cs = append(cs, c)
	}
	s.mu.Unlock()
	s.cancel()
	for _, c := range cs {
		c.close()
	}
	s.wg.Wait()
	if s.madeDir {
		if err := os.Remove(s.opts.RunDir); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing run dir: %w", err))
		}
	}
	return errors.Join(errs...)
}

func (s *Server) accept(l *listener) {
	defer s.wg.Done()
	for {
		nc, err := l.ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				s.log.Error("accepting on agent socket", "agent", l.agent, "err", err)
			}
			return
		}
		s.wg.Add(1)
		go s.serve(l.agent, nc) // owner: Server; ends when the connection closes
	}
}

// conn is one bridge connection: an mcp-go client session plus its writer.
type conn struct {
	id      string
	nc      net.Conn
	binding string
	notes   chan mcp.JSONRPCNotification
	init    atomic.Bool

	writeMu sync.Mutex
	w       *bufio.Writer

	closeOnce sync.Once
	done      chan struct{}

	cancelMu sync.Mutex
	cancel   context.CancelFunc
}

func (c *conn) setCancel(cancel context.CancelFunc) {
	c.cancelMu.Lock()
	c.cancel = cancel
	c.cancelMu.Unlock()
}

func (c *conn) SessionID() string                                   { return c.id }
func (c *conn) NotificationChannel() chan<- mcp.JSONRPCNotification { return c.notes }
func (c *conn) Initialize()                                         { c.init.Store(true) }
func (c *conn) Initialized() bool                                   { return c.init.Load() }

func (c *conn) close() {
	c.closeOnce.Do(func() {
		close(c.done)
		c.nc.Close()
		c.cancelMu.Lock()
		if c.cancel != nil {
			c.cancel()
		}
		c.cancelMu.Unlock()
	})
}

func (c *conn) writeLine(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding message: %w", err)
	}
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if _, err := c.w.Write(append(data, '\n')); err != nil {
		return fmt.Errorf("writing to bridge: %w", err)
	}
	if err := c.w.Flush(); err != nil {
		return fmt.Errorf("writing to bridge: %w", err)
	}
	return nil
}

func (s *Server) serve(agent string, nc net.Conn) {
	defer s.wg.Done()
	sid := make([]byte, 16)
	_, _ = rand.Read(sid)
	c := &conn{
		id:    "zooid-" + base64.RawURLEncoding.EncodeToString(sid),
		nc:    nc,
		notes: make(chan mcp.JSONRPCNotification, 16),
		w:     bufio.NewWriter(nc),
		done:  make(chan struct{}),
	}
	defer c.close()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.conns, c)
		if b, ok := s.bindings[c.binding]; ok {
			delete(b.conns, c)
		}
		s.mu.Unlock()
	}()

	sc := bufio.NewScanner(nc)
	sc.Buffer(make([]byte, 64<<10), bridge.MaxLine)

	// Handshake: the first line names the binding. An unknown binding and one of
	// another agent get the same answer, so the socket is no oracle.
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if !sc.Scan() {
		return
	}
	var hello bridge.Hello
	_ = json.Unmarshal(sc.Bytes(), &hello)
	s.mu.Lock()
	b, ok := s.bindings[hello.Binding]
	if ok && b.caller.Agent == agent && !s.closed {
		b.conns[c] = struct{}{}
		c.binding = b.id
	} else {
		ok = false
	}
	s.mu.Unlock()
	if !ok {
		s.log.Warn("refused a connection with an unknown binding", "agent", agent)
		_ = c.writeLine(bridge.Welcome{Error: bridge.RefusedMessage})
		return
	}
	_ = nc.SetReadDeadline(time.Time{})
	if err := c.writeLine(bridge.Welcome{OK: true}); err != nil {
		return
	}

	if err := s.mcp.RegisterSession(s.ctx, c); err != nil {
		s.log.Error("registering mcp session", "err", err)
		return
	}
	defer s.mcp.UnregisterSession(s.ctx, c.id)

	// Calls in flight end when the connection is closed (Unbind, Close), but a
	// bridge that merely stops writing still gets its answers.
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	c.setCancel(cancel)
	ctx = s.mcp.WithContext(ctx, c)

	notesDone := make(chan struct{})
	go func() { // owner: serve; forwards notifications until the connection ends
		defer close(notesDone)
		for {
			select {
			case n := <-c.notes:
				if err := c.writeLine(n); err != nil {
					c.close()
					return
				}
			case <-c.done:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	var inflight sync.WaitGroup
	for sc.Scan() {
		line := append([]byte(nil), sc.Bytes()...)
		if len(line) == 0 {
			continue
		}
		// Requests run concurrently so a slow tool call doesn't block pings or
		// cancellations; notifications are handled in order.
		run := func() {
			resp := s.mcp.HandleMessage(ctx, line)
			if resp != nil {
				if err := c.writeLine(resp); err != nil {
					s.log.Debug("writing mcp response", "err", err)
					c.close()
				}
			}
		}
		if hasID(line) {
			inflight.Add(1)
			go func() { defer inflight.Done(); run() }() // owner: serve (inflight)
		} else {
			run()
		}
	}
	inflight.Wait()
	cancel()
	<-notesDone
	if err := sc.Err(); err != nil && !errors.Is(err, net.ErrClosed) {
		s.log.Debug("reading from bridge", "err", err)
	}
}

func hasID(line []byte) bool {
	var probe struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(line, &probe) != nil {
		return false
	}
	return len(probe.ID) > 0 && string(probe.ID) != "null" && probe.Method != ""
}

// callerOf resolves the calling connection's binding.
func (s *Server) callerOf(ctx context.Context) (tools.Caller, bool) {
	c, ok := server.ClientSessionFromContext(ctx).(*conn)
	if !ok {
		return tools.Caller{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.bindings[c.binding]
	if !ok {
		return tools.Caller{}, false
	}
	return b.caller, true
}

func (s *Server) filterTools(ctx context.Context, in []mcp.Tool) []mcp.Tool {
	caller, ok := s.callerOf(ctx)
	if !ok {
		return nil
	}
	out := make([]mcp.Tool, 0, len(in))
	for _, t := range in {
		if _, offered := tools.Lookup(caller.Kind, t.Name); offered {
			out = append(out, t)
		}
	}
	return out
}

func (s *Server) handler(name string) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		caller, ok := s.callerOf(ctx)
		if !ok {
			return mcp.NewToolResultError("forbidden: this session has ended; its binding is no longer valid"), nil
		}
		args := req.Params.RawArguments
		if len(args) == 0 && req.Params.Arguments != nil {
			raw, err := json.Marshal(req.Params.Arguments)
			if err != nil {
				return mcp.NewToolResultError("invalid_argument: arguments are not a JSON object"), nil
			}
			args = raw
		}
		start := time.Now()
		res, terr, cause := tools.Call(ctx, tools.Backends{Rooms: s.opts.Rooms, Tasks: s.opts.Tasks}, caller, name, args)
		if terr != nil {
			lvl := slog.LevelDebug
			if cause != nil {
				lvl = slog.LevelWarn
			}
			s.log.Log(ctx, lvl, "tool call failed", "tool", name, "agent", caller.Agent, "code", terr.Code, "err", errOr(cause, terr))
			s.opts.Trace.Record(traceTool(caller, name, args, "", terr.Error()))
			return mcp.NewToolResultError(terr.Error()), nil
		}
		text, err := json.Marshal(res)
		if err != nil {
			s.log.Error("encoding tool result", "tool", name, "err", err)
			return mcp.NewToolResultError("unavailable: the result could not be encoded"), nil
		}
		s.log.Debug("tool call", "tool", name, "agent", caller.Agent, "took", time.Since(start))
		s.opts.Trace.Record(traceTool(caller, name, args, string(text), ""))
		// Structured content must be a JSON object; every result record is one.
		var structured map[string]any
		if err := json.Unmarshal(text, &structured); err != nil {
			return mcp.NewToolResultText(string(text)), nil
		}
		return mcp.NewToolResultStructured(structured, string(text)), nil
	}
}

func errOr(a error, b error) error {
	if a != nil {
		return a
	}
	return b
}

// traceTool is the trace record of one tool call, in the caller's session.
func traceTool(c tools.Caller, name string, args []byte, result, errText string) trace.Record {
	return trace.Record{Kind: trace.KindTool, Room: c.Room, Session: c.SessionKey,
		Tool: &trace.ToolCall{Agent: c.Agent, Tool: name, Args: string(args), Result: result, Error: errText}}
}
