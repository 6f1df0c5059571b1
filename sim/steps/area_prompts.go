package steps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/cucumber/godog"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/modeldouble"
	"github.com/zooid-dev/zooid/sim/standin"
)

// The catalogue's "What agents received" steps (area prompts) and the step
// methods they run.

func promptSteps(w *world) []stepDef {
	return []stepDef{
		{area: "prompts", pattern: `^([a-z0-9-]+) is prompted with "([^"]*)"$`,
			example: `agent-a is prompted with "can someone audit svc-a"`,
			doc:     "Waits until one of the agent's prompts contains the text.",
			fn:      w.stepPrompted},
		{area: "prompts", pattern: `^([a-z0-9-]+) is prompted with "([^"]*)" within (\d+) seconds?$`,
			example: `agent-b is prompted with "can someone audit svc-a" within 4 seconds`,
			doc:     "Waits that long at most, from the step's start, for a prompt containing the text: for a message that must not wait behind another (the bound is what the scenario claims; the ordinary steps wait longer).",
			fn:      w.stepPromptedWithin},
		{area: "prompts", pattern: `^([a-z0-9-]+)'s prompt with "([^"]*)" is exactly:$`,
			example: `agent-a's prompt with "can someone audit svc-a" is exactly:`,
			doc:     "Waits for the prompt containing the text and compares it whole with the doc string, in which {placeholder} in braces is replaced as in tool arguments (`{#ops}`, `{#ops:alias}`, `{@ori}`, `{$thread}`, `{$task:audit svc-a}`).",
			fn:      w.stepPromptExactly},
		{area: "prompts", pattern: `^([a-z0-9-]+) is prompted (once|twice|\d+ times) with "([^"]*)"$`,
			example: `agent-a is prompted once with "can someone audit svc-a"`,
			doc:     "After a barrier, exactly that many of the agent's prompts contain the text.",
			fn:      w.stepPromptedTimes},
		{area: "prompts", pattern: `^([a-z0-9-]+) is not prompted with "([^"]*)"$`,
			example: `agent-b is not prompted with "can someone audit svc-a"`,
			doc:     "After a barrier, none of the agent's prompts contain the text.",
			fn:      w.stepNotPrompted},
		{area: "prompts", pattern: `^([a-z0-9-]+) is prompted with "([^"]*)" in the same session as "([^"]*)"$`,
			example: `agent-a is prompted with "and svc-b" in the same session as "audit svc-a"`,
			doc:     "Waits for the first prompt, then checks it went to the session of the earlier one.",
			fn:      w.stepSameSession},
		{area: "prompts", pattern: `^([a-z0-9-]+) is prompted with "([^"]*)" in a new session$`,
			example: `agent-a is prompted with "start over" in a new session`,
			doc:     "Waits for the prompt and checks its session received no earlier prompt.",
			fn:      w.stepNewSession},
		{area: "prompts", pattern: `^([a-z0-9-]+) has had (\d+) sessions?$`,
			example: `agent-a has had 2 sessions`,
			doc:     "Waits until the agent has received that many session/new, and checks there are no more.",
			fn:      w.stepSessions},
		{area: "prompts", pattern: `^([a-z0-9-]+)'s session/new offers the zooid MCP server over stdio$`,
			example: `agent-a's session/new offers the zooid MCP server over stdio`,
			doc:     "The agent's latest session/new has exactly one MCP server: stdio, this executable's `mcp` subcommand.",
			fn:      w.stepSessionNewMCP},
		{area: "prompts", pattern: `^no secret appears in ([a-z0-9-]+)'s environment, arguments or session/new$`,
			example: `no secret appears in agent-a's environment, arguments or session/new`,
			doc:     "Neither the appservice tokens nor any user's access token occur in the agent process's env or argv, or in what session/new carried; and the session's binding id (handed to the bridge in `$ZOOID_BINDING`) is in the argv (`/proc/<pid>/cmdline`) of neither the agent process nor any live descendant of it, once its bridge runs.",
			fn:      w.stepNoSecrets},
		{area: "prompts", pattern: `^([a-z0-9-]+) sees exactly the tools ([a-z_, ]+)$`,
			example: `agent-a sees exactly the tools zooid_get_recent_threads, zooid_get_history and zooid_send_message`,
			doc:     "The latest tools/list the agent made holds exactly these tools, in any order.",
			fn:      w.stepSeesTools},
		{area: "prompts", pattern: `^([a-z0-9-]+) does not see (zooid_[a-z_]+)$`,
			example: `agent-a does not see zooid_complete_task`,
			doc:     "The latest tools/list the agent made lacks the tool.",
			fn:      w.stepNotSeesTool},

		// Task threads (behaviour §5). Tasks are named by a piece of their prompt;
		// their thread roots become threads the shared steps can name too ("ori
		// replies in the thread of "audit svc-a": …").
		{area: "prompts", pattern: `^([a-z0-9-]+) is (woken once|woken twice|woken \d+ times|never woken) with the result of "([^"]+)"$`,
			example: `agent-a is never woken with the result of "audit svc-a"`,
			doc:     "After a barrier, exactly that many of the agent's prompts carry the task's result (they name its thread).",
			fn:      w.stepWokenWith},
		{area: "prompts", pattern: `^([a-z0-9-]+) is prompted once with the task "([^"]+)", under a header from ([a-z0-9-]+)$`,
			example: `agent-b is prompted once with the task "audit svc-a", under a header from agent-a`,
			doc:     "After a barrier, exactly one prompt of the agent carries the task's prompt; it opens its session and its header names the caller, the assignee role, zooid_complete_task and handing off by mention.",
			fn:      w.stepPromptedWithHeader},
		{area: "prompts", pattern: `^([a-z0-9-]+) is woken once per task, in the session that delegated it, in the order the tasks ended$`,
			example: `agent-a is woken once per task, in the session that delegated it, in the order the tasks ended`,
			doc:     "Every notify-caller task of the agent wakes it exactly once, in the ACP session that called zooid_start_task_threads, in the order of the dev.zooid.thread_result events.",
			fn:      w.stepWokenPerTask},
		{area: "prompts", pattern: `^([a-z0-9-]+) is woken with the result of "([^"]+)" only after its turn ends with "([^"]*)"$`,
			example: `agent-a is woken with the result of "audit svc-a" only after its turn ends with "still planning"`,
			doc:     "The task's result was posted while the agent's turn ran, yet the wake reached it after that turn's closing message was posted.",
			fn:      w.stepWokenAfterTurn},

		// Handoffs in the thread (zooid_handoff, behaviour §3).
		{area: "prompts", pattern: `^([a-z0-9-]+) gets the handoff return from ([a-z0-9.-]+) once(, in the session that handed off)?: "([^"]*)"$`,
			example: `planner gets the handoff return from coder once, in the session that handed off: "certificates valid until 2027"`,
			doc:     "After a barrier, exactly one of the agent's prompts carries \"[handoff return] from CALLEE\" (CALLEE as the caller's daemon names it: workstation.name for another daemon's agent), and it holds the quoted text; with the clause, it reached the ACP session that answered the agent's current thread from its start (not a fresh one).",
			fn:      w.stepHandoffReturn},
		{area: "prompts", pattern: `^([a-z0-9-]+) gets the handoff return from ([a-z0-9-]+) only after ([a-z0-9-]+)'s turn ends with "([^"]*)"$`,
			example: `planner gets the handoff return from coder only after coder's turn ends with "certificates valid until 2027"`,
			doc:     "Waits for the return, then checks it reached the agent after the callee's closing message was in the room (not at an earlier post of that turn).",
			fn:      w.stepHandoffReturnAfter},

		// Agents as the operating system sees them.
		{area: "prompts", pattern: `^([a-z0-9-]+)'s process stops$`,
			example: `agent-a's process stops`,
			doc:     "Waits until the process of the agent's latest session has exited (and was reaped by the daemon).",
			fn:      w.stepProcessStops},

		// The process caps: max_processes per agent and per daemon,
		// sessions_per_process, queue_notice_after.
		{area: "prompts", pattern: `^([a-z0-9-]+) is told to close the session of the thread of "([^"]+)"$`,
			example: `agent-a is told to close the session of the thread of "how is svc-a?"`,
			doc:     "Waits until the agent process that got the thread's first prompt is sent session/close for that ACP session (the fake agent records it).",
			fn:      w.stepSessionClosed},
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

		// Spare processes (prewarm).
		{area: "prompts", pattern: `^([a-z0-9-]+) has a spare process$`,
			example: `agent-a has a spare process`,
			doc:     "Waits until a live process of the agent, not the spare an earlier such step found, has come up and opened a session, and none of its sessions has been prompted; remembers it and that session as the agent's spare.",
			fn:      w.stepHasSpare},
		{area: "prompts", pattern: `^([a-z0-9-]+) answered the thread of "([^"]+)" in the session that spare opened$`,
			example: `agent-a answered the thread of "how is svc-a?" in the session that spare opened`,
			doc:     "The thread's first prompt went to the session the process the last \"has a spare process\" step found had opened before the thread began.",
			fn:      w.stepAnsweredInSpare},
		{area: "prompts", pattern: `^([a-z0-9-]+) answered the thread of "([^"]+)" in a session of its own on that spare process$`,
			example: `coder answered the thread of "audit svc-a" in a session of its own on that spare process`,
			doc:     "The thread's first prompt reached the process the last \"has a spare process\" step found, in a session other than the one that spare had opened.",
			fn:      w.stepOwnSessionOnSpare},
		{area: "prompts", pattern: `^([a-z0-9-]+)'s spare is ready$`,
			example: `bot's spare is ready`,
			doc:     "Waits until the daemon reports the agent's spare process started and initialized, with its spare session open (any agent, real ones too).",
			fn:      w.stepSpareReady},
		{area: "prompts", pattern: `^the daemon shuts down$`,
			example: `the daemon shuts down`,
			doc:     "Closes the in-process daemon as `zooid run` does on SIGTERM (Daemon.Close), signalling none of its agents: what it started, it must stop itself.",
			fn:      w.stepDaemonShutsDown},
		{area: "prompts", pattern: `^([a-z0-9-]+)'s spare process has stopped$`,
			example: `agent-a's spare process has stopped`,
			doc:     "Waits until the process the last \"has a spare process\" step found has exited (and was reaped by the daemon).",
			fn:      w.stepSpareStopped},

		// Agents reached over the plain HTTP transport (behaviour §7).
		{area: "prompts", pattern: `^([a-z0-9-]+)'s session/new has no MCP server$`,
			example: `hook's session/new has no MCP server`,
			doc:     "The agent's latest session/new carried an empty mcpServers list.",
			fn:      w.stepNoMCP},

		// Real agents: their adapters against the model double.
		{area: "prompts", pattern: `^([a-z0-9-]+)'s model read the result of ([A-Za-z][A-Za-z0-9_]*): (\{.*\})$`,
			example: `claude1's model read the result of zooid_get_room_info: {"name": "{#ops}", "transport": "matrix"}`,
			doc:     "Waits for a model request of a real agent that carries the tool's result (not an error), a JSON object holding each field given with that value (placeholders resolved): the call reached the daemon and its answer reached the model.",
			fn:      w.stepModelReadResult},
		{area: "prompts", pattern: `^([a-z0-9-]+)'s model read an error from ([A-Za-z][A-Za-z0-9_]*) containing "([^"]*)"$`,
			example: `claude1's model read an error from Bash containing "refused permission"`,
			doc:     "Waits for a model request of a real agent that carries the tool's result as an error (marked so where its API has the mark: Anthropic's is_error, Gemini's error response; OpenAI's function outputs have none) whose text contains the given text.",
			fn:      w.stepModelReadError},
		{area: "prompts", pattern: `^([a-z0-9-]+)'s model is prompted with "([^"]*)"$`,
			example: `claude1's model is prompted with "catch up with zooid_get_thread_history"`,
			doc:     "Waits for a turn request of a real agent's model whose prompt (the daemon's prompt as the agent passed it on, without the agent's own reminders) contains the text.",
			fn:      w.stepModelPrompted},
		{area: "prompts", pattern: `^([a-z0-9-]+)'s working directory has no file "([^"]+)"$`,
			example: `claude1's working directory has no file "pwned.txt"`,
			doc:     "Checks that the agent's working directory (its zooid.yaml dir) holds no file of that name: a refused command left nothing behind.",
			fn:      w.stepNoFile},
		{area: "prompts", pattern: `^([a-z0-9-]+)'s model is offered the Zooid tools (.+)$`,
			example: `claude1's model is offered the Zooid tools zooid_get_room_info, zooid_send_message`,
			doc:     "Checks the Zooid tools (by their own names) offered in the real agent's latest turn request to its model: exactly those listed, each with an input schema.",
			fn:      w.stepModelOffered},
	}
}

func (w *world) stepPrompted(ctx context.Context, agent, text string) error {
	return w.promptedWithin(ctx, agent, text, w.waitBound())
}

func (w *world) stepPromptedWithin(ctx context.Context, agent, text string, secs int) error {
	return w.promptedWithin(ctx, agent, text, time.Duration(secs)*time.Second)
}

// promptedWithin starts the daemon and waits, at most bound, for a prompt of
// agent containing text.
func (w *world) promptedWithin(ctx context.Context, agent, text string, bound time.Duration) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	if _, err := w.agent(agent); err != nil {
		return err
	}
	return w.waitPromptedWithin(ctx, bound, agent, text)
}

func (w *world) stepPromptExactly(ctx context.Context, agent, text string, doc *godog.DocString) error {
	if err := w.stepPrompted(ctx, agent, text); err != nil {
		return err
	}
	var errs []error
	want := bracePlaceholder.ReplaceAllStringFunc(doc.Content, func(m string) string {
		v, err := w.placeholder(agent, m[1:len(m)-1])
		if err != nil {
			errs = append(errs, err)
			return m
		}
		return fmt.Sprint(v)
	})
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	got, _ := w.promptWith(agent, text)
	if got.Text != want {
		return fmt.Errorf("%s's prompt with %q is\n%s\nwant\n%s", agent, text, got.Text, want)
	}
	return nil
}

func (w *world) stepPromptedTimes(ctx context.Context, agent, n, text string) error {
	return w.countPrompts(ctx, agent, text, times(n))
}

func (w *world) stepNotPrompted(ctx context.Context, agent, text string) error {
	return w.countPrompts(ctx, agent, text, 0)
}

func (w *world) stepSameSession(ctx context.Context, agent, text, earlier string) error {
	if err := w.stepPrompted(ctx, agent, text); err != nil {
		return err
	}
	p, _ := w.promptWith(agent, text)
	e, ok := w.promptWith(agent, earlier)
	if !ok {
		return fmt.Errorf("%s was never prompted with %q; %s", agent, earlier, w.promptsSeen(agent))
	}
	if p.SessionID != e.SessionID {
		return fmt.Errorf("%s got %q in session %s but %q in session %s; %s", agent, text, string(p.SessionID), earlier, string(e.SessionID), w.promptsSeen(agent))
	}
	return nil
}

func (w *world) stepNewSession(ctx context.Context, agent, text string) error {
	if err := w.stepPrompted(ctx, agent, text); err != nil {
		return err
	}
	ps := w.ctl.Prompts(agent)
	for i, p := range ps {
		if !strings.Contains(p.Text, text) {
			continue
		}
		for _, q := range ps[:i] {
			if q.SessionID == p.SessionID {
				return fmt.Errorf("%s got %q in session %s, which already had %q; %s", agent, text, string(p.SessionID), q.Text, w.promptsSeen(agent))
			}
		}
		return nil
	}
	return nil
}

func (w *world) stepSessions(ctx context.Context, agent string, n int) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	err := w.eventually(ctx, fmt.Sprintf("%s has %d sessions", agent, n), func() (bool, string, error) {
		got := len(w.sessionsOf(agent))
		return got >= n, fmt.Sprintf("%d sessions", got), nil
	})
	if err != nil {
		return err
	}
	// A session opened late (a duplicate wake) must still be caught.
	if err := w.barrier(ctx, agent); err != nil {
		return err
	}
	if got := len(w.sessionsOf(agent)); got != n {
		return fmt.Errorf("%s has had %d sessions, want %d; %s", agent, got, n, w.promptsSeen(agent))
	}
	return nil
}

func (w *world) stepSessionNewMCP(ctx context.Context, agent string) error {
	s, err := w.lastSession(ctx, agent)
	if err != nil {
		return err
	}
	raw, _ := json.Marshal(s.McpServers)
	if len(s.McpServers) != 1 || s.McpServers[0].Stdio == nil {
		return fmt.Errorf("%s's session/new mcpServers = %s, want one stdio entry", agent, raw)
	}
	st := s.McpServers[0].Stdio
	exe, err := standin.Path()
	if err != nil {
		return err
	}
	if st.Command != exe || len(st.Args) == 0 || st.Args[0] != "mcp" {
		return fmt.Errorf("%s's zooid MCP entry runs %q %q, want %q mcp …", agent, st.Command, st.Args, exe)
	}
	return nil
}

func (w *world) stepNoSecrets(ctx context.Context, agent string) error {
	if _, err := w.lastSession(ctx, agent); err != nil {
		return err
	}
	for _, s := range w.ctl.Sessions(agent) {
		where := map[string]string{
			"environment": strings.Join(s.Env, "\n"),
			"arguments":   strings.Join(s.Argv, " "),
			"session/new": mustJSON(struct {
				Cwd string
				M   []acp.McpServer
			}{s.Cwd, s.McpServers}),
		}
		for place, text := range where {
			for _, secret := range w.secrets() {
				if secret != "" && strings.Contains(text, secret) {
					return fmt.Errorf("a token (%s…) appears in %s's %s", secret[:min(6, len(secret))], agent, place)
				}
			}
		}
	}
	return w.bindingsOffArgv(ctx, agent)
}

func (w *world) stepSeesTools(ctx context.Context, agent, list string) error {
	got, err := w.lastToolList(ctx, agent)
	if err != nil {
		return err
	}
	want := bareList(list)
	g, wn := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(wn)
	if !slices.Equal(g, wn) {
		return fmt.Errorf("%s sees tools %v, want exactly %v", agent, g, wn)
	}
	return nil
}

func (w *world) stepNotSeesTool(ctx context.Context, agent, tool string) error {
	got, err := w.lastToolList(ctx, agent)
	if err != nil {
		return err
	}
	if slices.Contains(got, tool) {
		return fmt.Errorf("%s sees %s among %v", agent, tool, got)
	}
	return nil
}

func (w *world) stepWokenWith(ctx context.Context, agent, n, s string) error {
	t, err := w.task(s)
	if err != nil {
		return err
	}
	want := times(strings.TrimPrefix(n, "woken "))
	if n == "never woken" {
		want = 0
		// Never is only news once the task has ended.
		if _, err := w.resultOf(ctx, t); err != nil {
			return err
		}
	}
	return w.countPrompts(ctx, agent, string(t.thread), want)
}

func (w *world) stepPromptedWithHeader(ctx context.Context, agent, s, caller string) error {
	t, err := w.task(s)
	if err != nil {
		return err
	}
	if t.agent != agent || t.caller != caller {
		return fmt.Errorf("%s is not a task %s delegated to %s", t, caller, agent)
	}
	if err := w.countPrompts(ctx, agent, t.prompt, 1); err != nil {
		return err
	}
	p, _ := w.promptWith(agent, t.prompt)
	for _, q := range w.ctl.Prompts(agent) {
		if q.SessionID == p.SessionID {
			if q.Text != p.Text {
				return fmt.Errorf("%s's session for %s began with %q, not the task; %s", agent, t, q.Text, w.promptsSeen(agent))
			}
			break
		}
	}
	header, _, _ := strings.Cut(p.Text, t.prompt)
	for _, want := range []string{caller, "assignee", "zooid_complete_task", "mention"} {
		if !strings.Contains(header, want) {
			return fmt.Errorf("the header of %s's prompt lacks %q: %q", agent, want, p.Text)
		}
	}
	return nil
}

func (w *world) stepWokenPerTask(ctx context.Context, agent string) error {
	w.syncTasks()
	var mine []*taskRef
	for _, t := range w.tw().tasks {
		if t.caller == agent && t.notify == "caller" {
			mine = append(mine, t)
		}
	}
	if len(mine) == 0 {
		return fmt.Errorf("%s has delegated no task with notify caller", agent)
	}
	for _, t := range mine {
		if err := w.waitPrompted(ctx, agent, string(t.thread)); err != nil {
			return err
		}
	}
	if err := w.barrier(ctx, agent); err != nil {
		return err
	}
	// The order the tasks ended: their results in the room's timeline.
	r, err := w.taskRoom(ctx, mine[0])
	if err != nil {
		return err
	}
	msgs, err := w.readRaw(ctx, r)
	if err != nil {
		return err
	}
	var ended []id.EventID
	for _, m := range threadResults(msgs) {
		for _, t := range mine {
			if m.thread == t.thread {
				ended = append(ended, t.thread)
			}
		}
	}
	var woken []id.EventID
	for _, p := range w.ctl.Prompts(agent) {
		for _, t := range mine {
			if !strings.Contains(p.Text, string(t.thread)) {
				continue
			}
			if p.SessionID != t.session {
				return fmt.Errorf("the result of %s reached %s in session %s, not %s that delegated it; %s", t, agent, string(p.SessionID), string(t.session), w.promptsSeen(agent))
			}
			woken = append(woken, t.thread)
		}
	}
	if len(woken) != len(mine) || fmt.Sprint(woken) != fmt.Sprint(ended) {
		return fmt.Errorf("%s was woken with results %v, want each of %d tasks once in the order they ended %v; %s", agent, woken, len(mine), ended, w.promptsSeen(agent))
	}
	return nil
}

func (w *world) stepWokenAfterTurn(ctx context.Context, agent, s, closing string) error {
	t, err := w.task(s)
	if err != nil {
		return err
	}
	found, err := w.resultOf(ctx, t)
	if err != nil {
		return err
	}
	if err := w.waitPrompted(ctx, agent, string(t.thread)); err != nil {
		return err
	}
	wake, _ := w.promptWith(agent, string(t.thread))
	r, err := w.taskRoom(ctx, t)
	if err != nil {
		return err
	}
	uid, err := w.userID(agent)
	if err != nil {
		return err
	}
	// The closing message may reach a reader's /messages a moment after the
	// wake (a server with delayed visibility): wait for it, not read once.
	var closed time.Time
	err = w.eventually(ctx, fmt.Sprintf("%s's closing message %q", agent, closing), func() (bool, string, error) {
		msgs, err := w.readRaw(ctx, r)
		if err != nil {
			return false, "", err
		}
		for _, m := range msgs {
			if body, _ := m.content["body"].(string); m.ev.Sender == uid && body == closing {
				closed = time.UnixMilli(m.ev.Timestamp)
			}
		}
		return !closed.IsZero(), fmt.Sprintf("%d events, none of them it", len(msgs)), nil
	})
	if err != nil {
		return fmt.Errorf("%s never posted %q: %w", agent, closing, err)
	}
	result := time.UnixMilli(found[0].ev.Timestamp)
	switch {
	case !result.Before(closed):
		return fmt.Errorf("the result of %s was posted at %s, not while %s's turn ran (it closed at %s); the scenario proves nothing", t, result.Format(time.StampMilli), agent, closed.Format(time.StampMilli))
	case wake.At.Before(closed):
		return fmt.Errorf("%s was woken with the result of %s at %s, before its turn closed at %s", agent, t, wake.At.Format(time.StampMilli), closed.Format(time.StampMilli))
	}
	return nil
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

func (w *world) stepNoMCP(ctx context.Context, agent string) error {
	ss, err := w.ctl.WaitSessions(ctx, agent, 1)
	if err != nil {
		return fmt.Errorf("%s never got a session/new: %w", agent, err)
	}
	if got := ss[len(ss)-1].McpServers; len(got) != 0 {
		return fmt.Errorf("%s's session/new carried %d MCP servers: %v", agent, len(got), got)
	}
	return nil
}

func (w *world) stepModelReadResult(ctx context.Context, agent, tool, js string) error {
	want, err := w.toolArgs(agent, js)
	if err != nil {
		return err
	}
	return w.modelResult(ctx, agent, tool, fmt.Sprintf("the result of %s with %s", tool, js), func(_ modeldouble.API, res modeldouble.ToolResult) (bool, string) {
		if res.IsError {
			return false, fmt.Sprintf("an error: %q", res.Text)
		}
		got, ok := resultObject(res.Text)
		if !ok {
			return false, fmt.Sprintf("no JSON object in %q", res.Text)
		}
		for k, v := range want {
			if fmt.Sprint(got[k]) != fmt.Sprint(v) {
				return false, fmt.Sprintf("%s is %v, want %v, in %s", k, got[k], v, res.Text)
			}
		}
		return true, ""
	})
}

func (w *world) stepModelReadError(ctx context.Context, agent, tool, text string) error {
	return w.modelResult(ctx, agent, tool, fmt.Sprintf("an error from %s containing %q", tool, text), func(api modeldouble.API, res modeldouble.ToolResult) (bool, string) {
		// OpenAI's function outputs carry no error mark: there the text alone
		// says it.
		if !res.IsError && api != modeldouble.OpenAI {
			return false, fmt.Sprintf("a result, not an error: %q", res.Text)
		}
		if !strings.Contains(res.Text, text) {
			return false, fmt.Sprintf("the error %q", res.Text)
		}
		return true, ""
	})
}

func (w *world) stepModelPrompted(ctx context.Context, agent, text string) error {
	if _, err := w.modelScript(agent); err != nil {
		return err
	}
	return w.eventually(ctx, fmt.Sprintf("%s's model prompted with %q", agent, text), func() (bool, string, error) {
		var seen []string
		for _, r := range w.model.Requests(agent) {
			if len(r.Tools) == 0 {
				continue
			}
			if strings.Contains(r.Prompt, text) {
				return true, "", nil
			}
			seen = append(seen, fmt.Sprintf("%q", r.Prompt))
		}
		return false, "prompts: " + strings.Join(slices.Compact(seen), ", "), nil
	})
}

func (w *world) stepNoFile(agent, name string) error {
	if _, err := w.agent(agent); err != nil {
		return err
	}
	p := filepath.Join(w.dir, "agents", agent, name)
	if _, err := os.Stat(p); err == nil {
		return fmt.Errorf("%s's working directory has %s", agent, name)
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

func (w *world) stepModelOffered(ctx context.Context, agent, list string) error {
	if _, err := w.modelScript(agent); err != nil {
		return err
	}
	want := bareList(list)
	slices.Sort(want)
	return w.eventually(ctx, fmt.Sprintf("%s's model offered exactly %s", agent, strings.Join(want, ", ")), func() (bool, string, error) {
		var last *modeldouble.Request
		for _, r := range w.model.Requests(agent) {
			if len(r.Tools) > 0 {
				last = &r
			}
		}
		if last == nil {
			return false, "no turn request yet", nil
		}
		var got []string
		for _, t := range last.Tools {
			name, ok := zooidToolName(t.Name)
			if !ok {
				continue
			}
			if len(t.Schema) == 0 {
				return false, "", fmt.Errorf("%s was offered %s without an input schema", agent, t.Name)
			}
			got = append(got, name)
		}
		slices.Sort(got)
		if slices.Equal(got, want) {
			return true, "", nil
		}
		return false, "offered " + strings.Join(got, ", "), nil
	})
}

// handoffReturnMark is how the daemon starts a handoff's return prompt.
func handoffReturnMark(callee string) string { return "[handoff return] from " + callee }

func (w *world) stepHandoffReturn(ctx context.Context, agent, callee, inSession, text string) error {
	mark := handoffReturnMark(callee)
	if err := w.stepPrompted(ctx, agent, mark); err != nil {
		return err
	}
	// The return is queued on the caller's own session: a barrier in that
	// thread is prompted only after every return queued there before it.
	if err := w.threadBarrier(ctx, agent); err != nil {
		return err
	}
	if err := w.countPrompts(ctx, agent, mark, 1); err != nil {
		return err
	}
	p, _ := w.promptWith(agent, mark)
	if !strings.Contains(p.Text, text) {
		return fmt.Errorf("%s's handoff return from %s is %q, which lacks %q", agent, callee, p.Text, text)
	}
	if inSession == "" {
		return nil
	}
	f := w.focus[agent]
	if f == nil {
		return fmt.Errorf("%s answers no thread, so no session handed off", agent)
	}
	root := w.rootPost(f)
	first, ok := w.promptWith(agent, root.core)
	if !ok {
		return fmt.Errorf("%s was never prompted with %q; %s", agent, root.core, w.promptsSeen(agent))
	}
	if p.SessionID != first.SessionID {
		return fmt.Errorf("%s got its handoff return in session %s, not %s that answered %q; %s", agent, string(p.SessionID), string(first.SessionID), root.core, w.promptsSeen(agent))
	}
	return nil
}

func (w *world) stepHandoffReturnAfter(ctx context.Context, agent, callee, closer, closing string) error {
	mark := handoffReturnMark(callee)
	if err := w.stepPrompted(ctx, agent, mark); err != nil {
		return err
	}
	wake, _ := w.promptWith(agent, mark)
	f := w.focus[agent]
	if f == nil {
		return fmt.Errorf("%s answers no thread, so none to read", agent)
	}
	uid, err := w.userID(closer)
	if err != nil {
		return err
	}
	var closed time.Time
	err = w.eventually(ctx, fmt.Sprintf("%s's closing message %q", closer, closing), func() (bool, string, error) {
		msgs, err := w.readRaw(ctx, f.room)
		if err != nil {
			return false, "", err
		}
		for _, m := range msgs {
			if body, _ := m.content["body"].(string); m.ev.Sender == uid && body == closing {
				closed = time.UnixMilli(m.ev.Timestamp)
			}
		}
		return !closed.IsZero(), fmt.Sprintf("%d events, none of them it", len(msgs)), nil
	})
	if err != nil {
		return fmt.Errorf("%s never posted %q: %w", closer, closing, err)
	}
	if wake.At.Before(closed) {
		return fmt.Errorf("%s got the handoff return from %s at %s, before %s's turn closed at %s", agent, callee, wake.At.Format(time.StampMilli), closer, closed.Format(time.StampMilli))
	}
	return nil
}

// threadBarrier is barrier in the agent's current thread: a mention there is
// queued on the same session as what the daemon queued there before it.
func (w *world) threadBarrier(ctx context.Context, agent string) error {
	f := w.focus[agent]
	if f == nil {
		return fmt.Errorf("%s answers no thread, so no thread to put a barrier in", agent)
	}
	thread := w.thread
	defer func() { w.thread, w.focus[agent] = thread, f }()
	w.stepSeq++
	p, err := w.say(ctx, w.humanSeq[0], f.room.name, fmt.Sprintf("@%s %s %d", agent, barrierMarker, w.stepSeq), f.root, true)
	if err != nil {
		return err
	}
	if err := w.waitPrompted(ctx, agent, p.core); err != nil {
		return err
	}
	// Its answer replies to it in the thread (no relation /relations lists,
	// which settleBarriers reads): wait for it here, so no later kill cuts
	// a turn the scenario never asked for.
	// Its daemon's user (@workstation.name when it has one), so an agent of
	// either daemon of a several-daemons scenario is found.
	uid := w.agentUser(agent)
	return w.eventually(ctx, fmt.Sprintf("%s answers the barrier %q in its thread", agent, p.core), func() (bool, string, error) {
		msgs, err := w.readRaw(ctx, f.room)
		if err != nil {
			return false, "", err
		}
		for _, m := range msgs {
			rel, _ := m.content["m.relates_to"].(map[string]any)
			reply, _ := rel["m.in_reply_to"].(map[string]any)
			if m.ev.Sender == uid && m.thread == f.root && reply["event_id"] == string(p.id) {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d events, no answer", len(msgs)), nil
	})
}
