package steps

import (
	"context"
	"fmt"

	"github.com/zooid-dev/zooid/fakeagent"
	"github.com/zooid-dev/zooid/zooid/tools"
)

// RoomTools are the tools answered from the daemon's room state
// (zooid/roomstate), in the order MeasureRoomToolRequests reports them.
var RoomTools = []string{tools.GetRoomInfo, tools.GetMembers, tools.GetRooms}

// MeasureRoomToolRequests counts the homeserver requests (fakehs's, every
// one, as anyone) made while one call of each room tool runs, once its
// agent's session is open: three agents bound to two rooms each call one
// tool. Each call is counted alone: the agent's turn waits at a barrier once
// prompted (the daemon's own reads for the turn are done by then), the count
// is taken, the turn is released to make its one call, and the count is
// taken again when the result is back. The answer is by tool name.
func MeasureRoomToolRequests(ctx context.Context) (map[string]int, error) {
	w := newWorld(benchRunner())
	n, err := measureRoomToolRequests(ctx, w)
	if cerr := w.close(); err == nil && cerr != nil {
		err = fmt.Errorf("closing the world: %w", cerr)
	}
	return n, err
}

// visibilityCheck is the path of the daemon's check that a turn's trigger is
// readable (daemon.awaitVisible: GET /event as the agent).
const visibilityCheck = "/_matrix/client/v3/rooms/*/event/*"

func measureRoomToolRequests(ctx context.Context, w *world) (map[string]int, error) {
	if err := w.stepUsers(ctx, `"ori" and "mia"`); err != nil {
		return nil, err
	}
	agents := []string{"agent-a", "agent-b", "agent-c"}
	if err := w.stepAgents(ctx, `"agent-a", "agent-b" and "agent-c"`, `"#ops" and "#dev"`, ""); err != nil {
		return nil, err
	}
	srv, err := w.fakeServer(ctx, "count requests")
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for i, tool := range RoomTools {
		agent := agents[i]
		// The first call opens the agent's session (and waits for the
		// room's first read if it is still under way).
		if _, err := w.call(ctx, agent, tool, map[string]any{}); err != nil {
			return nil, err
		}
		f := w.focus[agent]
		before := len(w.ctl.ToolResults(agent))
		w.ctl.Queue(agent, fakeagent.Turn{fakeagent.WaitUntilReleased(), fakeagent.CallTool(tool, map[string]any{}), fakeagent.Stop("end_turn")})
		w.stepSeq++
		checks := srv.Requests("GET", visibilityCheck)
		p, err := w.say(ctx, f.sender, f.room.name, fmt.Sprintf("@%s once more (%d)", agent, w.stepSeq), f.root, true)
		if err != nil {
			return nil, err
		}
		if err := w.waitPrompted(ctx, agent, p.core); err != nil {
			return nil, err
		}
		// A warm session's prompt goes out without waiting for the check that
		// its trigger is readable (one GET /event, the turn's and not the
		// tool's), and the tool call waits for it: counting starts once it is
		// made, or a loaded machine counts it against the tool.
		err = w.eventually(ctx, "the turn's visibility check (GET /event)", func() (bool, string, error) {
			n := srv.Requests("GET", visibilityCheck)
			return n > checks, fmt.Sprintf("%d checks before the turn, %d now", checks, n), nil
		})
		if err != nil {
			return nil, err
		}
		n0 := srv.Requests("", "")
		w.ctl.Release(agent)
		wctx, cancel := w.waitCtx(ctx)
		rs, err := w.ctl.WaitToolResults(wctx, agent, before+1)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("%s calling %s: %w", agent, tool, err)
		}
		out[tool] = srv.Requests("", "") - n0
		if res := rs[before]; res.Err != "" || res.IsError {
			return nil, fmt.Errorf("%s: %q %q", tool, res.Err, res.Text)
		}
	}
	return out, nil
}
