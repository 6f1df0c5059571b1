package zevent

import (
	"encoding/json"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// StateAgent is the state event a daemon publishes, as each of its agents, in
// every room the agent is bound to: state_key is the agent's own user id, so
// the homeserver lets only that user set it (a state key starting with @ is
// its user's; Matrix's auth rules), and no daemon can mark another's users.
// It is how daemons sharing a room learn each other's agents, on Matrix.
var StateAgent = event.Type{Type: "dev.zooid.agent", Class: event.StateEventType}

// AgentContent is the content of dev.zooid.agent: the agent's zooid.yaml name
// and its daemon's workstation ("" when the daemon names none). An empty
// name is an agent withdrawn (a state event can't be deleted, only replaced).
type AgentContent struct {
	Name        string `json:"name"`
	Workstation string `json:"workstation,omitempty"`
}

// AgentOf reads a dev.zooid.agent state event: the agent user it marks and
// what it says, when the event is one and was set by that user itself (which
// the homeserver enforces; checked again here so a server that doesn't is no
// way to mark someone else) and names an agent.
func AgentOf(ev *event.Event) (id.UserID, AgentContent, bool) {
	if ev == nil || ev.Type.Type != StateAgent.Type || ev.StateKey == nil || id.UserID(*ev.StateKey) != ev.Sender {
		return "", AgentContent{}, false
	}
	var c AgentContent
	switch {
	case ev.Content.Parsed != nil:
		ac, ok := ev.Content.Parsed.(*AgentContent)
		if !ok {
			return "", AgentContent{}, false
		}
		c = *ac
	case len(ev.Content.VeryRaw) > 0:
		// Read without parsing in place: the event may be shared.
		if json.Unmarshal(ev.Content.VeryRaw, &c) != nil {
			return "", AgentContent{}, false
		}
	default:
		c.Name, _ = ev.Content.Raw["name"].(string)
		c.Workstation, _ = ev.Content.Raw["workstation"].(string)
	}
	if c.Name == "" {
		return "", AgentContent{}, false
	}
	return ev.Sender, c, true
}
