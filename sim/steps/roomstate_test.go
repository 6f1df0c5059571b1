package steps

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/zooid-dev/zooid/fakeagent"
	"github.com/zooid-dev/zooid/zooid/tools"
)

// The room tools answer from the daemon's room state (zooid/roomstate):
// once a room's state is read, a call of zooid_get_room_info,
// zooid_get_members or zooid_get_rooms asks the homeserver nothing. Each call
// is counted alone: the agent's turn waits at a barrier once prompted (the
// daemon's own reads for the turn are done by then), the homeserver's request
// count is taken, the turn is released to make its one call, and the count is
// taken again when the result is back.
func TestRoomToolsAskTheHomeserverNothing(t *testing.T) {
	r := &runner{backend: fakeBackend{}, log: slog.New(slog.DiscardHandler), wait: 20 * time.Second, turnTimeout: 10 * time.Second}
	w := newWorld(r)
	t.Cleanup(func() { _ = w.close() })
	ctx := context.Background()
	for _, err := range []error{
		w.stepUsers(ctx, `"ori" and "mia"`),
		w.stepAgents(ctx, `"agent-a", "agent-b" and "agent-c"`, `"#ops" and "#dev"`, ""),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	srv, err := w.fakeServer(ctx, "count requests")
	if err != nil {
		t.Fatal(err)
	}
	for agent, tool := range map[string]string{"agent-a": tools.GetRoomInfo, "agent-b": tools.GetMembers, "agent-c": tools.GetRooms} {
		// The first call opens the agent's session (and waits for the
		// room's first read if it is still under way).
		if _, err := w.call(ctx, agent, tool, map[string]any{}); err != nil {
			t.Fatal(err)
		}
		f := w.focus[agent]
		before := len(w.ctl.ToolResults(agent))
		w.ctl.Queue(agent, fakeagent.Turn{fakeagent.WaitUntilReleased(), fakeagent.CallTool(tool, map[string]any{}), fakeagent.Stop("end_turn")})
		w.stepSeq++
		p, err := w.say(ctx, f.sender, f.room.name, fmt.Sprintf("@%s once more (%d)", agent, w.stepSeq), f.root, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.waitPrompted(ctx, agent, p.core); err != nil {
			t.Fatal(err)
		}
		n0 := srv.Requests("", "")
		w.ctl.Release(agent)
		wctx, cancel := w.waitCtx(ctx)
		rs, err := w.ctl.WaitToolResults(wctx, agent, before+1)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		n := srv.Requests("", "") - n0
		if res := rs[before]; res.Err != "" || res.IsError {
			t.Fatalf("%s: %q %q", tool, res.Err, res.Text)
		}
		if n != 0 {
			t.Errorf("%s asked the homeserver %d times, want 0", tool, n)
		}
	}
}
