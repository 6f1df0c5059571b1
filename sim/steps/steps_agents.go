package steps

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/zooid-dev/zooid/fakeagent"
)

func scriptSteps(w *world) []stepDef {
	return []stepDef{
		{area: "script", pattern: `^([a-z0-9-]+) will reply "([^"]*)"$`,
			example: `agent-a will reply "on it"`,
			doc:     "Queues a turn that says the text in one chunk and ends.",
			fn:      w.stepWillReply},
		{area: "script", pattern: `^([a-z0-9-]+) will reply "([^"]*)" in (\d+) chunks$`,
			example: `agent-a will reply "checking the logs now" in 4 chunks`,
			doc:     "Queues a turn that streams the text split into that many chunks, then ends.",
			fn:      w.stepWillReplyChunks},
		{area: "script", pattern: `^([a-z0-9-]+) will call (zooid_[a-z_]+)(?: with (\{.*\}))?$`,
			example: `agent-a will call zooid_get_history with {"limit": 5}`,
			doc:     "Queues a turn that calls the tool (placeholders resolved now) and ends without prose.",
			fn:      w.stepWillCall},
		{area: "script", pattern: `^([a-z0-9-]+) will (crash|hang)$`,
			example: `agent-a will crash`,
			doc:     "Queues a turn in which the agent process exits mid-turn, or blocks until cancelled.",
			fn:      w.stepWillFail},
		{area: "script", pattern: `^([a-z0-9-]+) will list its tools$`,
			example: `agent-a will list its tools`,
			doc:     "Queues a turn that runs tools/list on its MCP servers and ends.",
			fn:      w.stepWillList},
	}
}

func (w *world) queue(agent string, t fakeagent.Turn) error {
	if _, err := w.agent(agent); err != nil {
		return err
	}
	if err := w.start(context.Background()); err != nil {
		return err
	}
	w.ctl.Queue(agent, t)
	return nil
}

func (w *world) stepWillReply(agent, text string) error {
	return w.queue(agent, fakeagent.Turn{fakeagent.Say(text), fakeagent.Stop("end_turn")})
}

func (w *world) stepWillReplyChunks(agent, text, n string) error {
	k, _ := strconv.Atoi(n)
	return w.queue(agent, fakeagent.Turn{fakeagent.SayInChunks(splitChunks(text, k)...), fakeagent.Stop("end_turn")})
}

// splitChunks cuts text into k pieces of about equal length that join back to it.
func splitChunks(text string, k int) []string {
	rs := []rune(text)
	k = max(1, min(k, len(rs)))
	var out []string
	for i := range k {
		out = append(out, string(rs[i*len(rs)/k:(i+1)*len(rs)/k]))
	}
	return out
}

func (w *world) stepWillCall(ctx context.Context, agent, tool, args string) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	a, err := w.toolArgs(agent, args)
	if err != nil {
		return err
	}
	return w.queue(agent, fakeagent.Turn{fakeagent.CallTool(tool, a), fakeagent.Stop("end_turn")})
}

func (w *world) stepWillFail(agent, how string) error {
	if how == "crash" {
		return w.queue(agent, fakeagent.Turn{fakeagent.Say("starting"), fakeagent.Crash()})
	}
	return w.queue(agent, fakeagent.Turn{fakeagent.Hang()})
}

func (w *world) stepWillList(agent string) error {
	return w.queue(agent, fakeagent.Turn{fakeagent.ListTools(), fakeagent.Stop("end_turn")})
}

// promptsSeen summarises an agent's prompts for failure messages.
func (w *world) promptsSeen(agent string) string {
	ps := w.ctl.Prompts(agent)
	if len(ps) == 0 {
		return "no prompts at all"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d prompts:", len(ps))
	for _, p := range ps {
		fmt.Fprintf(&b, "\n    [session %s] %q", string(p.SessionID), p.Text)
	}
	return b.String()
}
