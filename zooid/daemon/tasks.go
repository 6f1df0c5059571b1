package daemon

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/router"
	"github.com/zooid-dev/zooid/zooid/tasks"
	"github.com/zooid-dev/zooid/zooid/tools"
)

// taskAgents is the task manager's view of zooid.yaml: an agent's user and the
// rooms it is bound to (resolved once the transport has joined them).
func (d *Daemon) taskAgents(name string) (id.UserID, []id.RoomID, bool) {
	d.routerOnce() // resolves every agent's rooms
	rt, ok := d.agents[name]
	if !ok || rt.cfg.Matrix == nil {
		return "", nil, false
	}
	return rt.userID, rt.rooms, true
}

// wakeCaller queues a task result as a new turn of the caller's original
// session (behind a running turn); delivered tells the task journal when the
// session takes it. Results for a thread cleared since are never sent here:
// the journal skips them (ThreadCleared).
func (d *Daemon) wakeCaller(parent tasks.Parent, text string, delivered func()) {
	req := internalTurn(text, "")
	req.taken = delivered
	d.sessions.enqueue(sessionKey{agent: parent.Agent, room: parent.Room, thread: parent.ThreadRoot}, req)
}

// taskForRoot binds a task root the homeserver delivered (m carries
// dev.zooid.thread_start) to its task, so the assignee's session is gated as
// an assignee from its first turn.
func (d *Daemon) taskForRoot(m router.Message) (tasks.Task, bool) {
	if !m.IsTaskRoot || m.TaskAttempt == "" {
		return tasks.Task{}, false
	}
	return d.tasks.TaskForRoot(m.Room, m.EventID, m.Sender, m.TaskAttempt)
}

// kindFor is the tool gating of a session: the assignee of an open task may
// complete it; anyone else in a task thread may do neither; everyone else may
// delegate. A tool a session can't use is never listed.
func (d *Daemon) kindFor(key sessionKey) tools.SessionKind {
	t, ok := d.tasks.TaskByThread(key.room, key.thread)
	switch {
	case !ok:
		return tools.Conversation
	case t.IsOpen() && t.Agent == key.agent:
		return tools.TaskAssignee
	default:
		return tools.TaskThreadMember
	}
}

// taskTurn is what a turn in a task thread needs to report when it ends.
type taskTurn struct {
	task     tasks.Task
	assignee bool // else a handoff callee
}

// taskTurnFor says whether a session's turn belongs to an open task thread.
func (d *Daemon) taskTurnFor(key sessionKey) (*taskTurn, bool) {
	t, ok := d.tasks.TaskByThread(key.room, key.thread)
	if !ok || !t.IsOpen() {
		return nil, false
	}
	if t.Agent == key.agent {
		return &taskTurn{task: t, assignee: true}, true
	}
	for _, h := range t.Handoffs {
		if h.To == key.agent {
			return &taskTurn{task: t}, true
		}
	}
	return nil, false
}

// handoffs starts an in-thread handoff for every other agent the prose of a
// task-thread turn mentions: the callee runs in its own session of the thread.
func (d *Daemon) handoffs(ctx context.Context, tt *taskTurn, p *poster, text string) []id.UserID {
	var mentioned []id.UserID
	for _, to := range d.routerOnce().AtMentioned(p.room, text) {
		if to == p.agent || (!tt.assignee && inChain(tt.task, p.agent, to)) {
			// A callee naming whoever handed off to it is answering, not
			// handing off again: its result goes back when its turn ends.
			continue
		}
		rt := d.agents[to]
		mentioned = append(mentioned, rt.userID)
		err := d.tasks.StartHandoff(p.thread, p.agent, to)
		switch {
		case errors.Is(err, tasks.ErrCircularHandoff):
			p.failure(ctx, "circular_handoff", fmt.Sprintf("%s cannot hand off to %s: %s is already working on this task.", p.agent, to, to))
			continue
		case err != nil:
			d.log.Warn("handoff not started", "from", p.agent, "to", to, "err", err)
			continue
		}
		d.sessions.enqueue(sessionKey{agent: to, room: p.room, thread: p.thread}, internalTurn(text, p.as))
	}
	return mentioned
}

// inChain says whether to handed off, directly or up the chain, to callee.
func inChain(t tasks.Task, callee, to string) bool {
	if to == t.Agent {
		return true
	}
	for _, h := range t.Handoffs {
		if h.To == callee && h.From == to {
			return true
		}
	}
	return false
}

// humanMention finds @-tokens in agent prose ("@ori", "@ori:example.org").
var humanMention = regexp.MustCompile(`(?:^|[\s(\[/])@[A-Za-z0-9._=+/-]+(?::[A-Za-z0-9.-]+(?::\d+)?)?`)

// waitingOnHuman says whether an assignee's last words @-mention a person who
// is a joined member of the room (not an agent): its task then stays open for
// the reply. Tokens that name nobody here ("@types/node") don't count.
func (d *Daemon) waitingOnHuman(ctx context.Context, key sessionKey, last string) bool {
	tokens := humanMention.FindAllString(last, -1)
	if len(tokens) == 0 {
		return false
	}
	reader := d.agents[key.agent].userID
	members, err := d.transport.Client(reader).JoinedMembers(ctx, key.room)
	if err != nil {
		d.log.Warn("reading members to judge a task turn", "room", key.room, "err", err)
		return false
	}
	for _, t := range tokens {
		token := strings.TrimRight(strings.TrimLeft(t, " \t\n([/"), ".-/")
		for user, m := range members.Joined {
			if _, isAgent := d.byUser[user]; isAgent {
				continue
			}
			local, _, _ := user.Parse()
			if strings.EqualFold(token, string(user)) || strings.EqualFold(token, "@"+local) ||
				(m.DisplayName != "" && strings.EqualFold(token, "@"+m.DisplayName)) {
				return true
			}
		}
	}
	return false
}

// endTaskTurn reports a finished turn in a task thread: an assignee's turn is
// judged (which may close the task and report it); a handoff callee's result
// wakes whoever handed off to it.
// pending says more input is already queued for the session (a person's reply):
// the task is not judged on a turn that more turns will follow.
func (d *Daemon) endTaskTurn(ctx context.Context, tt *taskTurn, key sessionKey, stop string, turnErr error, lastProse string, pending bool) {
	if !tt.assignee {
		w, err := d.tasks.HandoffEnded(key.thread, key.agent, lastProse)
		if err != nil {
			d.log.Warn("ending handoff", "agent", key.agent, "thread", key.thread, "err", err)
			return
		}
		wake := internalTurn(w.Text, d.agents[key.agent].userID)
		if w.Owed {
			wake.taken = func() { d.tasks.ReturnTaken(w.Thread) }
		}
		d.sessions.enqueue(sessionKey{agent: w.Agent, room: w.Room, thread: w.Thread}, wake)
		return
	}
	out := tasks.TurnOutcome{
		StopReason:     stop,
		Err:            turnErr,
		LastProse:      lastProse,
		WaitingOnHuman: turnErr == nil && (pending || d.waitingOnHuman(ctx, key, lastProse)),
		// A zooid_handoff of the assignee's: its return is a turn still to come.
		HandoffOutstanding: d.tasks.HandoffOutstanding(key.room, key.thread, key.agent),
	}
	if err := d.tasks.TurnEnded(ctx, key.thread, out); err != nil {
		d.log.Error("judging task turn", "agent", key.agent, "thread", key.thread, "err", err)
	}
}

// startCallee runs a zooid_handoff's callee in its own session of the
// caller's thread: the tool's prompt under a header saying where its answer
// goes, or a callee's mentioning prose as it was posted.
func (d *Daemon) startCallee(h tasks.ThreadHandoff) {
	text := h.Prompt
	if !h.Mentioned {
		text = fmt.Sprintf("[zooid handoff] %s handed this to you in this thread (zooid_handoff). Work on it here; "+
			"when you end your turn, your last message goes back to %s, so end with your answer.\n\n%s", h.From, h.From, h.Prompt)
	}
	d.sessions.enqueue(sessionKey{agent: h.To, room: h.Room, thread: h.Thread}, internalTurn(text, h.FromUser))
}

// mentionHandoffs hands off, for a session working on a handoff, to each other
// agent its prose @mentions: it is not done until they are. Anyone else's
// prose wakes nobody (§2), as before.
func (d *Daemon) mentionHandoffs(p *poster, text string) []id.UserID {
	if !d.tasks.IsHandoffCallee(p.room, p.thread, p.agent) {
		return nil
	}
	var mentioned []id.UserID
	for _, to := range d.routerOnce().AtMentioned(p.room, text) {
		h, ok := d.tasks.MentionHandoff(p.room, p.thread, p.agent, to, text)
		if !ok {
			// Naming whoever handed off to it (or itself) is answering.
			continue
		}
		mentioned = append(mentioned, h.ToUser)
		d.startCallee(h)
	}
	return mentioned
}

// handoffTurnEnded returns a handoff once its callee is really done: this
// turn ended, no other turn is queued for it, and no handoff of its own is
// outstanding (an agent it handed to, or @mentioned, is waited for). last is
// the turn's final prose, the return's message; turnErr why the turn failed.
func (d *Daemon) handoffTurnEnded(s *session, last string, turnErr error) {
	key := s.key
	hs := d.tasks.CalleeOf(key.room, key.thread, key.agent)
	if len(hs) == 0 || s.pending() || d.tasks.HandoffOutstanding(key.room, key.thread, key.agent) {
		return
	}
	for _, h := range hs {
		if err := d.tasks.CalleeDone(h.ID, last, turnErr); err != nil {
			d.log.Error("returning a handoff", "id", h.ID, "from", h.From, "to", h.To, "err", err)
		}
	}
}
