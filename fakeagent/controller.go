package fakeagent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// message is one line on the control socket. The agent sends requests with
// Op set; the controller answers each with the same ID (Turn set for "prompt").
type message struct {
	ID    int64           `json:"id"`
	Op    string          `json:"op,omitempty"`
	Agent string          `json:"agent,omitempty"`
	Data  json.RawMessage `json:"data,omitempty"`
	Turn  Turn            `json:"turn,omitempty"`
	Err   string          `json:"err,omitempty"`
}

// hello is sent once per agent process.
type hello struct {
	Pid  int      `json:"pid"`
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Wd   string   `json:"wd"`
}

// Controller is the test side: it queues turns for agents and records what
// they observed. All methods are safe for concurrent use.
type Controller struct {
	ln     net.Listener
	sock   string
	rmDir  string
	closed chan struct{}
	wg     sync.WaitGroup

	mu          sync.Mutex
	changed     chan struct{} // closed and replaced on every recorded observation
	conns       map[net.Conn]struct{}
	queues      map[string][]Turn
	prompts     map[string][]Prompt
	sessions    map[string][]SessionInfo
	starts      map[string][]Started
	toolResults map[string][]ToolResult
	toolLists   map[string][][]string
	cancels     map[string][]Cancel
	closes      map[string][]Closed
	permissions map[string][]PermissionResult
	mcpErrors   map[string][]MCPError
	reaches     map[string][]ReachResult
	probes      map[string][]Probe
	unscripted  string // prompts containing it leave the script alone
	released    map[string]bool
	responder   func(agent string, p Prompt) (Turn, bool)
	peaks       map[string]int // most live processes per agent (procs.go)
	peakAll     int
	liveErr     error
	closeOnce   sync.Once
}

// NewController starts a controller in a short temporary directory and closes
// it when the test ends.
func NewController(t testing.TB) *Controller {
	t.Helper()
	c, err := StartController("")
	if err != nil {
		t.Fatalf("fakeagent: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// StartController listens on dir/ctl.sock; an empty dir means a fresh short
// temporary directory, removed by Close. Unix socket paths must fit in 108
// bytes, so prefer short directories.
func StartController(dir string) (*Controller, error) {
	rmDir := ""
	if dir == "" {
		base := os.TempDir()
		if len(base) > 60 {
			base = "/tmp"
		}
		d, err := os.MkdirTemp(base, "zfa")
		if err != nil {
			return nil, fmt.Errorf("controller dir: %w", err)
		}
		dir, rmDir = d, d
	}
	sock := filepath.Join(dir, "ctl.sock")
	if len(sock) >= 104 {
		return nil, fmt.Errorf("controller socket path %q is too long for a unix socket", sock)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		if rmDir != "" {
			_ = os.RemoveAll(rmDir)
		}
		return nil, fmt.Errorf("controller listen: %w", err)
	}
	c := &Controller{
		ln: ln, sock: sock, rmDir: rmDir, closed: make(chan struct{}),
		changed:     make(chan struct{}),
		conns:       map[net.Conn]struct{}{},
		queues:      map[string][]Turn{},
		released:    map[string]bool{},
		prompts:     map[string][]Prompt{},
		sessions:    map[string][]SessionInfo{},
		starts:      map[string][]Started{},
		toolResults: map[string][]ToolResult{},
		toolLists:   map[string][][]string{},
		cancels:     map[string][]Cancel{},
		closes:      map[string][]Closed{},
		permissions: map[string][]PermissionResult{},
		mcpErrors:   map[string][]MCPError{},
		reaches:     map[string][]ReachResult{},
		probes:      map[string][]Probe{},
		peaks:       map[string]int{},
	}
	c.wg.Add(1)
	go c.accept()
	return c, nil
}

// Socket is the path of the control socket.
func (c *Controller) Socket() string { return c.sock }

// Args are the command-line arguments that start an agent named agent
// against this controller.
func (c *Controller) Args(agent string) []string {
	return []string{"fake-agent", "--control", c.sock, "--agent", agent}
}

// Close stops listening, drops agent connections and waits for its
// goroutines. Agents still running see their control connection end.
func (c *Controller) Close() error {
	var err error
	c.closeOnce.Do(func() {
		close(c.closed)
		err = c.ln.Close()
		c.mu.Lock()
		for conn := range c.conns {
			_ = conn.Close()
		}
		c.mu.Unlock()
		c.wg.Wait()
		if c.rmDir != "" {
			_ = os.RemoveAll(c.rmDir)
		}
	})
	return err
}

func (c *Controller) accept() {
	defer c.wg.Done()
	for {
		conn, err := c.ln.Accept()
		if err != nil {
			return
		}
		c.mu.Lock()
		select {
		case <-c.closed:
			c.mu.Unlock()
			_ = conn.Close()
			return
		default:
		}
		c.conns[conn] = struct{}{}
		c.mu.Unlock()
		c.wg.Add(1)
		go c.serve(conn)
	}
}

func (c *Controller) serve(conn net.Conn) {
	defer c.wg.Done()
	defer func() {
		c.mu.Lock()
		delete(c.conns, conn)
		c.mu.Unlock()
		_ = conn.Close()
	}()
	var proc hello
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	enc := json.NewEncoder(conn)
	for sc.Scan() {
		var m message
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			return
		}
		reply := message{ID: m.ID}
		if err := c.handle(&proc, m, &reply); err != nil {
			reply.Err = err.Error()
		}
		if err := enc.Encode(reply); err != nil {
			return
		}
	}
}

func (c *Controller) handle(proc *hello, m message, reply *message) error {
	now := time.Now()
	switch m.Op {
	case "hello":
		if err := json.Unmarshal(m.Data, proc); err != nil {
			return err
		}
		record(c, c.starts, m.Agent, Started{Pid: proc.Pid, At: now})
		c.countLive()
	case "session":
		var s SessionInfo
		if err := json.Unmarshal(m.Data, &s); err != nil {
			return err
		}
		s.Env, s.Argv, s.Pid, s.Wd = proc.Env, proc.Argv, proc.Pid, proc.Wd
		record(c, c.sessions, m.Agent, s)
	case "prompt":
		var p Prompt
		if err := json.Unmarshal(m.Data, &p); err != nil {
			return err
		}
		p.At = now
		c.mu.Lock()
		if c.unscripted != "" && strings.Contains(p.Text, c.unscripted) {
			reply.Turn = Turn{Say(DefaultReply)}
		} else if t, ok := c.respond(m.Agent, p); ok {
			reply.Turn = t
		} else if q := c.queues[m.Agent]; len(q) > 0 {
			reply.Turn, c.queues[m.Agent] = q[0], q[1:]
		} else {
			reply.Turn = Turn{Say(DefaultReply)}
		}
		c.mu.Unlock()
		record(c, c.prompts, m.Agent, p)
	case "tool_result":
		var r ToolResult
		if err := json.Unmarshal(m.Data, &r); err != nil {
			return err
		}
		record(c, c.toolResults, m.Agent, r)
	case "tool_list":
		var names []string
		if err := json.Unmarshal(m.Data, &names); err != nil {
			return err
		}
		record(c, c.toolLists, m.Agent, names)
	case "cancel":
		var x Cancel
		if err := json.Unmarshal(m.Data, &x); err != nil {
			return err
		}
		x.At = now
		record(c, c.cancels, m.Agent, x)
	case "permission":
		var p PermissionResult
		if err := json.Unmarshal(m.Data, &p); err != nil {
			return err
		}
		record(c, c.permissions, m.Agent, p)
	case "released":
		c.mu.Lock()
		open := c.released[m.Agent]
		c.mu.Unlock()
		reply.Data, _ = json.Marshal(open)
	case "reach":
		var r ReachResult
		if err := json.Unmarshal(m.Data, &r); err != nil {
			return err
		}
		record(c, c.reaches, m.Agent, r)
	case "mcp_error":
		var e MCPError
		if err := json.Unmarshal(m.Data, &e); err != nil {
			return err
		}
		record(c, c.mcpErrors, m.Agent, e)
	case "closed":
		var x Closed
		if err := json.Unmarshal(m.Data, &x); err != nil {
			return err
		}
		record(c, c.closes, m.Agent, x)
	case "probe":
		var pr Probe
		if err := json.Unmarshal(m.Data, &pr); err != nil {
			return err
		}
		record(c, c.probes, m.Agent, pr)
	default:
		return fmt.Errorf("unknown op %q", m.Op)
	}
	return nil
}

func record[T any](c *Controller, into map[string][]T, agent string, v T) {
	c.mu.Lock()
	into[agent] = append(into[agent], v)
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

func snapshot[T any](c *Controller, from map[string][]T, agent string) []T {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(from[agent])
}

// waitN blocks until from[agent] has at least n entries or ctx ends.
func waitN[T any](ctx context.Context, c *Controller, from map[string][]T, agent string, n int, what string) ([]T, error) {
	// Only the length is looked at until it is enough: copying every report
	// at each wake-up made a wait for n reports cost O(n²) (a benchmark's
	// thousands of tool results).
	clone := func() []T {
		c.mu.Lock()
		defer c.mu.Unlock()
		return slices.Clone(from[agent])
	}
	for {
		c.mu.Lock()
		have := len(from[agent])
		ch := c.changed
		c.mu.Unlock()
		if have >= n {
			return clone(), nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			got := clone()
			return got, fmt.Errorf("waiting for %d %s from agent %q (have %d): %w", n, what, agent, len(got), ctx.Err())
		case <-c.closed:
			return clone(), errors.New("controller closed")
		}
	}
}

// Release lets agent's turns that wait until released go on (see
// WaitUntilReleased); it stays released for the rest of the scenario.
func (c *Controller) Release(agent string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.released[agent] = true
}

// Queue appends turns to agent's script; each prompt consumes one, in order,
// across all processes running that agent.
func (c *Controller) Queue(agent string, turns ...Turn) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.queues[agent] = append(c.queues[agent], turns...)
}

// Unscripted makes prompts containing marker get the default reply without
// consuming a queued turn: a harness probe (a barrier) must not eat a turn the
// scenario scripted for a real prompt.
func (c *Controller) Unscripted(marker string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.unscripted = marker
}

// Respond makes f choose the turn for each prompt (before the queue): a
// replay scripts agents from what a recorded trace says they did, turn by
// turn as the prompts arrive. f runs with no controller lock held; false
// falls back to the queue. f must be safe for concurrent use.
func (c *Controller) Respond(f func(agent string, p Prompt) (Turn, bool)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.responder = f
}

// respond is called with c.mu held; it releases it around the responder.
func (c *Controller) respond(agent string, p Prompt) (Turn, bool) {
	f := c.responder
	if f == nil {
		return nil, false
	}
	c.mu.Unlock()
	defer c.mu.Lock()
	return f(agent, p)
}

// Pending is the number of queued turns not yet consumed by agent.
func (c *Controller) Pending(agent string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queues[agent])
}

// Prompts are the prompts agent received, in order.
func (c *Controller) Prompts(agent string) []Prompt { return snapshot(c, c.prompts, agent) }

// Started is one process of an agent as it came up (its hello), before
// initialize and any session.
type Started struct {
	Pid int
	At  time.Time
}

// Starts are agent's processes in the order they came up.
func (c *Controller) Starts(agent string) []Started { return snapshot(c, c.starts, agent) }

// Sessions are the session/new requests agent received, in order.
func (c *Controller) Sessions(agent string) []SessionInfo { return snapshot(c, c.sessions, agent) }

// Probes are the probes (ReadFile, Dial, Run) agent reported, in order.
func (c *Controller) Probes(agent string) []Probe { return snapshot(c, c.probes, agent) }

// Reaches are the Reach attempts agent reported, in order.
func (c *Controller) Reaches(agent string) []ReachResult { return snapshot(c, c.reaches, agent) }

// WaitProbes blocks until agent has reported at least n probes (ReadFile,
// Dial, Run) and returns them in order.
func (c *Controller) WaitProbes(ctx context.Context, agent string, n int) ([]Probe, error) {
	return waitN(ctx, c, c.probes, agent, n, "probes")
}

// ToolResults are the results of agent's CallTool actions, in order.
func (c *Controller) ToolResults(agent string) []ToolResult {
	return snapshot(c, c.toolResults, agent)
}

// ToolLists are the tool names seen each time agent listed tools (on MCP
// start and on ListTools actions).
func (c *Controller) ToolLists(agent string) [][]string { return snapshot(c, c.toolLists, agent) }

// Cancels are the session/cancel notifications agent received.
func (c *Controller) Cancels(agent string) []Cancel { return snapshot(c, c.cancels, agent) }

// Closed returns the session/close requests the agent's processes were sent.
func (c *Controller) Closed(agent string) []Closed { return snapshot(c, c.closes, agent) }

// Permissions are the answers agent got to its Permission actions.
func (c *Controller) Permissions(agent string) []PermissionResult {
	return snapshot(c, c.permissions, agent)
}

// MCPErrors are failures to start agent's MCP servers.
func (c *Controller) MCPErrors(agent string) []MCPError { return snapshot(c, c.mcpErrors, agent) }

// WaitPrompts blocks until agent has received at least n prompts.
func (c *Controller) WaitPrompts(ctx context.Context, agent string, n int) ([]Prompt, error) {
	return waitN(ctx, c, c.prompts, agent, n, "prompts")
}

// WaitSessions blocks until agent has received at least n session/new.
func (c *Controller) WaitSessions(ctx context.Context, agent string, n int) ([]SessionInfo, error) {
	return waitN(ctx, c, c.sessions, agent, n, "sessions")
}

// WaitToolResults blocks until agent has reported at least n tool results.
func (c *Controller) WaitToolResults(ctx context.Context, agent string, n int) ([]ToolResult, error) {
	return waitN(ctx, c, c.toolResults, agent, n, "tool results")
}

// WaitToolLists blocks until agent has reported at least n tool lists.
func (c *Controller) WaitToolLists(ctx context.Context, agent string, n int) ([][]string, error) {
	return waitN(ctx, c, c.toolLists, agent, n, "tool lists")
}

// WaitCancels blocks until agent has received at least n session/cancel.
func (c *Controller) WaitCancels(ctx context.Context, agent string, n int) ([]Cancel, error) {
	return waitN(ctx, c, c.cancels, agent, n, "cancels")
}

// WaitPermissions blocks until agent has reported at least n permission outcomes.
func (c *Controller) WaitPermissions(ctx context.Context, agent string, n int) ([]PermissionResult, error) {
	return waitN(ctx, c, c.permissions, agent, n, "permission results")
}

// WaitMCPErrors blocks until agent has reported at least n MCP start failures.
func (c *Controller) WaitMCPErrors(ctx context.Context, agent string, n int) ([]MCPError, error) {
	return waitN(ctx, c, c.mcpErrors, agent, n, "MCP errors")
}

// WaitReaches blocks until agent has reported at least n Reach attempts.
func (c *Controller) WaitReaches(ctx context.Context, agent string, n int) ([]ReachResult, error) {
	return waitN(ctx, c, c.reaches, agent, n, "reach attempts")
}
