package daemon

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/router"
	"github.com/zooid-dev/zooid/zooid/tasks"
	"github.com/zooid-dev/zooid/zooid/zevent"
)

// learnOtherAgents tells the router which users of each bound room are Zooid
// agents of other daemons, from the room's dev.zooid.agent state as the room
// state holds it (zooid/roomstate: the one read of each room's state the
// transport started, waited for here, at start, before intake): their posts
// wake nobody here. Changes after start arrive as state events through
// Decide. A room whose state can't be read is logged and routed as if it
// held none.
func (d *Daemon) learnOtherAgents(ctx context.Context) {
	r := d.routerOnce()
	state := d.transport.RoomState()
	seen := map[id.RoomID]bool{}
	for _, a := range d.opts.Config.Agents {
		rt := d.agents[a.Name]
		if rt == nil || rt.cfg.Matrix == nil {
			continue
		}
		for _, room := range rt.rooms {
			if seen[room] {
				continue
			}
			seen[room] = true
			rs, err := state.Room(ctx, room)
			if err != nil {
				d.log.Warn("could not read which members of a room are other daemons' agents; their posts are taken for a person's until they change",
					"room", room, "err", err)
				continue
			}
			r.LearnAgents(room, rs.Agents)
		}
	}
}

// adoptTaskRoot adopts a task root another daemon's agent posted for one of
// this daemon's agents (its assignee name or workstation.name, bound to the
// room): journaled once (tasks.Adopt), then routed like a root of our own.
func (d *Daemon) adoptTaskRoot(m router.Message, ev *event.Event) (tasks.Task, bool) {
	if !m.IsTaskRoot || m.TaskAttempt == "" || m.ThreadRoot != "" {
		return tasks.Task{}, false
	}
	if _, ok := d.routerOnce().OtherAgent(m.Room, m.Sender); !ok {
		return tasks.Task{}, false
	}
	ws, name := config.SplitAddress(m.TaskAssignee)
	if ws != "" && ws != d.opts.Config.Workstation {
		return tasks.Task{}, false
	}
	user, rooms, ok := d.taskAgents(name)
	if !ok || !slices.Contains(rooms, m.Room) {
		return tasks.Task{}, false
	}
	// A root names its assignee by the address its daemon knows it by: a
	// bare name there may be that daemon's own agent of the same name. The
	// root's mention (always sent, tasks' rootOf) says which user it is.
	if m.Mentions == nil || !slices.Contains(m.Mentions.UserIDs, user) {
		return tasks.Task{}, false
	}
	start, ok := zevent.ThreadStartOf(ev)
	if !ok || start.AttemptID != m.TaskAttempt {
		return tasks.Task{}, false
	}
	// The root reads "<assignee's user id> <prompt>" (tasks' rootOf).
	prompt := strings.TrimSpace(strings.TrimPrefix(m.Body, string(user)))
	return d.tasks.Adopt(m.Room, m.EventID, m.Sender, start, name, user, prompt)
}

// remoteResult closes this daemon's task for another daemon's agent when that
// agent posts its dev.zooid.thread_result in the task thread.
func (d *Daemon) remoteResult(ctx context.Context, ev *event.Event) {
	if ev.Type.Type != zevent.EventThreadResult.Type {
		return
	}
	root := zevent.ThreadRoot(ev)
	if root == "" {
		return
	}
	var c zevent.ThreadResultEventContent
	if err := json.Unmarshal(ev.Content.VeryRaw, &c); err != nil {
		return
	}
	if err := d.tasks.RemoteResult(ctx, ev.RoomID, root, ev.Sender, c.ThreadResult); err != nil {
		d.log.Error("closing a task with another daemon's result", "room", ev.RoomID, "thread", root, "err", err)
	}
}

// otherDaemonsHandoff acts on another daemon's agent's handoff events in a
// thread: a dev.zooid.handoff notice for one of this daemon's agents is
// adopted once and its callee started (adoptHandoff); a
// dev.zooid.handoff_return for a handoff this daemon's agent made returns it
// (tasks.RemoteHandoffReturn checks it is the callee's).
func (d *Daemon) otherDaemonsHandoff(m router.Message, ev *event.Event) {
	if m.ThreadRoot == "" {
		return
	}
	if _, ok := d.routerOnce().OtherAgent(m.Room, m.Sender); !ok {
		return
	}
	if r, ok := zevent.HandoffReturnOf(ev); ok {
		if err := d.tasks.RemoteHandoffReturn(m.Room, m.ThreadRoot, m.Sender, r); err != nil {
			d.log.Error("returning a handoff with another daemon's return", "room", m.Room, "thread", m.ThreadRoot, "err", err)
		}
		return
	}
	if m.HandoffTo != "" {
		d.adoptHandoff(m, ev)
	}
}

// adoptHandoff adopts a handoff notice another daemon's agent posted for one
// of this daemon's agents (its name or workstation.name, bound to the room,
// its user mentioned): journaled once by the handoff's id, then the callee
// runs in its own session of the thread.
func (d *Daemon) adoptHandoff(m router.Message, ev *event.Event) {
	hz, ok := zevent.HandoffOf(ev)
	if !ok || hz.ID == "" {
		return
	}
	ws, name := config.SplitAddress(hz.To)
	if ws != "" && ws != d.opts.Config.Workstation {
		return
	}
	user, rooms, ok := d.taskAgents(name)
	if !ok || !slices.Contains(rooms, m.Room) {
		return
	}
	// As for a task root: the notice's mention says which user a bare name
	// means (that daemon may have an agent of the same name).
	if m.Mentions == nil || !slices.Contains(m.Mentions.UserIDs, user) {
		return
	}
	// The notice reads "<callee's user id> <prompt>" (tasks' handoffContent).
	prompt := strings.TrimSpace(strings.TrimPrefix(m.Body, string(user)))
	h, isNew := d.tasks.AdoptHandoff(m.Room, m.ThreadRoot, m.EventID, m.Sender, hz, name, user, prompt)
	if !isNew {
		return
	}
	d.startCallee(h)
}
