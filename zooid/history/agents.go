package history

import (
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/zevent"
)

// otherAgent says whether u is a Zooid agent of another daemon in room
// (Options.OtherAgent), for zooid_get_members.
func (h *Reader) otherAgent(room id.RoomID, u id.UserID) (zevent.AgentContent, bool) {
	if h.opts.OtherAgent == nil {
		return zevent.AgentContent{}, false
	}
	return h.opts.OtherAgent(room, u)
}
