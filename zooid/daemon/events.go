package daemon

import (
	"context"
	"errors"

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
	case <-d.replayed:
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
// of the root is gone (evicted, or older than the start-up replay): a bare
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

// replayDepth bounds how much history per room rebuilds the routing memory at
// start-up: enough for the threads people are still talking in, at the cost of
// one /messages request per bound room (up to replayRequests on a server that
// applies the message filter after the page limit).
const (
	replayDepth    = 500
	replayRequests = 4
)

// replayThreadMemory rebuilds who is being addressed in each thread from recent
// history, so a bare human reply after a daemon restart still reaches the agent
// the thread was talking to, and binds task roots to their tasks (see
// tasks.Manager.TaskForRoot). It reads as an agent bound to each room and wakes
// nobody; a room it cannot read is logged and skipped.
func (d *Daemon) replayThreadMemory(ctx context.Context) {
	r := d.routerOnce()
	readers := map[id.RoomID]id.UserID{}
	for _, rt := range d.agents {
		for _, room := range rt.rooms {
			if _, ok := readers[room]; !ok {
				readers[room] = rt.userID
			}
		}
	}
	for room, reader := range readers {
		// history.RecentMessages pages on where a server filters after the
		// limit, so a run of reactions doesn't read as an empty room.
		chunk, err := history.RecentMessages(ctx, d.transport.Client(reader), room, replayDepth, replayRequests)
		if err != nil {
			d.log.Warn("rebuilding thread memory", "room", room, "err", err)
		}
		for i := len(chunk) - 1; i >= 0; i-- {
			ev := chunk[i]
			ev.RoomID = room
			if err := ev.Content.ParseRaw(ev.Type); err != nil && !errors.Is(err, event.ErrContentAlreadyParsed) {
				continue
			}
			if msg, ok := router.MessageFromEvent(ev); ok {
				if msg.IsTaskRoot {
					// A root posted just before a crash that lost its journal
					// write is adopted here, before Recover would cancel it;
					// its delivery, still owed, wakes the assignee.
					d.noteTaskRoot(ev)
				}
				if _, journaled := d.tasks.TaskByThread(room, ev.ID); msg.IsTaskRoot && !journaled {
					msg.IsTaskRoot, msg.TaskAssignee = false, ""
				}
				r.Observe(msg)
			}
		}
	}
}
