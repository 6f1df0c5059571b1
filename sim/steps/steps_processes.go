package steps

import (
	"context"
	"errors"
	"fmt"
	"syscall"
)

// processSteps observe agents as the operating system sees them.
func processSteps(w *world) []stepDef {
	return []stepDef{
		{area: "prompts", pattern: `^([a-z0-9-]+)'s process stops$`,
			example: `agent-a's process stops`,
			doc:     "Waits until the process of the agent's latest session has exited (and was reaped by the daemon).",
			fn:      w.stepProcessStops},
	}
}

func (w *world) stepProcessStops(ctx context.Context, agent string) error {
	if _, err := w.agent(agent); err != nil {
		return err
	}
	sessions := w.sessionsOf(agent)
	if len(sessions) == 0 {
		return fmt.Errorf("%s has no session yet, so no process to watch", agent)
	}
	pid := sessions[len(sessions)-1].Pid
	return w.eventually(ctx, fmt.Sprintf("%s's process %d to stop", agent, pid), func() (bool, string, error) {
		err := syscall.Kill(pid, 0)
		if errors.Is(err, syscall.ESRCH) {
			return true, "", nil
		}
		return false, fmt.Sprintf("process %d still exists", pid), nil
	})
}
