package matrix

import (
	"context"
	"slices"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/zevent"
)

// publishAgents marks each of this daemon's agents in room as a Zooid agent,
// with a dev.zooid.agent state event the agent sets itself (state_key its own
// user id): how other daemons with agents in the room learn that these users
// are agents, through the room and nothing else. A homeserver dedupes a write
// that changes nothing, so doing it at every start costs no event.
//
// Members of a room may send that state only when the room's power levels let
// them; where one of the agents may change the power levels, it lets every
// member (users_default) send it, so another daemon's agents can publish
// theirs too. A refusal is logged with the fix and costs nothing else: the
// agents are served, only not marked for other daemons.
func (t *Transport) publishAgents(ctx context.Context, room config.RoomRef, roomID id.RoomID, in []id.UserID) {
	t.openAgentState(ctx, room, roomID, in)
	for _, a := range t.opts.Agents {
		if !slices.Contains(in, a.UserID) {
			continue
		}
		content := zevent.AgentContent{Name: a.Name, Workstation: t.opts.Workstation}
		if _, err := t.Client(a.UserID).SendStateEvent(ctx, roomID, zevent.StateAgent, string(a.UserID), &content); err != nil {
			t.log.Warn("agent not marked as a Zooid agent in a room: other daemons there will take it for a person", "room", room, "room_id", roomID, "agent", a.Name,
				"fix", "let members send "+zevent.StateAgent.Type+" state (its level in the room's power levels at users_default), then restart the daemon", "err", err)
		}
	}
}

// openAgentState lowers the level of dev.zooid.agent to users_default when it
// is higher and one of in may change the power levels (a room the daemon
// created, say).
func (t *Transport) openAgentState(ctx context.Context, room config.RoomRef, roomID id.RoomID, in []id.UserID) {
	var pl event.PowerLevelsEventContent
	if err := t.Client(in[0]).StateEvent(ctx, roomID, event.StatePowerLevels, "", &pl); err != nil {
		t.log.Warn("could not read the room's power levels", "room", room, "room_id", roomID, "err", err)
		return
	}
	if pl.GetEventLevel(zevent.StateAgent) <= pl.UsersDefault {
		return
	}
	for _, u := range in {
		if pl.GetUserLevel(u) < pl.GetEventLevel(event.StatePowerLevels) {
			continue
		}
		next := pl.Clone()
		if !next.EnsureEventLevelAs(u, zevent.StateAgent, pl.UsersDefault) {
			continue
		}
		if _, err := t.Client(u).SendStateEvent(ctx, roomID, event.StatePowerLevels, "", next); err != nil {
			t.log.Warn("could not let members mark agents in the room", "room", room, "room_id", roomID, "as", u, "err", err)
			continue
		}
		return
	}
}
