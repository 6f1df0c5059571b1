package daemon

import (
	"context"
	"slices"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/history"
	"github.com/zooid-dev/zooid/zooid/router"
	"github.com/zooid-dev/zooid/zooid/tasks"
	"github.com/zooid-dev/zooid/zooid/zevent"
)

// handleEvent is the transport's callback for every event of a bound room, in
// order per room. It must not block on agents: it only queues turns.
func (d *Daemon) handleEvent(ctx context.Context, ev *event.Event) {
	select {
	case <-d.intakeOpen:
	case <-ctx.Done():
		return
	}
	facts := &routingFacts{d: d, ctx: ctx, ev: ev}
	msg, dec := d.routerOnce().Decide(ev, facts)
	if !d.ownMarking(ev) {
		d.trace.Record(d.traceEvent(ev, msg, dec))
	}
	d.carryOut(dec, facts.task)
	d.encryptedRoom(ctx, ev)
	if dec.Why == router.WhyNotMessage {
		d.remoteResult(ctx, ev)
	}
	if msg.EventID != "" {
		d.otherDaemonsHandoff(msg, ev)
	}
}

// carryOut does what the router decided about one event. task is the
// journaled task whose root the event is, when the decision names one.
func (d *Daemon) carryOut(dec router.Decision, task *tasks.Task) {
	if dec.Reset {
		if err := d.tasks.ThreadCleared(dec.Room, dec.Thread); err != nil {
			d.log.Error("journaling a cleared thread", "room", dec.Room, "thread", dec.Thread, "err", err)
		}
		d.tasks.HandoffThreadCleared(dec.Room, dec.Thread)
		// /clear ends every session of the thread, not only those the router
		// woke: handoff callees and task-result wakes open sessions too.
		for _, agent := range d.sessions.endThread(dec.Room, dec.Thread) {
			d.log.Info("session cleared", "agent", agent, "room", dec.Room, "thread", dec.Thread)
		}
	}
	for _, w := range dec.Wakes {
		key := sessionKey{agent: w.Agent, room: w.Room, thread: w.ThreadRoot}
		text := w.Text
		if task != nil && w.Agent == dec.TaskRoot && w.ThreadRoot == w.EventID {
			// The assignee's first prompt says who delegated and how to finish.
			text = tasks.Header(*task) + "\n\n" + text
		}
		d.log.Debug("waking agent", "agent", w.Agent, "room", w.Room, "thread", w.ThreadRoot, "event", w.EventID)
		req := eventTurn(text, w.EventID, w.Sender)
		if !d.journalTurn(key, req) {
			continue
		}
		req.visible = d.checkVisible(key, req.trigger)
		d.sessions.enqueue(key, req)
	}
}

// routerOnce builds the router on first use, once the transport is ready: by
// then it has resolved every configured room to its id.
func (d *Daemon) routerOnce() *router.Router {
	d.routerInit.Do(func() { d.router = d.buildRouter() })
	return d.router
}

// routingFacts answers the router's questions about one event (router.Facts)
// from the task journal and the room's history.
type routingFacts struct {
	d   *Daemon
	ctx context.Context
	// ev is the event decided on: a root from another daemon carries its
	// delegator in dev.zooid.thread_start, which no routing fact holds.
	ev *event.Event
	// task is the journaled task whose root the event is, once TaskRoot found
	// it; kept here for the assignee's header, whose delegator is no routing fact.
	task *tasks.Task
}

func (f *routingFacts) TaskThread(room id.RoomID, root id.EventID) (string, id.UserID, bool) {
	t, ok := f.d.tasks.TaskByThread(room, root)
	return t.Agent, t.Parent.UserID, ok
}

func (f *routingFacts) TaskRoot(m router.Message) (string, bool, bool) {
	t, ok := f.d.taskForRoot(m)
	if !ok {
		t, ok = f.d.adoptTaskRoot(m, f.ev)
	}
	if !ok {
		return "", false, false
	}
	f.task = &t
	return t.Agent, !t.IsOpen(), true
}

func (f *routingFacts) ThreadHistory(m router.Message) ([]router.Message, bool) {
	return f.d.recallThread(f.ctx, m)
}

// Start-up and recall bounds. An attempt whose root post was in flight at a
// crash is looked for in its room's newest adoptDepth messages (one /messages
// request, up to adoptRequests on a server that applies the message filter after
// the page limit). A thread the router holds no memory of is recalled from its
// root and newest recallDepth replies, within recallTimeout: the room's intake
// waits for it, and on a failure the reply is routed without the memory.
const (
	adoptDepth    = 500
	adoptRequests = 4
	recallDepth   = 100
	recallTimeout = 30 * time.Second
)

// adoptTaskRoots reads the recent history of each room where a task's root post
// was in flight at a crash, so a root that landed is adopted before Recover would
// cancel its task (tasks.Manager.TaskForRoot); its delivery, still owed, wakes the
// assignee. Routing memory is not rebuilt here: a thread is recalled when a reply
// needs it (recallThread). With no such task, start-up reads no history.
func (d *Daemon) adoptTaskRoots(ctx context.Context) {
	for _, room := range d.tasks.UncertainRooms() {
		reader, ok := d.readerOf(room)
		if !ok {
			continue
		}
		// history.RecentMessages pages on where a server filters after the
		// limit, so a run of reactions doesn't hide the root.
		chunk, err := history.RecentMessages(ctx, d.transport.Client(reader), room, adoptDepth, adoptRequests, d.transport.Decrypted)
		if err != nil {
			d.log.Warn("looking for task roots posted before a crash", "room", room, "err", err)
		}
		for i := len(chunk) - 1; i >= 0; i-- {
			ev := chunk[i]
			ev.RoomID = room
			if msg, ok := router.MessageFromEvent(ev); ok && msg.IsTaskRoot {
				d.taskForRoot(msg)
			}
		}
	}
}

// readerOf picks the agent whose identity reads room's history for routing: the
// first in configuration order bound to it.
func (d *Daemon) readerOf(room id.RoomID) (id.UserID, bool) {
	d.routerOnce() // resolves every agent's rooms
	for _, a := range d.opts.Config.Agents {
		if rt := d.agents[a.Name]; rt.cfg.Matrix != nil && slices.Contains(rt.rooms, room) {
			return rt.userID, true
		}
	}
	return "", false
}

// recallThread reads msg's thread back for the router when routing msg needs
// its memory: after a restart, an eviction, or for a thread whose root predates
// this daemon. It returns the root and the newest replies before msg, oldest
// first; only roots this daemon journaled open task threads.
func (d *Daemon) recallThread(ctx context.Context, msg router.Message) ([]router.Message, bool) {
	reader, ok := d.readerOf(msg.Room)
	if !ok {
		return nil, false
	}
	ctx, cancel := context.WithTimeout(ctx, recallTimeout)
	defer cancel()
	root, replies, err := history.ThreadTail(ctx, d.transport.Client(reader), msg.Room, msg.ThreadRoot, recallDepth, d.transport.Decrypted)
	if err != nil {
		d.log.Warn("recalling thread memory", "room", msg.Room, "thread", msg.ThreadRoot, "err", err)
		return nil, false
	}
	// Replies newer than msg (the room's intake may lag the server) are not
	// history yet for msg.
	for i, ev := range replies {
		if ev.ID == msg.EventID {
			replies = replies[i+1:]
			break
		}
	}
	var past []router.Message
	if root != nil {
		if m, ok := router.MessageFromEvent(root); ok {
			// As for a live root (Facts.TaskRoot): the field alone, unjournaled, is content.
			if _, journaled := d.tasks.TaskByThread(msg.Room, root.ID); m.IsTaskRoot && !journaled {
				m.IsTaskRoot, m.TaskAssignee, m.TaskAttempt = false, "", ""
			}
			past = append(past, m)
		}
	}
	for i := len(replies) - 1; i >= 0; i-- {
		if m, ok := router.MessageFromEvent(replies[i]); ok {
			past = append(past, m)
		}
	}
	return past, true
}

// ownMarking says ev is this daemon's own agents marking themselves as Zooid
// agents in a room (dev.zooid.agent) or the power-level change that lets
// them (matrix/agents.go): the daemon's bookkeeping at start, not something
// the room said to it. The flight recorder leaves it out, so a replay, whose
// room is made by the harness and whose daemon may or may not be let mark
// its agents, compares what the room said and nothing of that set-up
// (cmd/zooid TestWalkThrough replays a room the daemon made itself).
func (d *Daemon) ownMarking(ev *event.Event) bool {
	if _, own := d.byUser[ev.Sender]; !own {
		return false
	}
	switch ev.Type.Type {
	case zevent.StateAgent.Type:
		return true
	case event.StatePowerLevels.Type:
		events, _ := ev.Content.Raw["events"].(map[string]any)
		_, marks := events[zevent.StateAgent.Type]
		return marks
	}
	return false
}
