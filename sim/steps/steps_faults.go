package steps

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/fakeagent"
	"github.com/zooid-dev/zooid/fakehs"
	"github.com/zooid-dev/zooid/internal/faultpoint"
	"github.com/zooid-dev/zooid/zooid/daemon"
	"github.com/zooid-dev/zooid/zooid/zevent"
)

// faultSteps program the fake homeserver's misbehaviour beyond a plain error
// answer (see the fault step in setupSteps) and check how the daemon retried.
func faultSteps(w *world) []stepDef {
	return []stepDef{
		{area: "setup", pattern: `^the homeserver answers (every|the next \d+) (GET|PUT|POST) (/\S+?)(?: from ([a-z0-9-]+))? with 429 M_LIMIT_EXCEEDED, retry after (\d+) ms$`,
			example: `the homeserver answers the next 3 GET /_matrix/client/v3/rooms/*/messages from agent-a with 429 M_LIMIT_EXCEEDED, retry after 300 ms`,
			doc:     "Programs a rate limit on the fake homeserver whose answers carry that retry_after_ms (the plain 429 step asks for 20 ms); @fake-only.",
			fn:      w.stepRateLimit},
		{area: "setup", pattern: `^the homeserver drops (every|the next \d+) (GET|PUT|POST) (/\S+?)(?: from ([a-z0-9-]+))? (before|after) handling (?:it|them)$`,
			example: `the homeserver drops the next 2 PUT /_matrix/client/v3/rooms/*/send/*/* from agent-a after handling them`,
			doc:     "Programs dropped connections on the fake homeserver: before handling, the request is lost; after handling, its change is made and only the answer is lost (the client can't tell which); @fake-only.",
			fn:      w.stepDrop},
		{area: "setup", pattern: `^the homeserver holds (every|the next \d+) (GET|PUT|POST) (/\S+?)(?: from ([a-z0-9-]+))? (before|after) handling (?:it|them), never answering$`,
			example: `the homeserver holds the next 1 PUT /_matrix/client/v3/rooms/*/send/*/* from agent-a after handling it, never answering`,
			doc:     "Programs requests the fake homeserver accepts and never answers, until the client gives up: before handling, the request is lost; after handling, its change is made and only the answer never comes; @fake-only.",
			fn:      w.stepHold},
		{area: "setup", pattern: `^tool calls give up after (\d+) seconds?$`,
			example: `tool calls give up after 2 seconds`,
			doc:     "Sets zooid.yaml tool_timeout (at least 1s, as zooid.yaml allows): the deadline of one Zooid MCP tool call.",
			fn:      w.stepToolTimeout},
		{area: "setup", pattern: `^a post the homeserver leaves unanswered is tried again after (\d+) seconds?$`,
			example: `a post the homeserver leaves unanswered is tried again after 2 seconds`,
			doc:     "Sets zooid.yaml post_timeout (at least 1s): the deadline of one try of a post, after which it is tried again with the same txn id.",
			fn:      w.stepPostTimeout},
		{area: "setup", pattern: `^the homeserver answers normally again$`,
			example: `the homeserver answers normally again`,
			doc:     "Removes every fault programmed so far; their hits stay counted for the checks.",
			fn:      w.stepFaultsCleared},
		{area: "setup", pattern: `^the daemon will be killed at its fault point "([a-z_.]+)"$`,
			example: `the daemon will be killed at its fault point "task.result_posted"`,
			doc:     "Arms a point of the daemon process (internal/faultpoint.Points: turn.closing_journaled, turn.reply_posted, task.result_posted, task.root_posted between a post and the journal write that records it; turn.end_traced between the journal and the trace): the daemon SIGKILLs itself the next time it gets there.",
			fn:      w.stepArmFaultPoint},
		{area: "setup", pattern: `^the daemon dies at "([a-z_.]+)" and is started again$`,
			example: `the daemon dies at "task.result_posted" and is started again`,
			doc:     "Waits until the daemon process has killed itself at that armed point (its log says so), then starts a new daemon on the same state dir, waiting until it is ready.",
			fn:      w.stepDiesAtFaultPoint},
		{area: "tools", pattern: `^([a-z0-9-]+) calls zooid_start_task_threads with (\{.*\}), and the daemon dies before answering$`,
			example: `planner calls zooid_start_task_threads with {"tasks": [{"agent": "coder", "prompt": "audit svc-a"}]}, and the daemon dies before answering`,
			doc:     "Makes the call as the plain call step does but waits for no result (the daemon is to die at an armed fault point meanwhile); its tasks are known by their prompts, and a later \"has exactly one root\" step finds each one's thread in the room.",
			fn:      w.stepStartCutShort},
		{area: "posts", pattern: `^the task "([^"]+)" has exactly one root in "(#[a-z0-9-]+)"$`,
			example: `the task "audit svc-a" has exactly one root in "#ops"`,
			doc:     "Waits until a top-level message of the room from the task's caller carries dev.zooid.thread_start for its assignee with its prompt, and checks it is the only one; it becomes the task's thread (for a task whose start result never came back; said again later, it checks the root is still the one).",
			fn:      w.stepOneRoot},
		{area: "script", pattern: `^([a-z0-9-]+) will flood the thread with (\d+) bytes of prose$`,
			example: `agent-a will flood the thread with 2000000 bytes of prose`,
			doc:     "Queues a turn that streams a long text of that many bytes (made as the long reply's prose is) in chunks of about 32 KiB, and ends.",
			fn:      w.stepWillFlood},
		{area: "posts", pattern: `^([a-z0-9-]+)'s flood arrives in the thread cut to what one turn may post, with a notice$`,
			example: `agent-a's flood arrives in the thread cut to what one turn may post, with a notice`,
			doc:     "After a barrier, the agent's notices in the current thread are exactly the flood's first daemon.MaxTurnProse bytes (cut on a rune) as zevent.SplitBody parts, then one notice saying how many bytes were not posted.",
			fn:      w.stepFloodArrives},
		{area: "setup", pattern: `^every request the homeserver refused was asked again (\d+) ms or more later$`,
			example: `every request the homeserver refused was asked again 300 ms or more later`,
			doc:     "Waits until every request a programmed fault applied to has been asked again (the same method and path), and checks each retry came at least that long after the refusal, by the fake homeserver's clock.",
			fn:      w.stepRetriedAfter},
	}
}

func (w *world) stepRateLimit(ctx context.Context, count, method, path, who, ms string) error {
	n, err := strconv.Atoi(ms)
	if err != nil {
		return fmt.Errorf("retry after %q ms: %w", ms, err)
	}
	f := fakehs.Fault{Status: 429, Errcode: "M_LIMIT_EXCEEDED", RetryAfter: time.Duration(n) * time.Millisecond}
	return w.programFault(ctx, count, method, path, who, f, "429 retry after "+ms+" ms")
}

func (w *world) stepDrop(ctx context.Context, count, method, path, who, when string) error {
	f := fakehs.Fault{Drop: when == "before", DropResponse: when == "after"}
	return w.programFault(ctx, count, method, path, who, f, "dropped "+when+" handling")
}

func (w *world) stepHold(ctx context.Context, count, method, path, who, when string) error {
	f := fakehs.Fault{Hold: when == "before", HoldResponse: when == "after"}
	return w.programFault(ctx, count, method, path, who, f, "held "+when+" handling")
}

func (w *world) stepToolTimeout(secs string) error {
	if err := w.beforeStart("tool_timeout"); err != nil {
		return err
	}
	n, _ := strconv.Atoi(secs)
	w.toolTimeout = time.Duration(n) * time.Second
	return nil
}

func (w *world) stepPostTimeout(secs string) error {
	if err := w.beforeStart("post_timeout"); err != nil {
		return err
	}
	n, _ := strconv.Atoi(secs)
	w.postTimeout = time.Duration(n) * time.Second
	return nil
}

func (w *world) stepFaultsCleared() error {
	if len(w.faults) == 0 {
		return errors.New("no fault has been programmed")
	}
	for _, f := range w.faults {
		f.handle.Clear()
	}
	return nil
}

func (w *world) stepRetriedAfter(ctx context.Context, ms string) error {
	n, err := strconv.Atoi(ms)
	if err != nil {
		return fmt.Errorf("%q ms: %w", ms, err)
	}
	least := time.Duration(n) * time.Millisecond
	if len(w.faults) == 0 {
		return errors.New("no fault has been programmed")
	}
	err = w.eventually(ctx, "every refused request is asked again", func() (bool, string, error) {
		for _, f := range w.faults {
			for _, h := range f.handle.Log() {
				if h.RetriedAt.IsZero() {
					return false, fmt.Sprintf("%s %s (fault %s) not asked again", h.Method, h.Path, f.what), nil
				}
			}
		}
		return true, "", nil
	})
	if err != nil {
		return err
	}
	var errs []error
	hits := 0
	for _, f := range w.faults {
		for _, h := range f.handle.Log() {
			hits++
			if waited := h.RetriedAt.Sub(h.At); waited < least {
				errs = append(errs, fmt.Errorf("%s %s (fault %s) was asked again %v after the refusal, want %v or more", h.Method, h.Path, f.what, waited.Round(time.Millisecond), least))
			}
		}
	}
	if hits == 0 {
		return errors.New("no programmed fault has fired yet")
	}
	return errors.Join(errs...)
}

// killFile is the file that arms the daemon process's fault points.
func (w *world) killFile() string { return filepath.Join(w.dir, "kill-at") }

func (w *world) stepArmFaultPoint(point string) error {
	if w.tw().proc == nil {
		return errors.New("fault points are in the daemon process: declare \"the daemon runs as its own process\" first")
	}
	if !slices.Contains(faultpoint.Points, point) {
		return fmt.Errorf("no fault point %q; the daemon has %v", point, faultpoint.Points)
	}
	return os.WriteFile(w.killFile(), []byte(point), 0o600)
}

func (w *world) stepDiesAtFaultPoint(ctx context.Context, point string) error {
	p := w.tw().proc
	if p == nil {
		return errors.New("the daemon runs in-process; declare \"the daemon runs as its own process\" first")
	}
	wctx, cancel := w.waitCtx(ctx)
	defer cancel()
	select {
	case <-p.Done():
	case <-wctx.Done():
		return fmt.Errorf("the daemon did not die at %s within %s: %s", point, w.run.wait, w.daemonLogTail())
	}
	log, err := os.ReadFile(p.LogPath())
	if err != nil {
		return fmt.Errorf("reading the daemon log: %w", err)
	}
	if !strings.Contains(string(log), "faultpoint: killed at "+point+"\n") {
		return fmt.Errorf("the daemon died, but not at %s: %s", point, w.daemonLogTail())
	}
	if _, err := os.Stat(w.killFile()); !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("the daemon died at %s but left the point armed (%v)", point, err)
	}
	return w.spawnDaemon(ctx)
}

func (w *world) stepStartCutShort(ctx context.Context, agent, js string) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	if w.tw().proc == nil {
		return errors.New("only a daemon process can die mid-call: declare \"the daemon runs as its own process\" first")
	}
	args, err := w.toolArgs(agent, js)
	if err != nil {
		return err
	}
	f := w.focus[agent]
	if f == nil {
		return fmt.Errorf("%s is answering no mention yet: have someone mention it first", agent)
	}
	if err := w.waitPrompted(ctx, agent, f.core); err != nil {
		return err
	}
	specs, _ := args["tasks"].([]any)
	if len(specs) == 0 {
		return errors.New("the call starts no task")
	}
	notify, _ := args["notify"].(string)
	if notify == "" {
		notify = "caller"
	}
	w.ctl.Queue(agent, fakeagent.Turn{fakeagent.CallTool("zooid_start_task_threads", args), fakeagent.Stop("end_turn")})
	w.stepSeq++
	if _, err := w.say(ctx, f.sender, f.room.name, fmt.Sprintf("@%s go on (%d)", agent, w.stepSeq), f.root, true); err != nil {
		return err
	}
	tw := w.tw()
	for _, sp := range specs {
		spec, _ := sp.(map[string]any)
		assignee, _ := spec["agent"].(string)
		prompt, _ := spec["prompt"].(string)
		tw.tasks = append(tw.tasks, &taskRef{caller: agent, agent: assignee, prompt: prompt, notify: notify,
			room: f.room, origin: w.rootPost(f)})
	}
	return nil
}

func (w *world) stepOneRoot(ctx context.Context, s, roomName string) error {
	t, err := w.task(s)
	if err != nil {
		return err
	}
	r, err := w.room(ctx, roomName)
	if err != nil {
		return err
	}
	caller, assignee := w.names().agent(t.caller), w.names().agent(t.agent)
	var roots []id.EventID
	// A homeserver may show a new event a moment after it was sent: wait for
	// the root; a second one would already be there by then (a repeated post
	// is no later than the first).
	err = w.eventually(ctx, fmt.Sprintf("the root of %s is in %s", t, roomName), func() (bool, string, error) {
		msgs, err := w.readRaw(ctx, r)
		if err != nil {
			return false, "", err
		}
		roots = roots[:0]
		for _, m := range msgs {
			start, ok := m.content[zevent.KeyThreadStart].(map[string]any)
			body, _ := m.content["body"].(string)
			if ok && m.thread == "" && m.ev.Sender == caller && start["assignee"] == t.agent &&
				strings.Contains(body, string(assignee)) && strings.Contains(body, t.prompt) {
				roots = append(roots, m.ev.ID)
			}
		}
		return len(roots) > 0, fmt.Sprintf("%d roots", len(roots)), nil
	})
	if err != nil {
		return err
	}
	if len(roots) != 1 {
		return fmt.Errorf("%s has %d roots in %s (%v), want exactly one", t, len(roots), roomName, roots)
	}
	if t.thread != "" && t.thread != roots[0] {
		return fmt.Errorf("%s started in %s, but its root in %s is %s", t, t.thread, roomName, roots[0])
	}
	t.thread, t.room = roots[0], r
	return nil
}

func (w *world) stepWillFlood(agent, n string) error {
	k, err := strconv.Atoi(n)
	if err != nil {
		return fmt.Errorf("%q bytes: %w", n, err)
	}
	if w.prose == nil {
		w.prose = map[string]string{}
	}
	text := longProse(k)
	w.prose[agent] = text
	var chunks []string
	for i := 0; i < len(text); {
		end := min(i+32<<10, len(text))
		for end < len(text) && !utf8.RuneStart(text[end]) {
			end--
		}
		chunks = append(chunks, text[i:end])
		i = end
	}
	return w.queue(agent, fakeagent.Turn{fakeagent.SayInChunks(chunks...), fakeagent.Stop("end_turn")})
}

func (w *world) stepFloodArrives(ctx context.Context, agent string) error {
	text, ok := w.prose[agent]
	if !ok {
		return fmt.Errorf("%s was not given a flood", agent)
	}
	if len(text) <= daemon.MaxTurnProse {
		return fmt.Errorf("a flood of %d bytes fits in the %d a turn may post: make it longer", len(text), daemon.MaxTurnProse)
	}
	if w.thread == nil {
		return errors.New("there is no current thread yet")
	}
	n := daemon.MaxTurnProse
	for n > 0 && !utf8.RuneStart(text[n]) {
		n--
	}
	want := zevent.SplitBody(strings.TrimSpace(text[:n]), zevent.MaxBodyBytes)
	want = append(want, fmt.Sprintf("⚠ %s said more than one turn may post (%d bytes); the rest, %d bytes, was not posted.", agent, daemon.MaxTurnProse, len(text)-n))
	r, root := w.thread.room, w.thread.root
	var got []string
	look := func() (bool, string, error) {
		msgs, err := w.readRoom(ctx, r, 3)
		if err != nil {
			return false, "", err
		}
		mine, seen := w.fromAgent(msgs, agent)
		got = got[:0]
		for _, m := range mine {
			if m.thread == root && m.msgtype == "m.notice" {
				got = append(got, m.body)
			}
		}
		return len(got) >= len(want), seen, nil
	}
	if err := w.eventually(ctx, fmt.Sprintf("%s posts %d notices in the thread", agent, len(want)), look); err != nil {
		return err
	}
	if err := w.barrier(ctx, agent); err != nil {
		return err
	}
	if _, _, err := look(); err != nil {
		return err
	}
	slices.Reverse(got) // readRoom is newest first
	if len(got) != len(want) {
		return fmt.Errorf("%s posted %d notices in the thread, want %d (%d parts of the first %d bytes, then the notice)", agent, len(got), len(want), len(want)-1, n)
	}
	for i := range want {
		if got[i] != want[i] {
			return fmt.Errorf("notice %d of %d (%d bytes, %.60q) is not the expected %d bytes (%.60q)", i+1, len(want), len(got[i]), got[i], len(want[i]), want[i])
		}
	}
	return nil
}
