package steps

import (
	"strings"

	"github.com/zooid-dev/zooid/modeldouble"
)

// What a real agent was prompted with is read from its model double: the
// scripted agent's controller never sees a real agent's prompts, so the
// prompt checks would otherwise pass for it without looking.

// modelTurns lists the prompts of a real agent's turns, in order: a turn is
// the first request offering tools after the daemon's prompt (no tool
// results yet), and a request that follows a fault the agent retried is the
// same turn again.
func modelTurns(reqs []modeldouble.Request) []string {
	var out []string
	retry := false
	for _, r := range reqs {
		if len(r.Tools) == 0 {
			continue // housekeeping: titles, routing, not a turn
		}
		if len(r.ToolResults) == 0 && !retry {
			out = append(out, r.Prompt)
		}
		retry = strings.HasPrefix(r.Answer, "HTTP ") || strings.HasPrefix(r.Answer, "cut")
	}
	return out
}

// modelPrompted counts a real agent's turns whose prompt contains text.
func (w *world) modelPrompted(agent, text string) int {
	n := 0
	for _, p := range modelTurns(w.model.Requests(agent)) {
		if strings.Contains(p, text) {
			n++
		}
	}
	return n
}

// runsReal says the agent runs a preset's real adapter (its prompts are its
// model double's to tell), not the scripted agent.
func (w *world) runsReal(agent string) bool {
	a, ok := w.agents[agent]
	return ok && a.real != nil
}
