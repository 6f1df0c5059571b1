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
	"github.com/zooid-dev/zooid/zooid/trace"
)

// handleEvent is the transport's callback for every event of a bound room, in
// order per room. It must not block on agents: it only queues turns.
func (d *Daemon) handleEvent(ctx context.Context, ev *event.Event) {
	select {
	case <-d.intakeOpen:
	case <-ctx.Done():
		return
	}
	r := d.routerOnce()
	msg, ok := router.MessageFromEvent(ev)
	if !ok {
		d.trace.Record(d.traceEvent(ev, router.Message{}, nil, trace.WhyNotMessage))
		return
	}
	if msg.IsReset {
		d.trace.Record(d.traceEvent(ev, msg, nil, trace.WhyReset))
		// /clear ends every session of the thread, not only those the router
		// woke: handoff callees and task-result wakes open sessions too.
		r.Reset(msg.Room, msg.ThreadRoot)
		if err := d.tasks.ThreadCleared(msg.Room, msg.ThreadRoot); err != nil {
			d.log.Error("journaling a cleared thread", "room", msg.Room, "thread", msg.ThreadRoot, "err", err)
		}
		for _, agent := range d.sessions.endThread(msg.Room, msg.ThreadRoot) {
			d.log.Info("session cleared", "agent", agent, "room", msg.Room, "thread", msg.ThreadRoot)
		}
		return
	}
	if msg.ThreadRoot != "" {
		d.rememberTaskThread(r, msg.Room, msg.ThreadRoot)
		if r.NeedsThreadMemory(msg) {
			d.recallThread(ctx, r, msg)
		}
	}
	var task *tasks.Task
	if msg.IsTaskRoot {
		if t, ok := d.noteTaskRoot(ev); ok {
			task = &t
		} else {
			// Only roots this daemon posted (and journaled) open task threads:
			// the field alone, from anyone, is just content.
			msg.IsTaskRoot, msg.TaskAssignee = false, ""
		}
	}
	wakes := r.Route(msg)
	d.trace.Record(d.traceEvent(ev, msg, wakes, ""))
	for _, w := range wakes {
		key := sessionKey{agent: w.Agent, room: w.Room, thread: w.ThreadRoot}
		text := w.Text
		if task != nil && task.Agent == w.Agent && w.ThreadRoot == ev.ID {
			// The assignee's first prompt says who delegated and how to finish.
			text = tasks.Header(*task) + "\n\n" + text
		}
		d.log.Debug("waking agent", "agent", w.Agent, "room", w.Room, "thread", w.ThreadRoot, "event", w.EventID)
		req := eventTurn(text, w.EventID, w.Sender)
		if !d.journalTurn(key, req) {
			continue
		}
		d.sessions.enqueue(key, req)
	}
}

// routerOnce builds the router on first use, once the transport is ready: by
// then it has resolved every configured room to its id.
func (d *Daemon) routerOnce() *router.Router {
	d.routerInit.Do(func() { d.router = d.buildRouter() })
	return d.router
}

// rememberTaskThread tells the router a thread is a task thread when its memory
// of the root is gone (evicted, or from before this daemon started): a bare
// reply there must still go to the assignee, and never to trigger-any agents.
func (d *Daemon) rememberTaskThread(r *router.Router, room id.RoomID, root id.EventID) {
	if _, known := r.Thread(room, root); known {
		return
	}
	t, ok := d.tasks.TaskByThread(room, root)
	if !ok {
		return
	}
	r.Observe(router.Message{Room: room, EventID: root, Sender: t.Parent.UserID, IsTaskRoot: true, TaskAssignee: t.Agent})
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
		chunk, err := history.RecentMessages(ctx, d.transport.Client(reader), room, adoptDepth, adoptRequests)
		if err != nil {
			d.log.Warn("looking for task roots posted before a crash", "room", room, "err", err)
		}
		for i := len(chunk) - 1; i >= 0; i-- {
			ev := chunk[i]
			ev.RoomID = room
			if msg, ok := router.MessageFromEvent(ev); ok && msg.IsTaskRoot {
				d.noteTaskRoot(ev)
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

// recallThread gives the router its memory of msg's thread when routing msg
// needs it: after a restart, an eviction, or for a thread whose root predates
// this daemon. It reads the root and the newest replies before msg and lets the
// router observe them, oldest first; only roots this daemon journaled open task
// threads.
func (d *Daemon) recallThread(ctx context.Context, r *router.Router, msg router.Message) {
	reader, ok := d.readerOf(msg.Room)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, recallTimeout)
	defer cancel()
	root, replies, err := history.ThreadTail(ctx, d.transport.Client(reader), msg.Room, msg.ThreadRoot, recallDepth)
	if err != nil {
		d.log.Warn("recalling thread memory", "room", msg.Room, "thread", msg.ThreadRoot, "err", err)
		return
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
			if _, journaled := d.tasks.TaskByThread(msg.Room, root.ID); m.IsTaskRoot && !journaled {
				m.IsTaskRoot, m.TaskAssignee = false, ""
			}
			past = append(past, m)
		}
	}
	for i := len(replies) - 1; i >= 0; i-- {
		if m, ok := router.MessageFromEvent(replies[i]); ok {
			past = append(past, m)
		}
	}
	r.Recall(msg.Room, msg.ThreadRoot, past)
}
