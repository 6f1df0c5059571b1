package tasks

import (
	"context"
	"fmt"

	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/internal/faultpoint"
	"github.com/zooid-dev/zooid/zooid/tools"
	"github.com/zooid-dev/zooid/zooid/zevent"
)

// Tasks across daemons (behaviour.md §9): the caller's daemon posts the root
// as for any task, mentioning another daemon's agent (Remote); that daemon
// adopts the root (Adopt), runs the task as its own and posts the result in
// the thread, as for notify none; the caller's daemon closes its task from
// that event (RemoteResult) and reports it to the caller. Each side's
// journal makes its part happen once across its restarts.

// Adopt journals, once, the task of a root another daemon's agent (sender)
// posted in room for this daemon's agent assignee (user): open, its thread
// the root, reported only in the thread. A root met again (redelivered, or
// after a restart) gives the task journaled the first time.
func (m *Manager) Adopt(room id.RoomID, root id.EventID, sender id.UserID, start zevent.ThreadStart, assignee string, user id.UserID, prompt string) (Task, bool) {
	if start.AttemptID == "" || root == "" {
		return Task{}, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if t, ok := m.tasks[start.AttemptID]; ok {
		if t.Adopted && t.Room == room && t.ThreadID == root && t.Parent.UserID == sender {
			return t.clone(), true
		}
		return Task{}, false
	}
	t := &Task{
		AttemptID: start.AttemptID,
		Agent:     assignee,
		AgentUser: user,
		Room:      room,
		ThreadID:  root,
		Prompt:    prompt,
		Notify:    tools.NotifyNone,
		Parent: Parent{
			Agent:      start.Parent.Agent,
			UserID:     sender,
			Room:       room,
			ThreadRoot: start.Parent.ThreadRoot,
		},
		State:   StateOpen,
		Created: m.opts.Now().UTC(),
		Adopted: true,
	}
	faultpoint.Reach(faultpoint.TaskAdopting)
	if err := m.j.put(t); err != nil {
		m.log.Error("journaling an adopted task", "attempt", t.AttemptID, "thread", root, "err", err)
		return Task{}, false
	}
	m.tasks[t.AttemptID] = t
	m.byThread[root] = t
	m.log.Info("task of another daemon's agent adopted", "attempt", t.AttemptID, "thread", root, "agent", assignee, "from", sender)
	faultpoint.Reach(faultpoint.TaskAdopted)
	m.pokeWatch()
	return t.clone(), true
}

// RemoteResult closes the open Remote task of thread (room, root) with the
// result its assignee's daemon posted there as the assignee (sender), and
// reports it to the caller. An event of anyone else, for a task that is not
// Remote or is closed already (a redelivery, a timeout first), changes
// nothing: the task is reported once.
func (m *Manager) RemoteResult(ctx context.Context, room id.RoomID, root id.EventID, sender id.UserID, r zevent.ThreadResult) error {
	m.mu.Lock()
	t, ok := m.byThread[root]
	if !ok || !t.Remote || t.Room != room || t.AgentUser != sender || !t.IsOpen() {
		m.mu.Unlock()
		return nil
	}
	prev := t.clone()
	m.closeLocked(t, &Result{Status: r.Status, Output: r.Output, Reason: r.Reason, Error: r.Error}, m.opts.Now().UTC())
	if err := m.j.put(t); err != nil {
		*t = prev
		m.mu.Unlock()
		return fmt.Errorf("journaling the result of task %s: %w", t.AttemptID, err)
	}
	attempt := t.AttemptID
	m.mu.Unlock()
	m.report(ctx, attempt)
	return nil
}
