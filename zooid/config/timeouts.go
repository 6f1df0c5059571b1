package config

import "time"

// Deadlines on the homeserver: a homeserver that accepts a request and never
// answers must not hold a tool call or a post for ever.
const (
	// DefaultToolTimeout bounds one Zooid MCP tool call (tool_timeout). A read
	// that still fails after its retries ends well within it, and it is
	// shorter than the tool timeouts MCP clients commonly apply themselves
	// (codex waits 60s), so the agent hears Zooid's clear "unavailable"
	// instead of its own client giving up.
	DefaultToolTimeout = 30 * time.Second
	// DefaultPostTimeout bounds one try of a post to the homeserver
	// (post_timeout): a try the homeserver leaves unanswered that long is
	// given up and the post tried again with the same txn id, so whatever
	// landed is not posted twice.
	DefaultPostTimeout = 30 * time.Second
	// DefaultTaskTimeout bounds how long a task thread stays open
	// (task_timeout): past it the task closes timed_out and frees its slot of
	// the room's five. It is twice the default turn_timeout, so an assignee
	// that works through one whole turn is not cut short, and a question it
	// asks a person still has half an hour to be answered.
	DefaultTaskTimeout = time.Hour
)

// timeouts reads the top-level tool_timeout, post_timeout and task_timeout,
// with their defaults.
func (p *parser) timeouts(top map[string]field, cfg *Config) {
	cfg.ToolTimeout, cfg.PostTimeout, cfg.TaskTimeout = DefaultToolTimeout, DefaultPostTimeout, DefaultTaskTimeout
	if d := p.duration(top, "tool_timeout"); d > 0 {
		cfg.ToolTimeout = d
	}
	if d := p.duration(top, "post_timeout"); d > 0 {
		cfg.PostTimeout = d
	}
	if d := p.duration(top, "task_timeout"); d > 0 {
		cfg.TaskTimeout = d
	}
}
