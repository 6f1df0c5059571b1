package daemon

import (
	"context"

	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/zevent"
)

// learnOtherAgents tells the router which users of each bound room are Zooid
// agents of other daemons, from the room's dev.zooid.agent state (one read of
// the room's state per room, at start, before intake): their posts wake
// nobody here. Changes after start arrive as state events through Decide. A
// room whose state can't be read is logged and routed as if it held none.
func (d *Daemon) learnOtherAgents(ctx context.Context) {
	r := d.routerOnce()
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
			state, err := d.transport.Client(rt.userID).State(ctx, room)
			if err != nil {
				d.log.Warn("could not read which members of a room are other daemons' agents; their posts are taken for a person's until they change",
					"room", room, "err", err)
				continue
			}
			r.LearnAgents(room, zevent.AgentsOfState(state[zevent.StateAgent]))
		}
	}
}
