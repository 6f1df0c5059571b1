package steps

import (
	"context"
	"fmt"
	"strings"

	"github.com/zooid-dev/zooid/fakeagent"
)

// Scripting the fake agents: queueing their turns, and what they were prompted
// with for failure messages.

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

// promptsSeen summarises an agent's prompts for failure messages.
func (w *world) promptsSeen(agent string) string {
	if w.runsReal(agent) {
		turns := modelTurns(w.model.Requests(agent))
		if len(turns) == 0 {
			return "no turns of its model at all"
		}
		return fmt.Sprintf("%d turns of its model, prompted: %q", len(turns), turns)
	}
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
