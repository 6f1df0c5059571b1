// Package tools is the single definition of the ten Zooid MCP tools: their names,
// descriptions, input schemas, result records and gating. The MCP server and the pi
// extension are both generated from it, so the two surfaces cannot drift.
package tools

import "maunium.net/go/mautrix/id"

// SessionKind says what a session is for, which decides the tools it is offered.
type SessionKind int

const (
	// Conversation is an ordinary session woken by a message: it may delegate.
	Conversation SessionKind = iota
	// TaskAssignee is the assignee session of an open task thread: it may complete.
	TaskAssignee
	// TaskThreadMember is any other session in a task thread — a handoff callee,
	// or the assignee once its task has closed: it may neither delegate (task
	// threads are one level deep) nor complete, nor hand off with zooid_handoff
	// (it hands on by @mentioning, which the task tracks), so it is offered none.
	TaskThreadMember
)

// String names the kind for logs and errors.
func (k SessionKind) String() string {
	switch k {
	case Conversation:
		return "conversation"
	case TaskAssignee:
		return "task_assignee"
	case TaskThreadMember:
		return "task_thread_member"
	default:
		return "unknown"
	}
}

// Caller identifies who is calling a tool. It comes from the connection's binding,
// never from tool arguments: no tool takes a room, agent, session or token.
type Caller struct {
	// Agent is the agent's zooid.yaml name.
	Agent string
	// UserID is the agent's own Matrix user; reads impersonate it.
	UserID id.UserID
	// Transport is the transport name kind the session belongs to ("matrix").
	Transport string
	// Room is the room of the session's thread.
	Room id.RoomID
	// Rooms are the rooms the agent is bound to (zooid.yaml), resolved to ids: the
	// only rooms it may list and post to, and then only while it is joined.
	Rooms []id.RoomID
	// Thread is the thread root event of the session; empty for none.
	Thread id.EventID
	// Kind decides gating.
	Kind SessionKind
	// SessionKey identifies the daemon's session (agent + thread) for task parents.
	SessionKey string
}
