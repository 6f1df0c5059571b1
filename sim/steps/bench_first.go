package steps

import (
	"context"
	"errors"
	"fmt"
	"time"

	"maunium.net/go/mautrix/event"

	"github.com/zooid-dev/zooid/zooid/zevent"
)

// MeasureFirstAnswer times what a person feels in a new thread: from a
// mention of an agent running real Claude Code (the claude preset's pinned
// adapter, its model the instant model double) to the agent's first post in
// that thread, for that many new threads one after another, each timed by the
// homeserver's own timestamps of the two events (origin_server_ts), so the
// harness's polling adds nothing. With prewarm the agent keeps a spare
// process (zooid.yaml prewarm: true) and each mention waits until one is
// ready, as a room whose threads are seconds apart finds it; without, every
// thread starts its process. The agent's cap is raised above threads so no
// process is stopped to make room while it is timed.
func MeasureFirstAnswer(ctx context.Context, prewarm bool, threads int) ([]time.Duration, error) {
	if err, _ := RealAgentPackages(); err != nil {
		return nil, err
	}
	w := newWorld(benchRunner())
	out, err := firstAnswers(ctx, w, prewarm, threads)
	if cerr := w.close(); err == nil {
		err = cerr
	}
	return out, err
}

// RealAgentPackages says whether the real agents' npm packages are
// installed: err says what is missing, fail that the run asked for them
// (internal/testdeps' rule).
func RealAgentPackages() (err error, fail bool) { return realAgentPackages() }

func firstAnswers(ctx context.Context, w *world, prewarm bool, threads int) ([]time.Duration, error) {
	const agent = "agent-a"
	if err := w.stepUsers(ctx, `"ori"`); err != nil {
		return nil, err
	}
	if err := w.stepAgents(ctx, `"`+agent+`"`, `"#ops"`, ""); err != nil {
		return nil, err
	}
	if err := w.stepRunsReal(agent, "claude"); err != nil {
		return nil, err
	}
	a, err := w.agent(agent)
	if err != nil {
		return nil, err
	}
	a.prewarm = prewarm
	a.maxProcs = threads + 1
	sc, err := w.modelScript(agent)
	if err != nil {
		return nil, err
	}
	for range threads {
		sc.Say("ok")
	}
	if err := w.start(ctx); err != nil {
		return nil, err
	}
	r, err := w.room(ctx, "#ops")
	if err != nil {
		return nil, err
	}
	uid := w.agentUser(agent)
	var out []time.Duration
	for i := range threads {
		if prewarm {
			if err := w.eventually(ctx, agent+"'s spare process to be ready", func() (bool, string, error) {
				return w.d.SpareReady(agent), "no spare ready", nil
			}); err != nil {
				return out, err
			}
		}
		p, err := w.say(ctx, "ori", "#ops", fmt.Sprintf("@%s first answer %d", agent, i), "", true)
		if err != nil {
			return out, err
		}
		var mention, answer time.Time
		err = w.eventually(ctx, fmt.Sprintf("%s's first post in thread %d", agent, i), func() (bool, string, error) {
			mention, answer = time.Time{}, time.Time{}
			err := w.pageBack(ctx, r, 1, func(ev *event.Event) {
				switch {
				case ev.ID == p.id:
					mention = time.UnixMilli(ev.Timestamp)
				case ev.Sender == uid && ev.Type == event.EventMessage && zevent.ThreadRoot(ev) == p.id:
					// Newest first: the last one seen is the first posted.
					answer = time.UnixMilli(ev.Timestamp)
				}
			})
			return err == nil && !mention.IsZero() && !answer.IsZero(), "no post yet", err
		})
		if err != nil {
			return out, err
		}
		if answer.Before(mention) {
			return out, errors.New("the answer is stamped before its mention")
		}
		out = append(out, answer.Sub(mention))
	}
	return out, nil
}
