package steps

import (
	"fmt"
	"regexp"
	"strings"

	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/config"
)

// names maps the names steps speak in ("ori", "agent-a", "#ops") to Matrix ids.
// The same code serves every homeserver; only the prefixes differ. On a shared
// Synapse, humans carry a per-run prefix, agents the prefix of the scenario's
// appservice slot and a per-scenario scope, and aliases a per-scenario
// suffix, so concurrent scenarios and repeated runs never collide.
type names struct {
	serverName  string
	humanPrefix string // e.g. "" on fakehs, "h3f9a-" on a shared server
	agentPrefix string // the slot's exclusive namespace prefix, e.g. "zs3-"
	// agentScope, on a shared server's slot, makes the scenario's agents
	// users of its own inside the slot's namespace ("7-": @zs3-7-agent-a):
	// a fresh user is in no other scenario's rooms, so nothing has to leave
	// them at teardown (each leave was an event for Synapse to persist and
	// push). Empty on fakehs and for a snapshot copy's agents.
	agentScope  string
	aliasSuffix string // e.g. "" on fakehs, "-s7c2e" on a shared server
}

// nameRE is what a step may call a user or an agent.
var nameRE = regexp.MustCompile(config.NamePattern)

func checkName(n string) error {
	if !nameRE.MatchString(n) {
		return fmt.Errorf("%q is not a valid name (want %s)", n, nameRE)
	}
	return nil
}

// humanLocalpart is the localpart registered for a human.
func (n names) humanLocalpart(name string) string { return n.humanPrefix + name }

// agent is the Matrix user id of an agent named in a step.
func (n names) agent(name string) id.UserID {
	return id.NewUserID(n.agentPrefix+n.agentScope+name, n.serverName)
}

// senderLocalpart is the appservice bot's own localpart.
func (n names) senderLocalpart() string { return n.agentPrefix + "zooid" }

// agentNamespace is the exclusive user regex of the appservice registration.
func (n names) agentNamespace() string {
	return "@" + regexp.QuoteMeta(n.agentPrefix) + ".*:" + regexp.QuoteMeta(n.serverName)
}

// aliasLocalpart turns "#ops" into the alias localpart used on the server.
func (n names) aliasLocalpart(room string) string {
	return strings.TrimPrefix(room, "#") + n.aliasSuffix
}

// alias turns "#ops" into the full alias "#ops:server".
func (n names) alias(room string) id.RoomAlias {
	return id.NewRoomAlias(n.aliasLocalpart(room), n.serverName)
}

// checkRoom validates a room name as steps write it.
func checkRoom(room string) error {
	if !strings.HasPrefix(room, "#") || !nameRE.MatchString(strings.TrimPrefix(room, "#")) {
		return fmt.Errorf("%q is not a room name like \"#ops\"", room)
	}
	return nil
}
