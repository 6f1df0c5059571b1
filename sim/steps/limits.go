package steps

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/fakeagent"
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

// setSeconds is the steps that set one of zooid.yaml's durations in whole
// seconds (their patterns take digits only): before the daemon starts.
func (w *world) setSeconds(key, secs string, into *time.Duration) error {
	if err := w.beforeStart(key); err != nil {
		return err
	}
	n, _ := strconv.Atoi(secs)
	*into = time.Duration(n) * time.Second
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
	uid := w.agentUser(agent)
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

// stepHasSpare waits for a spare: a live process of agent, other than the
// spare found before, that has opened a session none of whose sessions has
// been prompted.
func (w *world) stepHasSpare(ctx context.Context, agent string) error {
	a, err := w.agent(agent)
	if err != nil {
		return err
	}
	// The daemon starts the first spare as it starts.
	if err := w.start(ctx); err != nil {
		return err
	}
	return w.eventually(ctx, fmt.Sprintf("a spare process of %s with its session open", agent), func() (bool, string, error) {
		prompted := map[acp.SessionId]bool{}
		for _, p := range w.ctl.Prompts(agent) {
			prompted[p.SessionID] = true
		}
		used := map[int]bool{}
		opened := map[int]acp.SessionId{}
		for _, s := range w.ctl.Sessions(agent) {
			if prompted[s.SessionID] {
				used[s.Pid] = true
			}
			opened[s.Pid] = s.SessionID
		}
		starts := w.ctl.Starts(agent)
		for _, s := range starts {
			sid, ok := opened[s.Pid]
			if !ok || used[s.Pid] || s.Pid == a.spare || syscall.Kill(s.Pid, 0) != nil {
				continue
			}
			a.spare, a.spareSession = s.Pid, sid
			return true, "", nil
		}
		return false, fmt.Sprintf("%d processes came up, %d with a session, %d prompted", len(starts), len(opened), len(used)), nil
	})
}

// spareAndPrompt is agent, whose spare a step found, and its prompt in the
// thread started by a message containing rootText.
func (w *world) spareAndPrompt(agent, rootText string) (*agentDecl, fakeagent.Prompt, error) {
	a, err := w.agent(agent)
	if err != nil {
		return nil, fakeagent.Prompt{}, err
	}
	if a.spare == 0 {
		return nil, fakeagent.Prompt{}, fmt.Errorf("no step found a spare process of %s", agent)
	}
	root, err := w.threadOf(rootText)
	if err != nil {
		return nil, fakeagent.Prompt{}, err
	}
	p, ok := w.promptWith(agent, root.core)
	if !ok {
		return nil, fakeagent.Prompt{}, fmt.Errorf("%s was never prompted in the thread of %q", agent, rootText)
	}
	return a, p, nil
}

func (w *world) stepAnsweredInSpare(agent, rootText string) error {
	a, p, err := w.spareAndPrompt(agent, rootText)
	if err != nil {
		return err
	}
	if p.SessionID != a.spareSession {
		pid, _ := w.threadPid(agent, rootText)
		return fmt.Errorf("%s answered the thread of %q in session %s of process %d, want session %s the spare %d opened before the thread", agent, rootText, p.SessionID, pid, a.spareSession, a.spare)
	}
	return nil
}

func (w *world) stepSpareStopped(ctx context.Context, agent string) error {
	a, err := w.agent(agent)
	if err != nil {
		return err
	}
	if a.spare == 0 {
		return fmt.Errorf("no step found a spare process of %s", agent)
	}
	pid := a.spare
	return w.eventually(ctx, fmt.Sprintf("%s's spare process %d to stop", agent, pid), func() (bool, string, error) {
		if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			return true, "", nil
		}
		return false, fmt.Sprintf("process %d still exists", pid), nil
	})
}

func (w *world) stepDaemonShutsDown() error {
	if w.d == nil {
		return errors.New("no in-process daemon to shut down (it runs as its own process, or has not started)")
	}
	if err := w.d.Close(); err != nil {
		return fmt.Errorf("closing the daemon: %w", err)
	}
	return nil
}

func (w *world) stepSpareReady(ctx context.Context, agent string) error {
	if _, err := w.agent(agent); err != nil {
		return err
	}
	if err := w.start(ctx); err != nil {
		return err
	}
	if w.d == nil {
		return errors.New("the daemon runs as its own process; its spares cannot be asked after")
	}
	return w.eventually(ctx, agent+"'s spare to be ready", func() (bool, string, error) {
		return w.d.SpareReady(agent), "no spare ready", nil
	})
}

func (w *world) stepOwnSessionOnSpare(agent, rootText string) error {
	a, p, err := w.spareAndPrompt(agent, rootText)
	if err != nil {
		return err
	}
	pid, err := w.threadPid(agent, rootText)
	if err != nil {
		return err
	}
	if pid != a.spare || p.SessionID == a.spareSession {
		return fmt.Errorf("%s answered the thread of %q in session %s of process %d, want a session other than %s on the spare %d", agent, rootText, p.SessionID, pid, a.spareSession, a.spare)
	}
	return nil
}
