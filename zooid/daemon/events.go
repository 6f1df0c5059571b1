package daemon

import (
	"context"
	"fmt"

	"maunium.net/go/mautrix/event"

	"github.com/zooid-dev/zooid/zooid/router"
	"github.com/zooid-dev/zooid/zooid/tasks"
)

// handleEvent is the transport's callback for every event of a bound room, in
// order per room. It must not block on agents: it only queues turns.
func (d *Daemon) handleEvent(ctx context.Context, ev *event.Event) {
	r := d.routerOnce()
	msg, ok := router.MessageFromEvent(ev)
	if !ok {
		return
	}
	if msg.IsReset {
		for _, agent := range r.Reset(msg.Room, msg.ThreadRoot) {
			key := sessionKey{agent: agent, room: msg.Room, thread: msg.ThreadRoot}
			d.bumpGeneration(key)
			if d.sessions.endSession(key) {
				d.log.Info("session cleared", "agent", agent, "room", msg.Room, "thread", msg.ThreadRoot)
			}
		}
		return
	}
	var task *tasks.Task
	if msg.IsTaskRoot {
		if t, ok := d.noteTaskRoot(ev); ok {
			task = &t
		}
	}
	for _, w := range r.Route(msg) {
		key := sessionKey{agent: w.Agent, room: w.Room, thread: w.ThreadRoot}
		text := w.Text
		if task != nil && task.Agent == w.Agent && w.ThreadRoot == ev.ID {
			// The assignee's first prompt says who delegated and how to finish.
			text = tasks.Header(*task) + "\n\n" + text
		}
		d.log.Debug("waking agent", "agent", w.Agent, "room", w.Room, "thread", w.ThreadRoot, "event", w.EventID)
		d.sessions.enqueue(key, turnRequest{text: text, trigger: w.EventID, sender: w.Sender})
	}
}

// routerOnce builds the router the first time an event arrives: by then the
// transport has resolved every configured room to its id.
func (d *Daemon) routerOnce() *router.Router {
	d.routerInit.Do(func() { d.router = d.buildRouter() })
	return d.router
}

// sessionKeyString is the key tools and tasks see for a session: it names the
// thread and how many times it was cleared, so a task result addressed to a
// session from before a /clear is recognised as stale.
func (d *Daemon) sessionKeyString(k sessionKey) string {
	d.genMu.Lock()
	defer d.genMu.Unlock()
	return fmt.Sprintf("%s#%d", k, d.generations[k])
}

func (d *Daemon) bumpGeneration(k sessionKey) {
	d.genMu.Lock()
	defer d.genMu.Unlock()
	d.generations[k]++
}
