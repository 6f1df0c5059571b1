package tasks

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"maunium.net/go/mautrix/id"
)

// Handoff errors. The daemon posts a circular refusal as an error event in the thread.
var (
	// ErrCircularHandoff refuses a handoff to an agent already in the chain (the
	// assignee, or a caller or callee of an outstanding handoff).
	ErrCircularHandoff = errors.New("circular_handoff")
	// ErrNoOpenTask: the thread is not the thread of an open task.
	ErrNoOpenTask = errors.New("no_open_task")
	// ErrNotHandoffParty: the mentioning agent is neither the assignee nor the callee
	// of an outstanding handoff, so its mention is not a handoff.
	ErrNotHandoffParty = errors.New("not_handoff_party")
	// ErrNoHandoff: no outstanding handoff to that agent.
	ErrNoHandoff = errors.New("no_handoff")
)

// HandoffWake says whom to wake when a handoff ends: the agent that handed off, in the
// task thread, with the callee's result.
type HandoffWake struct {
	// Agent is the agent to wake (the From of the handoff).
	Agent string
	// Room and Thread are the task thread.
	Room   id.RoomID
	Thread id.EventID
	// Text is the prompt for that turn.
	Text string
	// Owed: the wake goes to the assignee, whose task is not judged until
	// the turn is taken up (ReturnTaken).
	Owed bool
}

// ReturnTaken records that the assignee's session of thread took up a
// handoff's return (a HandoffWake with Owed): the end of that turn is
// judged again.
func (m *Manager) ReturnTaken(thread id.EventID) {
	// ReturnsOwed is not journaled, so no update (and no journal write).
	m.mu.Lock()
	defer m.mu.Unlock()
	if t, ok := m.byThread[thread]; ok && t.ReturnsOwed > 0 {
		t.ReturnsOwed--
	}
}

// StartHandoff records that from @mentioned to in the thread of an open task: a
// handoff. from must be the assignee or the callee of an outstanding handoff (a chain);
// to must be a configured agent bound to the task's room and not already in the chain,
// else ErrCircularHandoff. Call it when the mentioning prose is posted, before
// TurnEnded of that turn, so the judge sees the handoff outstanding. The daemon then
// runs to in its own session of the task thread.
func (m *Manager) StartHandoff(thread id.EventID, from, to string) error {
	m.mu.Lock()
	t, ok := m.byThread[thread]
	if !ok || t.State != StateOpen {
		m.mu.Unlock()
		return fmt.Errorf("handoff %s → %s in %s: %w", from, to, thread, ErrNoOpenTask)
	}
	attempt, room := t.AttemptID, t.Room
	m.mu.Unlock()
	_, rooms, known := m.opts.Agents(to)
	if !known || !slices.Contains(rooms, room) {
		return fmt.Errorf("handoff %s → %s in %s: %q is not an agent of this room", from, to, thread, to)
	}
	_, err := m.update(attempt, func(t *Task) error {
		if t.State != StateOpen {
			return ErrNoOpenTask
		}
		chain := []string{t.Agent}
		for _, h := range t.Handoffs {
			chain = append(chain, h.From, h.To)
		}
		party := from == t.Agent
		for _, h := range t.Handoffs {
			party = party || h.To == from
		}
		if !party {
			return ErrNotHandoffParty
		}
		if to == from || slices.Contains(chain, to) {
			return ErrCircularHandoff
		}
		t.Handoffs = append(t.Handoffs, Handoff{From: from, To: to, Started: m.opts.Now().UTC()})
		return nil
	})
	if err != nil {
		return fmt.Errorf("handoff %s → %s in %s: %w", from, to, thread, err)
	}
	m.log.Info("handoff started", "thread", thread, "from", from, "to", to)
	return nil
}

// HandoffEnded records that the turn of callee to, handed off in thread, has ended with
// result (its last prose; empty for none). It returns whom to wake with it. Once no
// handoff is outstanding, the assignee may complete again and its turn ends are judged.
func (m *Manager) HandoffEnded(thread id.EventID, to, result string) (HandoffWake, error) {
	m.mu.Lock()
	t, ok := m.byThread[thread]
	if !ok || t.State != StateOpen {
		m.mu.Unlock()
		return HandoffWake{}, fmt.Errorf("handoff to %s in %s ended: %w", to, thread, ErrNoOpenTask)
	}
	attempt := t.AttemptID
	m.mu.Unlock()
	var w HandoffWake
	_, err := m.update(attempt, func(t *Task) error {
		i := slices.IndexFunc(t.Handoffs, func(h Handoff) bool { return h.To == to })
		if i < 0 || t.State != StateOpen {
			return ErrNoHandoff
		}
		h := t.Handoffs[i]
		// A callee's own handoffs end with it: their results have nobody to go to.
		t.Handoffs = slices.DeleteFunc(t.Handoffs, func(x Handoff) bool { return x == h || x.From == to })
		w = HandoffWake{Agent: h.From, Room: t.Room, Thread: t.ThreadID, Text: handoffText(h.To, result)}
		if h.From == t.Agent {
			// In the same update as the handoff's end, so a judge of the
			// assignee's turn sees the handoff or its return, never neither:
			// the daemon judged a turn that had ended before the return while
			// it read the room's members, and closed the task with the
			// mention as its result (tasks_conversation.feature on Synapse).
			t.ReturnsOwed++
			w.Owed = true
		}
		return nil
	})
	if err != nil {
		return HandoffWake{}, fmt.Errorf("handoff to %s in %s ended: %w", to, thread, err)
	}
	return w, nil
}

func handoffText(to, result string) string {
	result = strings.TrimSpace(result)
	if result == "" {
		return fmt.Sprintf("[zooid] %s, whom you mentioned in this task thread, ended its turn without a reply.", to)
	}
	return fmt.Sprintf("[zooid] %s, whom you mentioned in this task thread, replied:\n\n%s", to, result)
}

// Header is the short header of the assignee's first prompt in a task thread.
func Header(t Task) string {
	who := t.Parent.Agent
	if t.Parent.UserID != "" {
		who = fmt.Sprintf("%s (%s)", t.Parent.Agent, t.Parent.UserID)
	}
	return fmt.Sprintf("[zooid task] %s delegated this task to you; you are its assignee in this thread. "+
		"Finish by calling zooid_complete_task with your result, or just end your turn: your last message becomes the result. "+
		"You cannot start task threads here, but you can @mention another agent in this thread to hand work to it; its reply comes back to you.",
		who)
}
