package steps

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/cucumber/godog"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/fakeagent"
	"github.com/zooid-dev/zooid/zooid/zevent"
)

// taskSteps is the vocabulary of task threads (behaviour §5). Tasks are named
// by a piece of their prompt; their thread roots become threads the shared
// steps can name too ("ori replies in the thread of "audit svc-a": …").
func taskSteps(w *world) []stepDef {
	return []stepDef{
		{area: "setup", pattern: `^the daemon runs as its own process$`,
			example: `the daemon runs as its own process`,
			doc:     "Starts the scenario with the daemon as a child process of this executable (same config; a 60s turn timeout so hung agents stay hung), so it can be killed outright.",
			fn:      w.stepDaemonProcess},
		{area: "setup", pattern: `^the daemon is (killed|stopped) and started again$`,
			example: `the daemon is killed and started again`,
			doc:     "SIGKILLs (killed) or SIGTERMs (stopped) the daemon's process group, agents included, and starts a new daemon on the same state dir, waiting until it is ready.",
			fn:      w.stepKillRestart},
		{area: "script", pattern: `^([a-z0-9-]+) will take a turn that:$`,
			example: `agent-a will take a turn that:`,
			doc:     "Queues one turn from a table of | says | text |, | calls | TOOL with {json} |, | waits | 1.5s |, | waits until | released | (a barrier: until the step \"AGENT's turn is released\"), | lists its tools |, | stops with | REASON |, | crashes |, | hangs | rows; it ends with end_turn unless a row ends it.",
			fn:      w.stepTurnTable},
		{area: "script", pattern: `^([a-z0-9-]+)'s turn is released$`,
			example: `planner's turn is released`,
			doc:     "Lets the agent's turns that wait until released go on (and any later ones: it stays released).",
			fn:      w.stepRelease},
		{area: "script", pattern: `^([a-z0-9-]+) will reply "([^"]*)" after (\d+(?:\.\d+)?) seconds?$`,
			example: `agent-b will reply "svc-a is clean" after 0.5 seconds`,
			doc:     "Queues a turn that waits (cancellably), then says the text and ends.",
			fn:      w.stepReplyAfter},
		{area: "results", pattern: `^([a-z0-9-]+) got a result from (zooid_[a-z_]+)$`,
			example: `agent-b got a result from zooid_complete_task`,
			doc:     "Waits for the next result of that tool in the agent's scripted turns and makes it the last call, for the result steps.",
			fn:      w.stepGotResult},
		{area: "results", pattern: `^tasks? ((?:\d+(?:, | and )?)+) (?:is|are) (started|refused|failed)(?: \(([a-z_]+)\))?$`,
			example: `task 6 is refused (at_capacity)`,
			doc:     "Entries (1-based) of the last zooid_start_task_threads result: started with a thread_id, or refused/failed with that reason.",
			fn:      w.stepTaskStatus},
		{area: "posts", pattern: `^([a-z0-9-]+) has started (\d+) task threads? in "(#[a-z0-9-]+)"$`,
			example: `agent-a has started 5 task threads in "#ops"`,
			doc:     "Exactly that many top-level messages from the agent carry dev.zooid.thread_start; each is a started task's thread_id, mentions its assignee and names the version, assignee, attempt id, parent and notify; they appear in the order the calls listed them.",
			fn:      w.stepStartedThreads},
		{area: "posts", pattern: `^the task "([^"]+)" ends (complete|partial|failed|cancelled)(?: \(([a-z_]+)\))?(?: with "([^"]*)")?$`,
			example: `the task "audit svc-a" ends complete with "svc-a is clean"`,
			doc:     "Waits for the task's dev.zooid.thread_result in its thread; there is exactly one, with this status, reason and output (none given: not checked).",
			fn:      w.stepTaskEnds},
		{area: "posts", pattern: `^([a-z0-9-]+)'s thread gets a notice with the result of "([^"]+)"$`,
			example: `agent-a's thread gets a notice with the result of "audit svc-a"`,
			doc:     "Waits for exactly one m.notice in the thread the agent delegated from, carrying the task's dev.zooid.thread_result.",
			fn:      w.stepResultNotice},
		{area: "posts", pattern: `^no notice carries the result of "([^"]+)"$`,
			example: `no notice carries the result of "audit svc-a"`,
			doc:     "No message of the task's room carries dev.zooid.thread_result for it (checked now).",
			fn:      w.stepNoResultNotice},
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
	}
}

func (w *world) stepDaemonProcess(ctx context.Context) error {
	return w.startAsProcess(ctx)
}

func (w *world) stepKillRestart(ctx context.Context, how string) error {
	p := w.tw().proc
	if p == nil {
		return fmt.Errorf("the daemon runs in-process; declare \"the daemon runs as its own process\" before the first action")
	}
	// The harness's own barrier turns end before the kill: only the
	// scenario's turns may be cut by it.
	if err := w.settleBarriers(ctx); err != nil {
		return err
	}
	sig := syscall.SIGKILL
	if how == "stopped" {
		sig = syscall.SIGTERM
	}
	if err := p.Stop(sig); err != nil {
		return err
	}
	return w.spawnDaemon(ctx)
}

func (w *world) stepTurnTable(ctx context.Context, agent string, table *godog.Table) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	var turn fakeagent.Turn
	ended := false
	for i, row := range table.Rows {
		if ended {
			return fmt.Errorf("row %d: nothing can follow a row that ends the turn", i+1)
		}
		cells := make([]string, len(row.Cells))
		for k, c := range row.Cells {
			cells[k] = strings.TrimSpace(c.Value)
		}
		arg := ""
		if len(cells) > 1 {
			arg = cells[1]
		}
		switch cells[0] {
		case "says":
			turn = append(turn, fakeagent.Say(arg))
		case "calls":
			tool, js, _ := strings.Cut(arg, " with ")
			args, err := w.toolArgs(agent, js)
			if err != nil {
				return fmt.Errorf("row %d: %w", i+1, err)
			}
			turn = append(turn, fakeagent.CallTool(strings.TrimSpace(tool), args))
		case "waits":
			d, err := time.ParseDuration(arg)
			if err != nil {
				return fmt.Errorf("row %d: waits %q: %w", i+1, arg, err)
			}
			turn = append(turn, fakeagent.Wait(d))
		case "waits until":
			if arg != "released" {
				return fmt.Errorf("row %d: waits until %q: the one barrier is | waits until | released |", i+1, arg)
			}
			turn = append(turn, fakeagent.WaitUntilReleased())
		case "lists its tools":
			turn = append(turn, fakeagent.ListTools())
		case "stops with":
			turn, ended = append(turn, fakeagent.Stop(acp.StopReason(arg))), true
		case "crashes":
			turn, ended = append(turn, fakeagent.Crash()), true
		case "hangs":
			turn, ended = append(turn, fakeagent.Hang()), true
		default:
			return fmt.Errorf("row %d: unknown action %q; want says, calls, waits, waits until, lists its tools, stops with, crashes or hangs", i+1, cells[0])
		}
	}
	if !ended {
		turn = append(turn, fakeagent.Stop(acp.StopReasonEndTurn))
	}
	return w.queue(agent, turn)
}

func (w *world) stepReplyAfter(agent, text, secs string) error {
	f, err := strconv.ParseFloat(secs, 64)
	if err != nil {
		return fmt.Errorf("seconds %q: %w", secs, err)
	}
	d := time.Duration(f * float64(time.Second))
	return w.queue(agent, fakeagent.Turn{fakeagent.Wait(d), fakeagent.Say(text), fakeagent.Stop(acp.StopReasonEndTurn)})
}

// stepGotResult adopts the agent's next result of tool from its scripted
// turns (the ones "will …" queued) as the last call.
func (w *world) stepGotResult(ctx context.Context, agent, tool string) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	if _, err := w.agent(agent); err != nil {
		return err
	}
	tw := w.tw()
	key := agent + "\x00" + tool
	want := tw.adopted[key] + 1
	var res fakeagent.ToolResult
	err := w.eventually(ctx, fmt.Sprintf("%s gets result %d of %s", agent, want, tool), func() (bool, string, error) {
		n := 0
		var seen []string
		for _, r := range w.ctl.ToolResults(agent) {
			seen = append(seen, r.Tool)
			if r.Tool == tool {
				n++
				if n == want {
					res = r
					return true, "", nil
				}
			}
		}
		return false, fmt.Sprintf("tool results %v; %s; MCP errors %v", seen, w.promptsSeen(agent), w.ctl.MCPErrors(agent)), nil
	})
	if err != nil {
		return err
	}
	tw.adopted[key] = want
	c := &call{agent: agent, tool: tool, args: res.Args, res: res}
	var body map[string]any
	if json.Unmarshal([]byte(res.Text), &body) == nil {
		c.body = body
	}
	w.calls[agent] = append(w.calls[agent], c)
	w.last = c
	w.syncTasks()
	return nil
}

func (w *world) stepTaskStatus(list, status, reason string) error {
	c, err := w.okCall()
	if err != nil {
		return err
	}
	if c.tool != "zooid_start_task_threads" {
		return fmt.Errorf("the last call was %s, not zooid_start_task_threads", c.tool)
	}
	results, _ := c.body["results"].([]any)
	for _, s := range bareList(list) {
		n, _ := strconv.Atoi(s)
		if n < 1 || n > len(results) {
			return fmt.Errorf("task %d: the result has %d entries: %s", n, len(results), c)
		}
		r, _ := results[n-1].(map[string]any)
		tid, _ := r["thread_id"].(string)
		got, _ := r["status"].(string)
		gotReason, _ := r["reason"].(string)
		switch {
		case got != status:
			return fmt.Errorf("task %d is %s (%s), want %s: %s", n, got, gotReason, status, c)
		case status == "started" && tid == "":
			return fmt.Errorf("task %d is started without a thread_id: %s", n, c)
		case status != "started" && gotReason != reason && reason != "":
			return fmt.Errorf("task %d is %s with reason %q, want %q: %s", n, got, gotReason, reason, c)
		case status != "started" && (tid != "" || gotReason == ""):
			return fmt.Errorf("task %d is %s but has thread_id %q and reason %q: %s", n, got, tid, gotReason, c)
		}
	}
	return nil
}

func (w *world) stepStartedThreads(ctx context.Context, caller string, n int, roomName string) error {
	w.syncTasks()
	r, err := w.room(ctx, roomName)
	if err != nil {
		return err
	}
	uid, err := w.userID(caller)
	if err != nil {
		return err
	}
	mine := map[id.EventID]*taskRef{}
	for _, t := range w.tw().tasks {
		if t.caller == caller {
			mine[t.thread] = t
		}
	}
	var roots []rawMsg
	err = w.eventually(ctx, fmt.Sprintf("%s's %d task roots in %s", caller, n, roomName), func() (bool, string, error) {
		msgs, err := w.readRaw(ctx, r)
		if err != nil {
			return false, "", err
		}
		roots = roots[:0]
		for _, m := range msgs {
			if _, ok := m.content[zevent.KeyThreadStart]; ok && m.ev.Sender == uid {
				roots = append(roots, m)
			}
		}
		return len(roots) >= n, fmt.Sprintf("%d task roots", len(roots)), nil
	})
	if err != nil {
		return err
	}
	if len(roots) != n {
		return fmt.Errorf("%s posted %d task roots in %s, want %d", caller, len(roots), roomName, n)
	}
	for _, m := range roots {
		t, ok := mine[m.ev.ID]
		if !ok {
			return fmt.Errorf("task root %s is no started task's thread_id; tasks: %v", m.ev.ID, w.tw().tasks)
		}
		if m.thread != "" {
			return fmt.Errorf("%s's root is in thread %s, want top-level", t, m.thread)
		}
		var ts zevent.ThreadStart
		raw, _ := json.Marshal(m.content[zevent.KeyThreadStart])
		if err := json.Unmarshal(raw, &ts); err != nil {
			return fmt.Errorf("%s: dev.zooid.thread_start %s: %w", t, raw, err)
		}
		switch {
		case ts.Version < 1 || ts.AttemptID == "" || ts.Parent.SessionKey == "":
			return fmt.Errorf("%s: dev.zooid.thread_start lacks version, attempt_id or parent.session_key: %s", t, raw)
		case ts.Assignee != t.agent || ts.Parent.Agent != caller || ts.Notify != t.notify:
			return fmt.Errorf("%s: dev.zooid.thread_start says assignee %q, parent %q, notify %q: %s", t, ts.Assignee, ts.Parent.Agent, ts.Notify, raw)
		case t.origin != nil && ts.Parent.ThreadRoot != t.origin.root:
			return fmt.Errorf("%s: parent.thread_root is %q, want the caller's thread %s", t, ts.Parent.ThreadRoot, t.origin.root)
		}
		assignee, err := w.userID(t.agent)
		if err != nil {
			return err
		}
		body, _ := m.content["body"].(string)
		mentions, _ := m.content["m.mentions"].(map[string]any)
		ids, _ := mentions["user_ids"].([]any)
		if !strings.Contains(body, t.prompt) || len(ids) != 1 || ids[0] != string(assignee) {
			return fmt.Errorf("%s: the root says %q mentioning %v, want the prompt mentioning %s", t, body, ids, assignee)
		}
		t.room = r
		if _, err := w.taskRoom(ctx, t); err != nil {
			return err
		}
	}
	// The room shows them in the order the caller listed them.
	var got, want []string
	for _, m := range roots {
		got = append(got, mine[m.ev.ID].prompt)
	}
	for _, t := range w.tw().tasks {
		if t.caller == caller && slices.ContainsFunc(roots, func(m rawMsg) bool { return m.ev.ID == t.thread }) {
			want = append(want, t.prompt)
		}
	}
	if !slices.Equal(got, want) {
		return fmt.Errorf("%s's task roots appear in %s as %q, want the order listed %q", caller, roomName, got, want)
	}
	return nil
}

// resultOf waits for the task's dev.zooid.thread_result events.
func (w *world) resultOf(ctx context.Context, t *taskRef) ([]rawMsg, error) {
	r, err := w.taskRoom(ctx, t)
	if err != nil {
		return nil, err
	}
	var found []rawMsg
	err = w.eventually(ctx, fmt.Sprintf("the result of %s", t), func() (bool, string, error) {
		msgs, err := w.readRaw(ctx, r)
		if err != nil {
			return false, "", err
		}
		found = found[:0]
		var seen []string
		for _, m := range threadResults(msgs) {
			seen = append(seen, mustJSON(m.content))
			if m.thread == t.thread {
				found = append(found, m)
			}
		}
		return len(found) > 0, fmt.Sprintf("results in %s: %v", r.name, seen), nil
	})
	return found, err
}

func (w *world) stepTaskEnds(ctx context.Context, s, status, reason, output string) error {
	t, err := w.task(s)
	if err != nil {
		return err
	}
	found, err := w.resultOf(ctx, t)
	if err != nil {
		return err
	}
	if len(found) != 1 {
		return fmt.Errorf("%s has %d thread results, want exactly one", t, len(found))
	}
	c := found[0].content
	got := func(k string) string { v, _ := c[k].(string); return v }
	switch {
	case got("status") != status:
		return fmt.Errorf("%s ended %q, want %q: %s", t, got("status"), status, mustJSON(c))
	case reason != "" && got("reason") != reason:
		return fmt.Errorf("%s ended with reason %q, want %q: %s", t, got("reason"), reason, mustJSON(c))
	case output != "" && got("output") != output:
		return fmt.Errorf("%s ended with output %q, want %q: %s", t, got("output"), output, mustJSON(c))
	case got("agent") != t.agent || got("thread_id") != string(t.thread):
		return fmt.Errorf("%s: the result names agent %q and thread %q: %s", t, got("agent"), got("thread_id"), mustJSON(c))
	}
	return nil
}

// resultNotices are the messages of msgs carrying t's result in their content.
func resultNotices(msgs []rawMsg, t *taskRef) []rawMsg {
	var out []rawMsg
	for _, m := range msgs {
		if m.ev.Type.Type != "m.room.message" {
			continue
		}
		r, ok := m.content[zevent.KeyThreadResult].(map[string]any)
		if ok && r["thread_id"] == string(t.thread) {
			out = append(out, m)
		}
	}
	return out
}

func (w *world) stepResultNotice(ctx context.Context, caller, s string) error {
	t, err := w.task(s)
	if err != nil {
		return err
	}
	if t.caller != caller {
		return fmt.Errorf("%s was delegated by %s, not %s", t, t.caller, caller)
	}
	if t.origin == nil {
		return fmt.Errorf("the harness does not know which thread %s delegated %s from", caller, t)
	}
	r, err := w.taskRoom(ctx, t)
	if err != nil {
		return err
	}
	var found []rawMsg
	err = w.eventually(ctx, fmt.Sprintf("a notice with the result of %s", t), func() (bool, string, error) {
		msgs, err := w.readRaw(ctx, r)
		if err != nil {
			return false, "", err
		}
		found = resultNotices(msgs, t)
		return len(found) > 0, "no such notice", nil
	})
	if err != nil {
		return err
	}
	if len(found) != 1 {
		return fmt.Errorf("%d notices carry the result of %s, want one", len(found), t)
	}
	m := found[0]
	if mt, _ := m.content["msgtype"].(string); mt != "m.notice" || m.thread != t.origin.root {
		return fmt.Errorf("the result of %s is a %q in thread %q, want an m.notice in %s's thread %s", t, mt, m.thread, caller, t.origin.root)
	}
	return nil
}

func (w *world) stepNoResultNotice(ctx context.Context, s string) error {
	t, err := w.task(s)
	if err != nil {
		return err
	}
	r, err := w.taskRoom(ctx, t)
	if err != nil {
		return err
	}
	msgs, err := w.readRaw(ctx, r)
	if err != nil {
		return err
	}
	if found := resultNotices(msgs, t); len(found) > 0 {
		return fmt.Errorf("%d messages carry the result of %s: %s", len(found), t, mustJSON(found[0].content))
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

func (w *world) stepRelease(agent string) error {
	if _, err := w.agent(agent); err != nil {
		return err
	}
	w.ctl.Release(agent)
	return nil
}
