package tasks

import (
	"context"
	"time"

	"github.com/zooid-dev/zooid/zooid/trace"
)

// journalRetry is how long Watch waits before trying again to close tasks
// whose close the journal refused: soon enough that a passing fault holds a
// slot briefly, not so soon that a broken disk spins.
const journalRetry = 10 * time.Second

// Watch closes each open task once it has been open for Options.Timeout: as
// timed_out, journaled before it is reported (like any result: the thread
// result, and with notify caller the notice and one wake), so its slot of
// the room is free at once and a restart neither reports it again nor opens
// it again. A reply in its thread from then on is an ordinary message to the
// assignee: the task is closed, so no turn of it is judged. It returns a
// handoff to another daemon's agent timed_out at the same bound
// (returnOverdueHandoffs).
//
// The daemon runs Watch on a goroutine it owns, from when Recover has run
// until the daemon stops; Watch returns when ctx ends or Close begins. Tasks
// Open found open are Recover's to close, never Watch's. It sleeps until the
// next deadline, so it costs nothing while no task is open and no remote
// handoff runs.
func (m *Manager) Watch(ctx context.Context) {
	if !m.enter() {
		return
	}
	defer m.wg.Done()
	for {
		var timer *time.Timer
		var due <-chan time.Time
		wait, ok := m.closeOverdue()
		hwait, hok := m.returnOverdueHandoffs()
		if hok && (!ok || hwait < wait) {
			wait, ok = hwait, true
		}
		if ok {
			timer = time.NewTimer(wait)
			due = timer.C
		}
		stop := false
		select {
		case <-ctx.Done():
			stop = true
		case <-m.done:
			stop = true
		case <-m.poke:
		case <-due:
		}
		if timer != nil {
			timer.Stop()
		}
		if stop {
			return
		}
	}
}

// closeOverdue closes, in one journal write, every open task past its
// deadline and hands each to its report. It says how long until the next
// deadline of a task still open (false: none is open, so Watch waits for a
// poke).
func (m *Manager) closeOverdue() (time.Duration, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closing {
		return 0, false
	}
	now := m.opts.Now().UTC()
	var due []*Task
	var prev []Task
	var next time.Time
	for a, t := range m.tasks {
		// Reserved tasks are in their root post (bounded by PostTimeout),
		// which pokes when it opens them.
		if t.State != StateOpen || m.stale[a] {
			continue
		}
		if !m.overdue(t, now) {
			if d := m.deadline(t); next.IsZero() || d.Before(next) {
				next = d
			}
			continue
		}
		prev = append(prev, t.clone())
		m.closeLocked(t, timedOutResult(t), now)
		due = append(due, t)
	}
	if err := m.j.put(due...); err != nil {
		for i, t := range due {
			*t = prev[i]
		}
		m.log.Error("journaling tasks that passed task_timeout; trying again", "count", len(due), "retry_in", journalRetry, "err", err)
		return journalRetry, true
	}
	for _, t := range due {
		m.log.Info("task timed out", "attempt", t.AttemptID, "agent", t.Agent, "room", t.Room, "thread", t.ThreadID,
			"caller", t.Parent.Agent, "open_for", now.Sub(t.Created).Round(time.Second), "timeout", m.opts.Timeout)
		m.reportLaterLocked(t.AttemptID)
	}
	if next.IsZero() {
		return 0, false
	}
	return next.Sub(now), true
}

// returnOverdueHandoffs returns timed_out every handoff to another daemon's
// agent still running Options.Timeout after it was admitted, journaled before
// its caller is woken (once, as for any return), and says how long until the
// next such deadline (false: none runs). Only a Remote handoff can wait that
// long: a callee of this daemon is run, and cut short by a restart, here,
// while a remote one's return rests on a daemon that may never come back.
func (m *Manager) returnOverdueHandoffs() (time.Duration, bool) {
	m.mu.Lock()
	if m.closing {
		m.mu.Unlock()
		return 0, false
	}
	now := m.opts.Now().UTC()
	var due []string
	var next time.Time
	retry := false
	for _, h := range m.handoffs {
		if !h.Remote || h.State != HandoffRunning {
			continue
		}
		deadline := h.Created.Add(m.opts.Timeout)
		if now.Before(deadline) {
			if next.IsZero() || deadline.Before(next) {
				next = deadline
			}
			continue
		}
		prev := *h
		h.State, h.Reason, h.Returned = HandoffReturned, ReasonHandoffTimedOut, now
		if err := m.j.putHandoff(h); err != nil {
			*h = prev
			m.log.Error("journaling a handoff that passed task_timeout; trying again", "id", h.ID, "retry_in", journalRetry, "err", err)
			retry = true
			continue
		}
		m.log.Info("handoff timed out", "id", h.ID, "from", h.From, "to", h.To, "room", h.Room, "thread", h.Thread,
			"running_for", now.Sub(h.Created).Round(time.Second), "timeout", m.opts.Timeout)
		due = append(due, h.ID)
	}
	m.mu.Unlock()
	for _, hid := range due {
		if h, ok := m.handoffSnapshot(hid); ok {
			m.opts.Trace.Record(handoffStep(h, trace.StepHandoffReturned))
		}
		m.wakeHandoffCaller(hid, false)
	}
	switch {
	case retry && (next.IsZero() || next.Sub(now) > journalRetry):
		return journalRetry, true
	case next.IsZero():
		return 0, false
	}
	return next.Sub(now), true
}

// deadline is when t passes Options.Timeout: counted from its admission, so
// every turn, handoff and wait for a person falls within the one bound.
func (m *Manager) deadline(t *Task) time.Time { return t.Created.Add(m.opts.Timeout) }

// overdue says whether t has passed its deadline at now.
func (m *Manager) overdue(t *Task, now time.Time) bool { return !now.Before(m.deadline(t)) }

// timedOutResult is the result of a task closed at its deadline: what the
// assignee recorded, else what it last said (usually the question nobody
// answered), so the caller can say what the task was waiting on.
func timedOutResult(t *Task) *Result {
	output := t.Summary
	if output == "" {
		output = t.LastProse
	}
	return &Result{Status: StatusTimedOut, Output: output}
}

// pokeWatch tells Watch a task opened. It takes no lock and never blocks
// (callers may hold m.mu); one poke outstanding is enough, since Watch then
// looks at every task.
func (m *Manager) pokeWatch() {
	select {
	case m.poke <- struct{}{}:
	default:
	}
}
