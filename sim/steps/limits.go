package steps

import (
	"context"
	"fmt"
	"strings"

	"maunium.net/go/mautrix/id"
)

// What the process-cap checks read: when the daemon may still be configured,
// prompts without barriers, an agent process's pid per thread, and notices per
// thread.

func (w *world) beforeStart(what string) error {
	if w.started {
		return fmt.Errorf("set %s before the first action starts the daemon", what)
	}
	return nil
}

// scriptedPrompts are agent's prompts without the harness's barriers.
func (w *world) scriptedPrompts(agent string) []string {
	var out []string
	for _, p := range w.ctl.Prompts(agent) {
		if !strings.Contains(p.Text, barrierMarker) {
			out = append(out, p.Text)
		}
	}
	return out
}

// threadPid is the pid of the agent process that got the thread's first prompt.
func (w *world) threadPid(agent, rootText string) (int, error) {
	root, err := w.threadOf(rootText)
	if err != nil {
		return 0, err
	}
	p, ok := w.promptWith(agent, root.core)
	if !ok {
		return 0, fmt.Errorf("%s was never prompted in the thread of %q", agent, rootText)
	}
	for _, s := range w.ctl.Sessions(agent) {
		if s.SessionID == p.SessionID {
			return s.Pid, nil
		}
	}
	return 0, fmt.Errorf("no session %s of %s", p.SessionID, agent)
}

// threadNotices are the agent's m.notice bodies per thread root, read now.
func (w *world) threadNotices(ctx context.Context, agent string, roots []*post) (map[id.EventID][]string, error) {
	out := map[id.EventID][]string{}
	uid := w.names().agent(agent)
	rooms := map[*room]bool{}
	for _, p := range roots {
		if rooms[p.room] {
			continue
		}
		rooms[p.room] = true
		msgs, err := w.readRoom(ctx, p.room, 10)
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			if m.sender == uid && m.msgtype == "m.notice" && m.thread != "" {
				out[m.thread] = append(out[m.thread], m.body)
			}
		}
	}
	return out, nil
}

// waitThreadsGet waits until every root's thread has the agent's notice text.
// Threads answered one process at a time take long in all, so the wait bound
// applies to progress: it fails when no further thread got it for that long.
func (w *world) waitThreadsGet(ctx context.Context, agent, text string, roots []*post) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	if _, err := w.agent(agent); err != nil {
		return err
	}
	missing := len(roots) + 1
	for missing > 0 {
		err := w.eventually(ctx, fmt.Sprintf("another of %d threads to get %q from %s", len(roots), text, agent), func() (bool, string, error) {
			got, err := w.threadNotices(ctx, agent, roots)
			if err != nil {
				return false, "", err
			}
			n := 0
			for _, p := range roots {
				if !containsStr(got[p.root], text) {
					n++
				}
			}
			progress := n < missing
			missing = min(missing, n)
			return progress, fmt.Sprintf("%d of %d threads without it", n, len(roots)), nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
