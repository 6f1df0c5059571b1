// Package mcpserver serves the Zooid MCP tools over one private unix socket per
// agent. Each connection first names its session binding (an unguessable id the
// daemon put into the bridge's environment) and is served only if its peer
// process (SO_PEERCRED) is the agent process the binding was made for or a
// descendant of it; the binding resolves to the tools.Caller, so no tool
// argument ever says who is calling.
//
// What this does not stop: a process of the same uid that can ptrace the agent
// (or write /proc/<pid>/mem) can make the agent or its bridge do anything,
// including call tools; one that merely reads the agent's memory or
// environment learns the binding id but is refused on the socket. Agents
// with users of their own (ListenAgentAs) are out of each other's reach
// altogether: another uid can neither ptrace them nor enter their socket
// directory.
//
// server.go holds the Server and its lifetime; bindings.go the session bindings
// and the bridge's entry (StdioEntry); peer*.go the peer process checks;
// socket.go the per-agent socket transport;
// tools.go the tool list and calls, answered by zooid/tools.
package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/zooid-dev/zooid/zooid/rundir"
	"github.com/zooid-dev/zooid/zooid/tools"
	"github.com/zooid-dev/zooid/zooid/trace"
)

// DefaultCallTimeout bounds a tool call when Options.CallTimeout is zero; it
// is zooid.yaml's default tool_timeout.
const DefaultCallTimeout = 30 * time.Second

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
	// CallTimeout bounds one tool call: a call still waiting on the
	// homeserver then returns "unavailable" (see handler). Zero means
	// DefaultCallTimeout.
	CallTimeout time.Duration
	// AgentUsers says some agents run as users of their own: a run dir the
	// server creates is then 0711 (rundir.PrepareSearchable), so each reaches
	// its own socket directory (ListenAgentAs).
	AgentUsers bool
	// BeforeCall, when set, runs before each tool call and may hold it until
	// ctx (the call's deadline) ends: the daemon holds a session's calls until
	// the event that woke its turn is readable, so the prompt need not wait
	// for that check (zooid/daemon/visible.go).
	BeforeCall func(ctx context.Context, c tools.Caller)
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
	// acpSessions maps an ACP session id to its binding id (BindACPSession).
	acpSessions map[string]string
	conns       map[*conn]struct{}
}

// New creates the run directory and the MCP server; it listens on nothing yet.
func New(opts Options) (*Server, error) {
	prepare := rundir.Prepare
	if opts.AgentUsers {
		prepare = rundir.PrepareSearchable
	}
	dir, made, err := prepare(opts.RunDir)
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
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	s := &Server{
		madeDir:     made,
		opts:        opts,
		log:         log,
		bridge:      append([]string(nil), bridgeCmd...),
		listeners:   map[string]*listener{},
		bindings:    map[string]*binding{},
		acpSessions: map[string]string{},
		conns:       map[*conn]struct{}{},
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
		if l.owned {
			// The agent's user may have left files in it; RemoveAll follows no symlink.
			if err := os.RemoveAll(l.dir); err != nil {
				errs = append(errs, fmt.Errorf("removing %s: %w", l.dir, err))
			}
		} else if err := os.Remove(l.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("removing %s: %w", l.dir, err))
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
