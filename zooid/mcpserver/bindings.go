package mcpserver

import (
	"context"
	"crypto/rand"

	"github.com/zooid-dev/zooid/zooid/handshake"

	acp "github.com/coder/acp-go-sdk"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/zooid-dev/zooid/zooid/tools"
)

// A binding is one agent session's right to the tools: an unguessable id the
// daemon puts into the bridge's environment, resolving to the session's
// tools.Caller, so no tool argument ever says who is calling. The id alone is
// not enough: a same-uid process can read any agent's environment and memory,
// so a connection is served only if its peer is the agent process the binding
// was made for or a descendant of it (see Process). Connections that presented
// it are closed when it is unbound.
type binding struct {
	id     string
	caller tools.Caller
	agent  Process
	conns  map[*conn]struct{}
	// acpSession is the agent's ACP session id, when the daemon registered one.
	acpSession string
	// pending: bound for a session opened ahead of its thread (BindPending);
	// its tools are listed but not served until Assign names the thread.
	pending bool
}

// Bind registers a session of the agent process agent (see ProcessOf) and
// returns its unguessable binding id (130 random bits). Only agent and its
// descendants are served on it.
func (s *Server) Bind(c tools.Caller, agent Process) string {
	bid := rand.Text()
	s.mu.Lock()
	s.bindings[bid] = &binding{id: bid, caller: c, agent: agent, conns: map[*conn]struct{}{}}
	s.mu.Unlock()
	return bid
}

// BindPending is Bind for a session opened before any thread needs it (a
// spare session of a prewarmed agent process): c names the agent and the
// kind of session it will most likely be, and its tools are listed, but a
// call is refused until Assign gives the binding its thread.
func (s *Server) BindPending(c tools.Caller, agent Process) string {
	bid := s.Bind(c, agent)
	s.mu.Lock()
	s.bindings[bid].pending = true
	s.mu.Unlock()
	return bid
}

// Assign gives a pending binding its caller, thread and all: its calls are
// served from now on, as that thread's. c must name the agent it was bound
// for; a changed kind is told to its live connections, as SetKind does. It
// reports false when the binding is gone or serves another agent.
func (s *Server) Assign(bindingID string, c tools.Caller) bool {
	s.mu.Lock()
	b, ok := s.bindings[bindingID]
	if !ok || b.caller.Agent != c.Agent {
		s.mu.Unlock()
		return false
	}
	kind := c.Kind
	c.Kind = b.caller.Kind
	b.caller, b.pending = c, false
	s.mu.Unlock()
	s.SetKind(bindingID, kind)
	return true
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

// BindACPSession lets connections that name the ACP session id acpSession in
// their hello (the pi extension) use binding bindingID. The daemon calls it once
// session/new has returned the id; the binding's Unbind forgets it.
func (s *Server) BindACPSession(bindingID, acpSession string) {
	if acpSession == "" {
		return
	}
	s.mu.Lock()
	if b, ok := s.bindings[bindingID]; ok {
		b.acpSession = acpSession
		s.acpSessions[acpSession] = bindingID
	}
	s.mu.Unlock()
}

// Unbind forgets a binding and closes its live connections.
func (s *Server) Unbind(bindingID string) {
	s.mu.Lock()
	b, ok := s.bindings[bindingID]
	delete(s.bindings, bindingID)
	if ok && b.acpSession != "" && s.acpSessions[b.acpSession] == bindingID {
		delete(s.acpSessions, b.acpSession)
	}
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
// binding. Its argv carries only the socket path; the binding id goes in its
// environment (handshake.BindingEnv), out of /proc/<pid>/cmdline. No token.
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
	return s.StdioEntryAt(bindingID, s.bridge, path)
}

// ServerName is the name of the Zooid MCP server in an agent's session/new:
// agents name its tools after it (Claude Code: mcp__zooid__<tool>), and the
// daemon recognises its own tools' permission requests by it.
const ServerName = "zooid"

// StdioEntryAt is StdioEntry with the bridge's argv prefix and the socket
// path as the agent sees them: inside a container they are the mount points,
// not the host's paths.
func (s *Server) StdioEntryAt(bindingID string, bridgeCmd []string, socket string) acp.McpServer {
	args := append(append([]string(nil), bridgeCmd[1:]...), "--socket", socket)
	return acp.McpServer{Stdio: &acp.McpServerStdio{
		Name:    ServerName,
		Command: bridgeCmd[0],
		Args:    args,
		Env:     []acp.EnvVariable{{Name: handshake.BindingEnv, Value: bindingID}},
	}}
}

// callerOf resolves the calling connection's binding; pending says it has
// no thread yet (BindPending), so its calls are not served.
func (s *Server) callerOf(ctx context.Context) (c tools.Caller, ok, pending bool) {
	cn, ok := server.ClientSessionFromContext(ctx).(*conn)
	if !ok {
		return tools.Caller{}, false, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.bindings[cn.binding]
	if !ok {
		return tools.Caller{}, false, false
	}
	return b.caller, true, b.pending
}
