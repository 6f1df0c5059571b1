package mcpserver_test

import (
	"testing"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/busyroom"
	"github.com/zooid-dev/zooid/fakehs"
	"github.com/zooid-dev/zooid/zooid/history"
	"github.com/zooid-dev/zooid/zooid/mcpserver"
	"github.com/zooid-dev/zooid/zooid/tools"
)

// world is busyroom's seeded server plus the daemon side: history over
// impersonating clients and the MCP server.
type world struct {
	*busyroom.Rooms
	hist *history.Reader
	srv  *mcpserver.Server
}

type wantMsg = busyroom.Msg

// The seeded rooms' users, as the tests name them.
var (
	alice  = busyroom.Alice
	agentA = busyroom.AgentA
	agentB = busyroom.AgentB
)

// newWorld seeds busyroom's rooms on a fakehs that behaves as Synapse.
func newWorld(t testing.TB, nMessages, nThreads, nPlain int) *world {
	t.Helper()
	return &world{Rooms: busyroom.Seed(t, fakehs.Profile{}, nMessages, nThreads, nPlain)}
}

// start wires history and the MCP server against hsURL (fakehs or a proxy).
func (w *world) start(t testing.TB, hsURL string) {
	t.Helper()
	w.hist = history.New(history.Options{
		Client: func(u id.UserID) *mautrix.Client { return busyroom.Client(t, hsURL, u) },
		Agents: busyroom.AgentOf,
	})
	w.srv = newServer(t, w.hist, nil)
	for _, a := range []string{"agent-a", "agent-b"} {
		if _, err := w.srv.ListenAgent(a); err != nil {
			t.Fatal(err)
		}
	}
}

func (w *world) caller(agent string, room id.RoomID) tools.Caller {
	// Both agents are bound to the busy and the other room (agent-b is also in
	// the secret room, outside its binding).
	return tools.Caller{Agent: agent, UserID: id.UserID("@" + agent + ":localhost"), Transport: "matrix", Room: room,
		Rooms: []id.RoomID{w.Busy.RoomID, w.Other.RoomID}, Thread: w.Busy.EventIDs[0], SessionKey: agent, Kind: tools.Conversation}
}
