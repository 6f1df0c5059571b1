package steps

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/config"
)

// limitSteps set and observe the process caps: max_processes per agent and
// per daemon, sessions_per_process, queue_notice_after.
func limitSteps(w *world) []stepDef {
	return []stepDef{
		{area: "setup", pattern: `^([a-z0-9-]+) runs at most (\d+) process(?:es)?$`,
			example: `agent-a runs at most 3 processes`,
			doc:     "Sets the agent's zooid.yaml max_processes.",
			fn:      w.stepAgentMaxProcs},
		{area: "setup", pattern: `^([a-z0-9-]+) hosts up to (\d+) sessions per process$`,
			example: `agent-a hosts up to 10 sessions per process`,
			doc:     "Sets the agent's zooid.yaml sessions_per_process.",
			fn:      w.stepPerProc},
		{area: "setup", pattern: `^([a-z0-9-]+) hosts as many sessions per process as it can$`,
			example: `agent-a hosts as many sessions per process as it can`,
			doc:     "Sets the agent's zooid.yaml sessions_per_process to auto: several sessions a process if the agent advertises session/close, else one.",
			fn:      w.stepPerProcAuto},
		{area: "setup", pattern: `^([a-z0-9-]+) can close sessions$`,
			example: `agent-a can close sessions`,
			doc:     "The scripted agent advertises session/close (sessionCapabilities.close) when initialized.",
			fn:      w.stepCanCloseSessions},
		{area: "prompts", pattern: `^([a-z0-9-]+) is told to close the session of the thread of "([^"]+)"$`,
			example: `agent-a is told to close the session of the thread of "how is svc-a?"`,
			doc:     "Waits until the agent process that got the thread's first prompt is sent session/close for that ACP session (the fake agent records it).",
			fn:      w.stepSessionClosed},
		{area: "setup", pattern: `^the daemon runs at most (\d+) agent processes$`,
			example: `the daemon runs at most 2 agent processes`,
			doc:     "Sets zooid.yaml max_processes: the cap on live agent processes across agents.",
			fn:      w.stepDaemonMaxProcs},
		{area: "setup", pattern: `^a turn waiting for an agent process is announced after (\d+) seconds?$`,
			example: `a turn waiting for an agent process is announced after 1 second`,
			doc:     "Sets zooid.yaml queue_notice_after (at least 1s, as zooid.yaml allows).",
			fn:      w.stepQueueNotice},
		{area: "humans", pattern: `^([a-z0-9-]+) mentions ([a-z0-9-]+) in (\d+) new threads of "(#[a-z0-9-]+)"$`,
			example: `ori mentions agent-a in 30 new threads of "#ops"`,
			doc:     "Posts that many top-level mentions of the agent, one after another (\"question N of M\"); later steps call them \"those threads\".",
			fn:      w.stepMentionsMany},
		{area: "prompts", pattern: `^([a-z0-9-]+) has been prompted (\d+) times?$`,
			example: `agent-a has been prompted 2 times`,
			doc:     "Waits until the agent has received at least that many prompts (harness barriers not counted).",
			fn:      w.stepPromptedAtLeast},
		{area: "prompts", pattern: `^([a-z0-9-]+) was prompted in those threads in the order they were started$`,
			example: `agent-a was prompted in those threads in the order they were started`,
			doc:     "The agent's first prompts of the threads of the last \"mentions … in N new threads\" step came in the order the threads were started.",
			fn:      w.stepPromptOrder},
		{area: "prompts", pattern: `^([a-z0-9-]+)'s live processes peaked at (\d+)$`,
			example: `agent-a's live processes peaked at 3`,
			doc:     "The most processes of the agent alive at once (read from /proc each time one started) is exactly that: never more, and the cap was reached.",
			fn:      w.stepPeak},
		{area: "prompts", pattern: `^the agents' live processes peaked at (\d+) together$`,
			example: `the agents' live processes peaked at 2 together`,
			doc:     "The most agent processes of all agents alive at once (read from /proc each time one started) is exactly that.",
			fn:      w.stepPeakAll},
		{area: "prompts", pattern: `^([a-z0-9-]+)'s process in the thread of "([^"]+)" (has stopped|is still running)$`,
			example: `agent-a's process in the thread of "audit svc-b" has stopped`,
			doc:     "The process that got the thread's first prompt: waits until it has exited, or checks it is alive now.",
			fn:      w.stepThreadProcess},
		{area: "prompts", pattern: `^([a-z0-9-]+) answered the threads of "([^"]+)" and "([^"]+)" in one process$`,
			example: `agent-a answered the threads of "audit svc-a" and "audit svc-b" in one process`,
			doc:     "The threads' first prompts reached the same agent process (two ACP sessions on it).",
			fn:      w.stepOneProcess},
		{area: "posts", pattern: `^the thread of "([^"]+)" gets "([^"]*)" from ([a-z0-9-]+)$`,
			example: `the thread of "audit svc-c" gets "ok" from agent-b`,
			doc:     "Waits until the agent's m.notice with that body is in the thread, without a barrier (which would queue behind held turns); count it later with a posts step.",
			fn:      w.stepThreadGets},
		{area: "posts", pattern: `^each of those threads gets (exactly one )?"([^"]*)" from ([a-z0-9-]+)$`,
			example: `each of those threads gets exactly one "ok" from agent-a`,
			doc:     "Waits until every thread of the last \"mentions … in N new threads\" step has the agent's m.notice with that body; with \"exactly one\", after a barrier, each has it once.",
			fn:      w.stepEachThreadGets},
	}
}

func (w *world) beforeStart(what string) error {
	if w.started {
		return fmt.Errorf("set %s before the first action starts the daemon", what)
	}
	return nil
}

func (w *world) stepAgentMaxProcs(agent, n string) error {
	if err := w.beforeStart("max_processes"); err != nil {
		return err
	}
	a, err := w.agent(agent)
	if err != nil {
		return err
	}
	a.maxProcs, _ = strconv.Atoi(n)
	return nil
}

func (w *world) stepPerProc(agent, n string) error {
	if err := w.beforeStart("sessions_per_process"); err != nil {
		return err
	}
	a, err := w.agent(agent)
	if err != nil {
		return err
	}
	a.perProc, _ = strconv.Atoi(n)
	return nil
}

func (w *world) stepPerProcAuto(agent string) error {
	if err := w.beforeStart("sessions_per_process"); err != nil {
		return err
	}
	a, err := w.agent(agent)
	if err != nil {
		return err
	}
	a.perProc = config.SessionsPerProcessAuto
	return nil
}

func (w *world) stepCanCloseSessions(agent string) error {
	if err := w.beforeStart("the agent's capabilities"); err != nil {
		return err
	}
	a, err := w.agent(agent)
	if err != nil {
		return err
	}
	a.closeSessions = true
	return nil
}

func (w *world) stepSessionClosed(ctx context.Context, agent, rootText string) error {
	root, err := w.threadOf(rootText)
	if err != nil {
		return err
	}
	p, ok := w.promptWith(agent, root.core)
	if !ok {
		return fmt.Errorf("%s was never prompted in the thread of %q", agent, rootText)
	}
	return w.eventually(ctx, fmt.Sprintf("%s is sent session/close for %s", agent, p.SessionID), func() (bool, string, error) {
		closed := w.ctl.Closed(agent)
		for _, c := range closed {
			if c.SessionID == p.SessionID {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("closed so far: %v", closed), nil
	})
}

func (w *world) stepDaemonMaxProcs(n string) error {
	if err := w.beforeStart("max_processes"); err != nil {
		return err
	}
	w.maxProcs, _ = strconv.Atoi(n)
	return nil
}

func (w *world) stepQueueNotice(secs string) error {
	if err := w.beforeStart("queue_notice_after"); err != nil {
		return err
	}
	n, _ := strconv.Atoi(secs)
	w.queueNotice = time.Duration(n) * time.Second
	return nil
}

func (w *world) stepMentionsMany(ctx context.Context, who, agent, count, roomName string) error {
	if _, err := w.agent(agent); err != nil {
		return err
	}
	n, _ := strconv.Atoi(count)
	w.stepSeq++
	w.batch = w.batch[:0]
	for i := range n {
		p, err := w.say(ctx, who, roomName, fmt.Sprintf("@%s question %d of %d (batch %d)", agent, i+1, n, w.stepSeq), "", true)
		if err != nil {
			return err
		}
		w.batch = append(w.batch, p)
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

func (w *world) stepPromptedAtLeast(ctx context.Context, agent, count string) error {
	if _, err := w.agent(agent); err != nil {
		return err
	}
	n, _ := strconv.Atoi(count)
	return w.eventually(ctx, fmt.Sprintf("%s prompted %d times", agent, n), func() (bool, string, error) {
		got := len(w.scriptedPrompts(agent))
		return got >= n, fmt.Sprintf("%d prompts", got), nil
	})
}

func (w *world) stepPromptOrder(ctx context.Context, agent string) error {
	if len(w.batch) == 0 {
		return errors.New("no step started a batch of threads")
	}
	var order []int
	for _, text := range w.scriptedPrompts(agent) {
		for i, p := range w.batch {
			if strings.Contains(text, p.core) {
				order = append(order, i+1)
			}
		}
	}
	if len(order) != len(w.batch) {
		return fmt.Errorf("%s was prompted in %d of the %d threads: %v", agent, len(order), len(w.batch), order)
	}
	for i, n := range order {
		if n != i+1 {
			return fmt.Errorf("%s was prompted in the threads in the order %v, want 1…%d", agent, order, len(w.batch))
		}
	}
	return nil
}

func (w *world) stepPeak(agent, count string) error {
	if _, err := w.agent(agent); err != nil {
		return err
	}
	n, _ := strconv.Atoi(count)
	got, err := w.ctl.PeakProcesses(agent)
	if err != nil {
		return fmt.Errorf("counting %s's processes: %w", agent, err)
	}
	if got != n {
		return fmt.Errorf("at most %d processes of %s were alive at once, want %d", got, agent, n)
	}
	return nil
}

func (w *world) stepPeakAll(count string) error {
	n, _ := strconv.Atoi(count)
	got, err := w.ctl.PeakAllProcesses()
	if err != nil {
		return fmt.Errorf("counting agent processes: %w", err)
	}
	if got != n {
		return fmt.Errorf("at most %d agent processes were alive at once, want %d", got, n)
	}
	return nil
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

func (w *world) stepOneProcess(agent, first, second string) error {
	a, err := w.threadPid(agent, first)
	if err != nil {
		return err
	}
	b, err := w.threadPid(agent, second)
	if err != nil {
		return err
	}
	if a != b {
		return fmt.Errorf("%s answered %q in process %d and %q in process %d", agent, first, a, second, b)
	}
	return nil
}

func (w *world) stepThreadProcess(ctx context.Context, agent, rootText, state string) error {
	pid, err := w.threadPid(agent, rootText)
	if err != nil {
		return err
	}
	if state == "is still running" {
		if err := syscall.Kill(pid, 0); err != nil {
			return fmt.Errorf("%s's process %d in the thread of %q is gone: %w", agent, pid, rootText, err)
		}
		return nil
	}
	return w.eventually(ctx, fmt.Sprintf("%s's process %d to stop", agent, pid), func() (bool, string, error) {
		if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			return true, "", nil
		}
		return false, fmt.Sprintf("process %d still exists", pid), nil
	})
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

func (w *world) stepThreadGets(ctx context.Context, rootText, text, agent string) error {
	root, err := w.threadOf(rootText)
	if err != nil {
		return err
	}
	return w.waitThreadsGet(ctx, agent, text, []*post{root})
}

func (w *world) stepEachThreadGets(ctx context.Context, exactly, text, agent string) error {
	if len(w.batch) == 0 {
		return errors.New("no step started a batch of threads")
	}
	if err := w.waitThreadsGet(ctx, agent, text, w.batch); err != nil {
		return err
	}
	if exactly == "" {
		return nil
	}
	if err := w.barrier(ctx, agent); err != nil {
		return err
	}
	got, err := w.threadNotices(ctx, agent, w.batch)
	if err != nil {
		return err
	}
	for i, p := range w.batch {
		n := 0
		for _, b := range got[p.root] {
			if b == text {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("thread %d of %d got %q from %s %d times: %q", i+1, len(w.batch), text, agent, n, got[p.root])
		}
	}
	return nil
}
