package daemon

import (
	"context"

	"maunium.net/go/mautrix/event"

	"github.com/zooid-dev/zooid/zooid/router"
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
			if d.sessions.endSession(key) {
				d.log.Info("session cleared", "agent", agent, "room", msg.Room, "thread", msg.ThreadRoot)
			}
		}
		return
	}
	for _, w := range r.Route(msg) {
		key := sessionKey{agent: w.Agent, room: w.Room, thread: w.ThreadRoot}
		d.log.Debug("waking agent", "agent", w.Agent, "room", w.Room, "thread", w.ThreadRoot, "event", w.EventID)
		d.sessions.enqueue(key, turnRequest{text: w.Text, trigger: w.EventID, sender: w.Sender})
	}
}

// routerOnce builds the router the first time an event arrives: by then the
// transport has resolved every configured room to its id.
func (d *Daemon) routerOnce() *router.Router {
	d.routerInit.Do(func() { d.router = d.buildRouter() })
	return d.router
}
