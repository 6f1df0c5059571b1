package matrix

import (
	"context"
	"errors"
	"testing"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"

	"github.com/zooid-dev/zooid/zooid/zevent"
)

// At start each agent marks itself a Zooid agent in its rooms (dev.zooid.agent,
// state_key its own id, with its name and the workstation). In a room the
// daemon created, members may send that state, so another daemon's agents can
// mark theirs; in a room whose power levels keep the agent from it (a room a
// person made, state_default 50), the agent is served all the same, unmarked.
func TestAgentsAreMarkedInTheirRooms(t *testing.T) {
	e := newEnv(t, true)
	ctx := context.Background()
	side, err := e.human.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "public_chat", RoomAliasName: "side"})
	if err != nil {
		t.Fatal(err)
	}
	opts := e.opts
	opts.Workstation = "laptop"
	tr := start(t, opts, newRecorder().handle)
	general, _ := tr.RoomID("#general:localhost")
	if _, err := e.human.JoinRoomByID(ctx, general); err != nil { // alice is invited (rooms: invite)
		t.Fatal(err)
	}

	for _, a := range opts.Agents {
		var got zevent.AgentContent
		if err := e.human.StateEvent(ctx, general, zevent.StateAgent, string(a.UserID), &got); err != nil {
			t.Fatalf("dev.zooid.agent of %s in #general: %v", a.UserID, err)
		}
		if want := (zevent.AgentContent{Name: a.Name, Workstation: "laptop"}); got != want {
			t.Errorf("dev.zooid.agent of %s = %+v, want %+v", a.UserID, got, want)
		}
	}
	var pl event.PowerLevelsEventContent
	if err := e.human.StateEvent(ctx, general, event.StatePowerLevels, "", &pl); err != nil {
		t.Fatal(err)
	}
	if got := pl.GetEventLevel(zevent.StateAgent); got != 0 {
		t.Errorf("level of dev.zooid.agent in #general = %d, want 0 (users_default)", got)
	}
	var none zevent.AgentContent
	err = e.human.StateEvent(ctx, side.RoomID, zevent.StateAgent, string(userB), &none)
	if !errors.Is(err, mautrix.MNotFound) {
		t.Errorf("dev.zooid.agent of agent-b in #side (state_default 50): %+v, %v; want M_NOT_FOUND", none, err)
	}
	if got, ok := tr.RoomID("#side:localhost"); !ok || got != side.RoomID {
		t.Errorf("#side not served: %s, %v", got, ok)
	}
	// Only the agent itself may mark itself: a person's write of its state key is refused.
	if _, err := e.human.SendStateEvent(ctx, general, zevent.StateAgent, string(userA), &zevent.AgentContent{Name: "fake"}); !errors.Is(err, mautrix.MForbidden) {
		t.Errorf("a person setting an agent's dev.zooid.agent: %v, want M_FORBIDDEN", err)
	}
}
