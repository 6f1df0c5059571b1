package config

import (
	"strconv"
	"time"
)

// Process caps bound what a busy room can cost: every live agent process is a
// whole coding agent (hundreds of MB for a real one).
const (
	// DefaultAgentMaxProcesses caps one agent's live processes. Four turns of
	// one agent running at once is more than a room of people keeps busy (a
	// turn takes tens of seconds to minutes), and four real agents at 200–500
	// MB each stay within 2 GB; a fifth thread waits for the least recently
	// used idle process to be stopped, or for a busy one to finish.
	DefaultAgentMaxProcesses = 4
	// DefaultMaxProcesses caps live agent processes across the daemon: four
	// agents at their own default cap, about 6 GB of real agents at most.
	DefaultMaxProcesses = 16
	// DefaultQueueNoticeAfter is how long a turn waits for a process before
	// its thread is told it is queued: longer than an agent usually takes
	// to start answering, short enough that silence is explained.
	DefaultQueueNoticeAfter = 30 * time.Second
	// maxProcessesLimit bounds the numbers a file may give (a typo of 10000
	// is refused rather than taken as "no cap").
	maxProcessesLimit = 1024
)

// limits reads the top-level process caps: max_processes (across agents)
// and queue_notice_after, with their defaults.
func (p *parser) limits(top map[string]field, cfg *Config) {
	cfg.MaxProcesses = p.count(top["max_processes"], "max_processes", DefaultMaxProcesses)
	cfg.QueueNoticeAfter = DefaultQueueNoticeAfter
	if d := p.duration(top, "queue_notice_after"); d > 0 {
		cfg.QueueNoticeAfter = d
	}
}

// SessionsPerProcessAuto is Agent.SessionsPerProcess for
// `sessions_per_process: auto`: AutoSessionsPerProcess sessions on a process
// of an agent that advertises session/close when initialized
// (sessionCapabilities.close: it is built to hold several sessions and let one
// go), else 1.
const SessionsPerProcessAuto = -1

// AutoSessionsPerProcess is how many threads one process of an agent that can
// close sessions hosts over its life under `sessions_per_process: auto`:
// enough to spare most process starts in a busy room, few enough that one
// process's memory stays bounded.
const AutoSessionsPerProcess = 8

// agentLimits reads an agent's max_processes and sessions_per_process.
func (p *parser) agentLimits(f map[string]field, path string, a *Agent) {
	a.MaxProcesses = p.count(f["max_processes"], path+".max_processes", DefaultAgentMaxProcesses)
	a.SessionsPerProcess = 1
	key := path + ".sessions_per_process"
	v, ok := p.str(f["sessions_per_process"], key)
	if !ok {
		return
	}
	if v == "auto" {
		a.SessionsPerProcess = SessionsPerProcessAuto
		return
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxProcessesLimit {
		p.errorf(f["sessions_per_process"].val, key, "must be auto or a whole number from 1 to %d, got %q", maxProcessesLimit, v)
		return
	}
	a.SessionsPerProcess = n
}

// count reads an optional whole number from 1 to maxProcessesLimit; absent
// means def.
func (p *parser) count(f field, path string, def int) int {
	v, ok := p.str(f, path)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxProcessesLimit {
		p.errorf(f.val, path, "must be a whole number from 1 to %d, got %q", maxProcessesLimit, v)
		return def
	}
	return n
}

// flag reads an optional true or false; absent means def.
func (p *parser) flag(f field, path string, def bool) bool {
	v, ok := p.str(f, path)
	if !ok {
		return def
	}
	switch v {
	case "true":
		return true
	case "false":
		return false
	}
	p.errorf(f.val, path, "must be true or false, got %q", v)
	return def
}
