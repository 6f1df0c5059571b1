package router

import (
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/zevent"
)

// Decision is everything the router decided about one inbound event, as a
// value: the daemon carries it out (ends sessions, journals, enqueues turns),
// the trace records it, and a replay compares the recorded one with today's.
type Decision struct {
	// Room is the event's room; Thread its thread root, "" at top level.
	Room   id.RoomID
	Thread id.EventID
	// Reset is a /clear in Thread: every session of the thread ends, and so
	// do the task wakes its caller was still owed there. Routing memory of the
	// thread survives, so a later bare reply still finds its addressee.
	Reset bool
	// Recall says routing needed Thread's memory read back from the
	// homeserver first (Facts.ThreadHistory): a person's bare reply in a
	// thread the router held no memory of. It is set whether or not the read
	// succeeded; without it the reply is routed with no addressee.
	Recall bool
	// TaskRoot is the assignee of the journaled task whose root the event is
	// ("" for any other event): that root opens a task thread, and the
	// assignee's first prompt there says who delegated and how to finish.
	TaskRoot string
	// Wakes are the agents to prompt, in configuration order; each runs in
	// the session (Agent, Room, ThreadRoot).
	Wakes []Wake
	// Why says why nobody woke (one of the WhyNot*, WhyReset, WhyTaskResult,
	// WhyAgentPost constants); "" when an agent did.
	Why string
}

// Why nobody woke: the rule of §2 or §5 that kept the event from any agent.
const (
	// WhyNotMessage: not a routable m.room.message (state, reaction, edit, no
	// string body, …).
	WhyNotMessage = "not_a_message"
	// WhyReset: a /clear, which ends sessions and starts none.
	WhyReset = "session_reset"
	// WhyTaskResult: content carrying dev.zooid.thread_result wakes nobody.
	WhyTaskResult = "task_result"
	// WhyAgentPost: an agent's post wakes nobody (a task root whose
	// assignee is not bound to the room included), and so does a post of
	// another daemon's agent (Router.LearnAgents).
	WhyAgentPost = "agent_post"
	// WhyHandoff: a zooid_handoff's notice (dev.zooid.handoff) wakes nobody:
	// the daemon runs the callee itself, once, from its journal; the callee
	// becomes the thread's addressee.
	WhyHandoff = "handoff"
	// WhyNotAddressed: no agent bound to the room was mentioned or addressed
	// (a person's m.notice included).
	WhyNotAddressed = "nobody_addressed"
	// WhyTaskClosed: a task root met again after the journal closed its task
	// (redelivered after a restart that reported it interrupted): its
	// assignee is not woken for a task already reported (Facts.TaskRoot says
	// closed; Decision.TaskRoot names the assignee).
	WhyTaskClosed = "task_closed"
	// WhyEncrypted: an m.room.encrypted event, which this daemon cannot read
	// (behaviour §10): it wakes nobody, and the room is told so instead.
	WhyEncrypted = "encrypted"
)

// Facts are what routing needs that the router cannot know itself: the task
// journal and the room's history, both the daemon's. Decide asks for them only
// when a rule needs them, in the order the rules meet them, and outside its
// lock, so a slow read of one room's history holds up no other room.
type Facts interface {
	// TaskThread names the assignee of the journaled task whose thread is
	// (room, root) and the user of the agent that delegated it. Decide asks
	// only for a thread it has no memory of (evicted, or from before this
	// start): a bare reply there must still go to the assignee alone.
	TaskThread(room id.RoomID, root id.EventID) (assignee string, delegator id.UserID, ok bool)
	// TaskRoot says whether m, which carries dev.zooid.thread_start, is the
	// root of a task the daemon journaled (or adopted, from another daemon's
	// agent), and names that task's assignee; the field alone, from anyone
	// else, is just content. closed says the journal has closed that task
	// already (the root redelivered after a restart reported it): the root
	// wakes nobody. It may wait for the root's own post to be journaled, and
	// binds the root to its task.
	TaskRoot(m Message) (assignee string, closed, ok bool)
	// ThreadHistory reads m's thread back: its root and the replies before m,
	// oldest first, as routing must see them (a root's thread_start kept only
	// when journaled). ok is false when it could not be read; m is then
	// routed without the memory and the next bare reply reads it again.
	ThreadHistory(m Message) (past []Message, ok bool)
}

// Decide turns one inbound event of a bound room into the decision on it,
// and updates the router's memory of its thread as the decision implies. It
// returns the routing view of the event too (zero when it is not a message).
// Events of one room must be decided in their order.
func (r *Router) Decide(ev *event.Event, f Facts) (Message, Decision) {
	m, ok := MessageFromEvent(ev)
	if !ok {
		var room id.RoomID
		why := WhyNotMessage
		if ev != nil {
			room = ev.RoomID
			if ev.Type.Type == event.EventEncrypted.Type {
				why = WhyEncrypted
			}
		}
		if u, a, isAgent := zevent.AgentOf(ev); isAgent || (ev != nil && ev.Type.Type == zevent.StateAgent.Type && ev.StateKey != nil && id.UserID(*ev.StateKey) == ev.Sender) {
			// Another daemon's agent joined the room's Zooid agents (or, with
			// no name, left them).
			if !isAgent {
				u = ev.Sender
			}
			r.mu.Lock()
			r.noteOtherLocked(room, u, a)
			r.mu.Unlock()
		}
		return Message{}, Decision{Room: room, Why: why}
	}
	d := Decision{Room: m.Room, Thread: m.ThreadRoot}
	if m.IsReset {
		r.reset(m.Room, m.ThreadRoot)
		d.Reset, d.Why = true, WhyReset
		return m, d
	}
	if m.ThreadRoot != "" {
		r.rememberTaskThread(m.Room, m.ThreadRoot, f)
		if r.needsThreadMemory(m) {
			d.Recall = true
			if past, ok := f.ThreadHistory(m); ok {
				r.recall(m.Room, m.ThreadRoot, past)
			}
		}
	}
	if m.IsTaskRoot {
		switch assignee, closed, ok := f.TaskRoot(m); {
		case !ok:
			m.IsTaskRoot, m.TaskAssignee, m.TaskAttempt = false, "", ""
		case closed:
			// Its thread is the task's, as any closed task thread's is; its
			// assignee is not set to work that nobody waits for any more.
			m.TaskAssignee, d.TaskRoot = assignee, assignee
			r.mu.Lock()
			r.noteTaskRoot(m)
			r.mu.Unlock()
			d.Why = WhyTaskClosed
			return m, d
		default:
			// The journal's name: a root from another daemon addresses its
			// assignee as workstation.name.
			m.TaskAssignee, d.TaskRoot = assignee, assignee
		}
	}
	d.Wakes = r.route(m)
	if len(d.Wakes) == 0 {
		d.Why = r.whyNobody(m)
	}
	return m, d
}

// rememberTaskThread tells the router a thread is a task thread when its
// memory of the root is gone but the journal holds the task.
func (r *Router) rememberTaskThread(room id.RoomID, root id.EventID, f Facts) {
	if _, known := r.Thread(room, root); known {
		return
	}
	assignee, delegator, ok := f.TaskThread(room, root)
	if !ok {
		return
	}
	r.observe(Message{Room: room, EventID: root, Sender: delegator, IsTaskRoot: true, TaskAssignee: assignee})
}

func (r *Router) isOther(m Message) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.isOtherLocked(m)
}

// whyNobody names the rule that kept a routed message m from every agent.
func (r *Router) whyNobody(m Message) string {
	switch {
	case m.IsTaskResult:
		return WhyTaskResult
	case m.HandoffTo != "" && r.byUser[m.Sender] != nil:
		return WhyHandoff
	case r.byUser[m.Sender] != nil:
		return WhyAgentPost
	case r.isOther(m):
		return WhyAgentPost
	default:
		return WhyNotAddressed
	}
}
