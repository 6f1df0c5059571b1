package mcpserver

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zooid-dev/zooid/zooid/handshake"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/rundir"
)

// The socket transport: newline-delimited JSON-RPC over one unix socket per
// agent, a binding handshake first, then mcp-go's HandleMessage per line. It is
// written here because mcp-go's StdioServer serves one client session per process
// (a package-level session), while each connection here needs a session of its own,
// bound to its binding's Caller.

type listener struct {
	agent string
	path  string
	// dir is the agent's own socket directory, removed by Close; owned says
	// the agent's user owns it (ListenAgentAs).
	dir   string
	owned bool
	ln    net.Listener
}

// Owner is the unix user an agent runs as, when not the daemon's.
type Owner struct{ UID, GID int }

// SocketName is the agent socket's file name inside its socket directory
// (see ListenAgent).
const SocketName = "zooid.sock"

// ListenAgent opens the agent's socket (mode 0600) as
// RunDir/<agent>/zooid.sock and serves it until Close. Each agent has a
// directory of its own (0700) so exactly that directory can be given to the
// agent, e.g. mounted into its container, without the others' sockets. It
// returns the socket path to mount or pass to the bridge.
func (s *Server) ListenAgent(agent string) (string, error) {
	return s.ListenAgentAs(agent, nil)
}

// ListenAgentAs is ListenAgent for an agent that runs as owner: its socket
// is RunDir/<agent>/zooid.sock, in a directory of its own that owner owns
// (0700), so no other agent's user can even reach it. The directory is made
// afresh and handed over only once the socket is in place, so the agent's
// user never has a moment to plant anything the daemon then touches. A nil
// owner is ListenAgent.
func (s *Server) ListenAgentAs(agent string, owner *Owner) (string, error) {
	if !config.ValidName(agent) {
		return "", fmt.Errorf("listening for agent %q: not a valid agent name", agent)
	}
	dir := filepath.Join(s.opts.RunDir, agent)
	path := filepath.Join(dir, SocketName)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", errors.New("listening for agent: server closed")
	}
	if l, ok := s.listeners[agent]; ok {
		return l.path, nil
	}
	if owner != nil {
		// An earlier run's directory belongs to the agent's user: start over.
		if err := os.RemoveAll(dir); err != nil {
			return "", fmt.Errorf("removing stale socket directory %s: %w", dir, err)
		}
		if err := os.Mkdir(dir, 0o700); err != nil {
			return "", fmt.Errorf("creating socket directory %s: %w", dir, err)
		}
	} else if err := os.Mkdir(dir, 0o700); errors.Is(err, os.ErrExist) {
		// A directory left by a daemon that was killed is reused only if it
		// passes the run dir's checks (ours, no symlink, not group/world writable).
		if err := rundir.Check(dir); err != nil {
			return "", fmt.Errorf("socket directory of agent %s: %w", agent, err)
		}
	} else if err != nil {
		return "", fmt.Errorf("creating socket directory of agent %s: %w", agent, err)
	}
	// A stale socket from an earlier run would make bind fail.
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("removing stale socket %s: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return "", fmt.Errorf("listening on %s: %w", path, err)
	}
	secure := func() error {
		if err := os.Chmod(path, 0o600); err != nil {
			return err
		}
		if owner == nil {
			return nil
		}
		if err := os.Lchown(path, owner.UID, owner.GID); err != nil {
			return err
		}
		return os.Lchown(dir, owner.UID, owner.GID)
	}
	if err := secure(); err != nil {
		ln.Close()
		return "", fmt.Errorf("securing socket %s: %w", path, err)
	}
	if ul, ok := ln.(*net.UnixListener); ok {
		ul.SetUnlinkOnClose(true)
	}
	l := &listener{agent: agent, path: path, dir: dir, owned: owner != nil, ln: ln}
	s.listeners[agent] = l
	s.wg.Add(1)
	go s.accept(l) // owner: Server; ends when Close closes the listener
	return path, nil
}

// SocketDir returns the agent's socket directory, if it listens: the one
// directory to mount into the agent's container.
func (s *Server) SocketDir(agent string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.listeners[agent]
	if !ok {
		return "", false
	}
	return l.dir, true
}

// RunDir is the directory holding every agent's socket directory: the
// configured run dir, or the one New made.
func (s *Server) RunDir() string { return s.opts.RunDir }

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

// writeLine sends v and its newline in one write. A message whose newline
// came in a write of its own reached codex's MCP client (rmcp 1.7) as two
// reads; between them its reader can be dropped and restarted (rmcp's
// AsyncRwTransport::receive is not cancel-safe, modelcontextprotocol/rust-sdk
// #941), losing the message, and the lone newline that followed was skipped as
// an empty line: a tools/list answer vanished without a trace under load.
func (c *conn) writeLine(v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding message: %w", err)
	}
	data = append(data, '\n')
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	if _, err := c.nc.Write(data); err != nil {
		return fmt.Errorf("writing to bridge: %w", err)
	}
	return nil
}

func (s *Server) serve(agent string, nc net.Conn) {
	defer s.wg.Done()
	c := &conn{
		id:    "zooid-" + rand.Text(),
		nc:    nc,
		notes: make(chan mcp.JSONRPCNotification, 16),
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
	sc.Buffer(make([]byte, 64<<10), handshake.MaxLine)

	// Handshake: the first line names the binding. An unknown binding, one of
	// another agent, and a peer process that is not the binding's agent or its
	// descendant all get the same answer, so the socket is no oracle.
	_ = nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if !sc.Scan() {
		return
	}
	var hello handshake.Hello
	_ = json.Unmarshal(sc.Bytes(), &hello)
	// The peer is checked after the binding is known (it names the agent
	// process) and the refusal is the same either way.
	refuse := func(why string, args ...any) {
		s.log.Warn("refused a connection: "+why, append([]any{"agent", agent}, args...)...)
		_ = c.writeLine(handshake.Welcome{Error: handshake.RefusedMessage})
	}
	s.mu.Lock()
	bid := hello.Binding
	if bid == "" && hello.ACPSession != "" {
		bid = s.acpSessions[hello.ACPSession]
	}
	b, ok := s.bindings[bid]
	ok = ok && b.caller.Agent == agent
	var proc Process
	if ok {
		proc = b.agent
	}
	s.mu.Unlock()
	if !ok {
		refuse("unknown binding")
		return
	}
	p, err := peerOf(nc)
	if err != nil {
		refuse("peer unknown", "err", err)
		return
	}
	allowed := p.allowed(proc)
	p.close()
	if !allowed {
		refuse("peer is not the binding's agent process or its descendant", "peer_pid", p.pid, "peer_uid", p.uid, "agent_pid", proc.Pid)
		return
	}
	s.mu.Lock()
	b, ok = s.bindings[bid]
	if ok && !s.closed {
		b.conns[c] = struct{}{}
		c.binding = b.id
	}
	ok = ok && !s.closed
	s.mu.Unlock()
	if !ok {
		refuse("binding ended during the handshake")
		return
	}
	_ = nc.SetReadDeadline(time.Time{})
	if err := c.writeLine(handshake.Welcome{OK: true}); err != nil {
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
