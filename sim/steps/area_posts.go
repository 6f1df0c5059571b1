package steps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/daemon"
	"github.com/zooid-dev/zooid/zooid/zevent"
)

// The catalogue's "What was posted" steps (area posts) and the step methods
// they run.

func postSteps(w *world) []stepDef {
	return []stepDef{
		{area: "posts", pattern: `^([a-z0-9-]+) posts "([^"]*)" in the thread$`,
			example: `agent-a posts "on it" in the thread`,
			doc:     "Waits for exactly one m.notice with that body from the agent, in the current thread.",
			fn:      w.stepPostsInThread},
		{area: "posts", pattern: `^([a-z0-9-]+) posts "([^"]*)" in the thread of "([^"]+)"$`,
			example: `agent-a posts "done" in the thread of "audit svc-a"`,
			doc:     "Waits for exactly one m.notice with that body from the agent, in the thread whose root contains the quoted text.",
			fn:      w.stepPostsInThreadOf},
		{area: "posts", pattern: `^([a-z0-9-]+) posts "([^"]*)" top-level in "(#[a-z0-9-]+)"$`,
			example: `agent-a posts "status: green" top-level in "#dev"`,
			doc:     "Waits for exactly one m.notice with that body from the agent outside any thread of the room.",
			fn:      w.stepPostsTopLevel},
		{area: "posts", pattern: `^([a-z0-9-]+) posts an error "([a-z_]+)" in the thread$`,
			example: `agent-a posts an error "agent_crashed" in the thread`,
			doc:     "After a barrier, exactly one dev.zooid.error event from the agent in the current thread, with that code and the agent's name, beside exactly one \"⚠ …\" m.notice.",
			fn:      w.stepErrorPosted},
		{area: "posts", pattern: `^([a-z0-9-]+)'s thread has exactly one handoff to ([a-z0-9-]+): "([^"]*)"$`,
			example: `planner's thread has exactly one handoff to coder: "check the certificates"`,
			doc:     "Waits for the agent's m.notice in its current thread that carries dev.zooid.handoff naming it and the callee, mentions the callee and holds the prompt; checks there is exactly one.",
			fn:      w.stepOneHandoff},
		{area: "posts", pattern: `^([a-z0-9-]+)'s thread has exactly one handoff return from ([a-z0-9-]+)$`,
			example: `architect's thread has exactly one handoff return from builder`,
			doc:     "For a handoff to another daemon's agent: after a barrier in the callee's thread (its daemon's intake is open, so a return owed at its start is posted), exactly one m.notice by the callee in the caller's current thread carries dev.zooid.handoff_return for the caller.",
			fn:      w.stepOneHandoffReturn},
		{area: "posts", pattern: `^([a-z0-9-]+)'s thread gets a handoff return from ([a-z0-9-]+)$`,
			example: `architect's thread gets a handoff return from builder`,
			doc:     "For a handoff to another daemon's agent: waits for the callee's m.notice in the caller's current thread carrying dev.zooid.handoff_return for the caller (e.g. a late one, posted after the caller's daemon gave up on it).",
			fn:      w.stepHandoffReturnPosted},
		{area: "posts", pattern: `^what ([a-z0-9-]+) posted in "(#[a-z0-9-]+)" went encrypted$`,
			example: `what agent-a posted in "#ops" went encrypted`,
			doc:     "After a barrier, the agent's events in the room as the homeserver holds them: at least one m.room.encrypted and not one m.room.message in the clear.",
			fn:      w.stepPostedEncrypted},
		{area: "posts", pattern: `^([a-z0-9-]+) has posted nothing containing "([^"]*)"$`,
			example: `agent-a has posted nothing containing "sneaky"`,
			doc:     "No message from the agent in any room of the scenario contains the text (checked now).",
			fn:      w.stepPostedNothing},

		// Task threads (behaviour §5). Tasks are named by a piece of their prompt;
		// their thread roots become threads the shared steps can name too ("ori
		// replies in the thread of "audit svc-a": …").
		{area: "posts", pattern: `^([a-z0-9-]+) has started (\d+) task threads? in "(#[a-z0-9-]+)"$`,
			example: `agent-a has started 5 task threads in "#ops"`,
			doc:     "Exactly that many top-level messages from the agent carry dev.zooid.thread_start; each is a started task's thread_id, mentions its assignee and names the version, assignee, attempt id, parent and notify; they appear in the order the calls listed them.",
			fn:      w.stepStartedThreads},
		{area: "posts", pattern: `^the task "([^"]+)" ends (complete|partial|failed|cancelled|timed_out)(?: \(([a-z_]+)\))?(?: with "([^"]*)")?$`,
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

		// The process caps: max_processes per agent and per daemon,
		// sessions_per_process, queue_notice_after.
		{area: "posts", pattern: `^the thread of "([^"]+)" gets "([^"]*)" from ([a-z0-9-]+)$`,
			example: `the thread of "audit svc-c" gets "ok" from agent-b`,
			doc:     "Waits until the agent's m.notice with that body is in the thread, without a barrier (which would queue behind held turns); count it later with a posts step.",
			fn:      w.stepThreadGets},
		{area: "posts", pattern: `^each of those threads gets (exactly one )?"([^"]*)" from ([a-z0-9-]+)$`,
			example: `each of those threads gets exactly one "ok" from agent-a`,
			doc:     "Waits until every thread of the last \"mentions … in N new threads\" step has the agent's m.notice with that body; with \"exactly one\", after a barrier, each has it once.",
			fn:      w.stepEachThreadGets},

		// Agents reached over the plain HTTP transport (behaviour §7).
		{area: "posts", pattern: `^every HTTP answer streams "([^"]*)" and ends with (end_turn|cancelled|max_tokens|refusal)$`,
			example: `every HTTP answer streams "ok" and ends with end_turn`,
			doc:     "Waits for every answer of the last \"asked over HTTP N times at once\" step and checks each as the single-answer step does.",
			fn:      w.stepEveryHTTPAnswer},
		{area: "posts", pattern: `^the HTTP answer streams "([^"]*)" and ends with (end_turn|cancelled|max_tokens|refusal)$`,
			example: `the HTTP answer streams "build is green" and ends with end_turn`,
			doc:     "The last HTTP answer's chunk events join to the text, and its done event carries the stop reason.",
			fn:      w.stepHTTPAnswer},

		// Long messages, cut and posted whole.
		{area: "posts", pattern: `^([a-z0-9-]+)'s long reply arrives in the thread as (\d+) notices$`,
			example: `agent-a's long reply arrives in the thread as 4 notices`,
			doc:     "After a barrier, the agent's notices in the current thread are exactly that many; each holds at most zevent.MaxBodyBytes, and in order, joined by the paragraph breaks they were cut at, they are the queued text.",
			fn:      w.stepLongReplyArrives},
		{area: "posts", pattern: `^([a-z0-9-]+) posts the (\d+) bytes of prose whole top-level in "(#[a-z0-9-]+)"$`,
			example: `agent-a posts the 49152 bytes of prose whole top-level in "#ops"`,
			doc:     "Waits for exactly one m.notice from the agent outside any thread whose body is that long text, whole.",
			fn:      w.stepPostsProseWhole},

		// The fake homeserver's misbehaviour beyond a plain error answer (the
		// "homeserver answers" step), and how the daemon retried.
		{area: "posts", pattern: `^the task "([^"]+)" has exactly one root in "(#[a-z0-9-]+)"$`,
			example: `the task "audit svc-a" has exactly one root in "#ops"`,
			doc:     "Waits until a top-level message of the room from the task's caller carries dev.zooid.thread_start for its assignee with its prompt, and checks it is the only one; it becomes the task's thread (for a task whose start result never came back; said again later, it checks the root is still the one).",
			fn:      w.stepOneRoot},
		{area: "posts", pattern: `^([a-z0-9-]+)'s flood arrives in the thread cut to what one turn may post, with a notice$`,
			example: `agent-a's flood arrives in the thread cut to what one turn may post, with a notice`,
			doc:     "After a barrier, the agent's notices in the current thread are exactly the flood's first daemon.MaxTurnProse bytes (cut on a rune) as zevent.SplitBody parts, then one notice saying how many bytes were not posted.",
			fn:      w.stepFloodArrives},

		// A real agent's model, scripted, and what it started.
		{area: "posts", pattern: `^([a-z0-9-]+) has started a task for ([a-z0-9-]+): "([^"]+)"$`,
			example: `scout has started a task for worker: "check the svc-a logs"`,
			doc:     "Waits for a task root posted by the agent in one of its rooms, naming that assignee in dev.zooid.thread_start, whose body contains the text; task steps can name it by that text from then on.",
			fn:      w.stepStartedTask},
		{area: "posts", pattern: `^([a-z0-9-]+) posts a notice containing "([^"]*)" in the thread$`,
			example: `scout posts a notice containing "svc-a deploy failed" in the thread`,
			doc:     "Waits for exactly one m.notice from the agent in the current thread whose body contains the text.",
			fn:      w.stepPostsContaining},
	}
}

func (w *world) stepPostsInThread(ctx context.Context, agent, text string) error {
	if w.thread == nil {
		return fmt.Errorf("there is no current thread yet")
	}
	return w.waitPost(ctx, agent, w.thread.room, fmt.Sprintf("%q", text), w.thread.root, func(m seenMsg) bool { return m.body == text })
}

func (w *world) stepPostsInThreadOf(ctx context.Context, agent, text, rootText string) error {
	root, err := w.threadOf(rootText)
	if err != nil {
		return err
	}
	return w.waitPost(ctx, agent, root.room, fmt.Sprintf("%q", text), root.root, func(m seenMsg) bool { return m.body == text })
}

func (w *world) stepPostsTopLevel(ctx context.Context, agent, text, roomName string) error {
	r, err := w.room(ctx, roomName)
	if err != nil {
		return err
	}
	return w.waitPost(ctx, agent, r, fmt.Sprintf("%q", text), "", func(m seenMsg) bool { return m.body == text })
}

// stepErrorPosted checks a failure by its machine-readable code: the daemon
// posts a dev.zooid.error event (code, agent, thread) and a readable notice,
// and only the code tells a crash from a timeout.
func (w *world) stepErrorPosted(ctx context.Context, agent, code string) error {
	if w.thread == nil {
		return fmt.Errorf("there is no current thread yet")
	}
	if err := w.start(ctx); err != nil {
		return err
	}
	if _, err := w.agent(agent); err != nil {
		return err
	}
	r, root := w.thread.room, w.thread.root
	uid := w.agentUser(agent)
	var mine []errorEvent
	look := func() (bool, string, error) {
		all, err := w.readErrors(ctx, r)
		if err != nil {
			return false, "", err
		}
		mine = mine[:0]
		for _, e := range all {
			if e.sender == uid && e.thread == root {
				mine = append(mine, e)
			}
		}
		return len(mine) > 0, fmt.Sprintf("error events in %s: %v", r.name, all), nil
	}
	if err := w.eventually(ctx, fmt.Sprintf("%s posts a dev.zooid.error in the thread", agent), look); err != nil {
		return err
	}
	if err := w.barrier(ctx, agent); err != nil {
		return err
	}
	if _, _, err := look(); err != nil {
		return err
	}
	if len(mine) != 1 {
		return fmt.Errorf("%s posted %d dev.zooid.error events in the thread, want 1: %v", agent, len(mine), mine)
	}
	if e := mine[0]; e.code != code || e.agent != agent {
		return fmt.Errorf("%s's error event has code %q and agent %q, want %q and %q", agent, e.code, e.agent, code, agent)
	}
	// The readable notice beside it, for the humans in the thread.
	return w.waitPost(ctx, agent, r, "an error notice", root, func(m seenMsg) bool {
		return m.thread == root && strings.HasPrefix(m.body, "⚠ ")
	})
}

func (w *world) stepPostedNothing(ctx context.Context, agent, text string) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	for _, rn := range w.roomSeq {
		msgs, err := w.readRoom(ctx, w.rooms[rn], 3)
		if err != nil {
			return err
		}
		mine, _ := w.fromAgent(msgs, agent)
		for _, m := range mine {
			if strings.Contains(m.body, text) {
				return fmt.Errorf("%s posted %s in %s", agent, m, rn)
			}
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

func (w *world) stepEveryHTTPAnswer(ctx context.Context, text, stop string) error {
	if w.httpWait == nil {
		return fmt.Errorf("no step asked over HTTP several times at once")
	}
	all, err := w.httpWait(ctx)
	if err != nil {
		return err
	}
	for i, a := range all {
		if err := checkHTTPAnswer(a, text, stop); err != nil {
			return fmt.Errorf("answer %d of %d: %w", i+1, len(all), err)
		}
	}
	return nil
}

func (w *world) stepHTTPAnswer(text, stop string) error {
	if w.http == nil {
		return fmt.Errorf("nobody was asked over HTTP yet")
	}
	return checkHTTPAnswer(w.http, text, stop)
}

func (w *world) stepLongReplyArrives(ctx context.Context, agent, n string) error {
	want, _ := strconv.Atoi(n)
	text, ok := w.prose[agent]
	if !ok {
		return fmt.Errorf("%s was not given a long reply", agent)
	}
	if w.thread == nil {
		return fmt.Errorf("there is no current thread yet")
	}
	r, root := w.thread.room, w.thread.root
	var parts []seenMsg
	look := func() (bool, string, error) {
		msgs, err := w.readRoom(ctx, r, 3)
		if err != nil {
			return false, "", err
		}
		mine, seen := w.fromAgent(msgs, agent)
		parts = parts[:0]
		for _, m := range mine {
			if m.thread == root && m.msgtype == "m.notice" {
				parts = append(parts, m)
			}
		}
		return len(parts) >= want, seen, nil
	}
	if err := w.eventually(ctx, fmt.Sprintf("%s posts %d notices in the thread", agent, want), look); err != nil {
		return err
	}
	if err := w.barrier(ctx, agent); err != nil {
		return err
	}
	if _, _, err := look(); err != nil {
		return err
	}
	if len(parts) != want {
		return fmt.Errorf("%s posted %d notices in the thread, want %d", agent, len(parts), want)
	}
	slices.Reverse(parts) // readRoom is newest first
	bodies := make([]string, len(parts))
	for i, p := range parts {
		if size := zevent.BodySize(p.body); size > zevent.MaxBodyBytes {
			return fmt.Errorf("notice %d of %d holds %d bytes, over %d", i+1, want, size, zevent.MaxBodyBytes)
		}
		if !strings.HasPrefix(p.body, "long report, paragraph ") {
			return fmt.Errorf("notice %d of %d does not start at a paragraph: %.40q", i+1, want, p.body)
		}
		bodies[i] = p.body
	}
	if got := strings.Join(bodies, "\n\n"); got != text {
		return fmt.Errorf("the %d notices joined by paragraph breaks (%d bytes) are not the %d-byte reply", want, len(got), len(text))
	}
	return nil
}

func (w *world) stepPostsProseWhole(ctx context.Context, agent, n, roomName string) error {
	r, err := w.room(ctx, roomName)
	if err != nil {
		return err
	}
	k, _ := strconv.Atoi(n)
	text := longProse(k)
	return w.waitPost(ctx, agent, r, fmt.Sprintf("the %d bytes of prose", k), "", func(m seenMsg) bool { return m.body == text })
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
	caller, assignee := w.agentUser(t.caller), w.agentUser(t.agent)
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
	// 2 MB streamed through ACP in 32 KiB chunks, gathered and posted as
	// several events costs seconds of CPU under the race detector: on a
	// loaded runner more than one ordinary wait (it timed out at 10 s).
	if err := w.eventuallyWithin(ctx, 3*w.waitBound(), fmt.Sprintf("%s posts %d notices in the thread", agent, len(want)), look); err != nil {
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

// stepStartedTask finds a task a real agent's model started (the harness made
// no call itself, so it learns of the task from the room) and records it as
// task steps know tasks.
func (w *world) stepStartedTask(ctx context.Context, caller, assignee, prompt string) error {
	a, err := w.agent(caller)
	if err != nil {
		return err
	}
	if err := w.start(ctx); err != nil {
		return err
	}
	uid := w.agentUser(caller)
	var t *taskRef
	err = w.eventually(ctx, fmt.Sprintf("a task root from %s for %s with %q", caller, assignee, prompt), func() (bool, string, error) {
		var seen []string
		for _, rn := range a.rooms {
			r, err := w.room(ctx, rn)
			if err != nil {
				return false, "", err
			}
			msgs, err := w.readRaw(ctx, r)
			if err != nil {
				return false, "", err
			}
			for _, m := range msgs {
				ts, ok := zevent.ThreadStartOf(m.ev)
				if !ok || m.ev.Sender != uid {
					continue
				}
				body, _ := m.content["body"].(string)
				seen = append(seen, fmt.Sprintf("%s for %s: %q", r.name, ts.Assignee, body))
				if ts.Assignee != assignee || !strings.Contains(body, prompt) {
					continue
				}
				t = &taskRef{caller: caller, agent: assignee, prompt: prompt, notify: ts.Notify, thread: m.ev.ID, room: r}
				for _, p := range w.posts {
					if p.id == ts.Parent.ThreadRoot {
						t.origin = p
					}
				}
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("task roots from %s: %v", caller, seen), nil
	})
	if err != nil {
		return err
	}
	w.tw().tasks = append(w.tw().tasks, t)
	return nil
}

func (w *world) stepPostsContaining(ctx context.Context, agent, text string) error {
	if w.thread == nil {
		return fmt.Errorf("there is no current thread yet")
	}
	return w.waitPost(ctx, agent, w.thread.room, fmt.Sprintf("a notice containing %q", text), w.thread.root,
		func(m seenMsg) bool { return strings.Contains(m.body, text) })
}

func (w *world) stepOneHandoff(ctx context.Context, caller, callee, prompt string) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	f := w.focus[caller]
	if f == nil {
		return fmt.Errorf("%s answers no thread, so none to read", caller)
	}
	from, err := w.userID(caller)
	if err != nil {
		return err
	}
	to, err := w.userID(callee)
	if err != nil {
		return err
	}
	var found []id.EventID
	err = w.eventually(ctx, fmt.Sprintf("%s's handoff to %s in its thread", caller, callee), func() (bool, string, error) {
		msgs, err := w.readRaw(ctx, f.room)
		if err != nil {
			return false, "", err
		}
		found = found[:0]
		for _, m := range msgs {
			h, ok := m.content[zevent.KeyHandoff].(map[string]any)
			body, _ := m.content["body"].(string)
			mentions, _ := json.Marshal(m.content["m.mentions"])
			if ok && m.thread == f.root && m.ev.Sender == from && h["from"] == caller && h["to"] == callee &&
				m.content["msgtype"] == "m.notice" && strings.Contains(body, prompt) && strings.Contains(string(mentions), string(to)) {
				found = append(found, m.ev.ID)
			}
		}
		return len(found) > 0, fmt.Sprintf("%d handoffs", len(found)), nil
	})
	if err != nil {
		return err
	}
	if len(found) != 1 {
		return fmt.Errorf("%s's thread holds %d handoffs to %s (%v), want exactly one", caller, len(found), callee, found)
	}
	return nil
}

// handoffReturnsIn lists the callee's handoff returns for caller in the
// caller's current thread f.
func (w *world) handoffReturnsIn(ctx context.Context, f *post, caller, callee string) ([]id.EventID, error) {
	from := w.agentUser(callee)
	msgs, err := w.readRaw(ctx, f.room)
	if err != nil {
		return nil, err
	}
	var found []id.EventID
	for _, m := range msgs {
		r, ok := m.content[zevent.KeyHandoffReturn].(map[string]any)
		if ok && m.thread == f.root && m.ev.Sender == from && r["from"] == caller && m.content["msgtype"] == "m.notice" {
			found = append(found, m.ev.ID)
		}
	}
	return found, nil
}

func (w *world) stepHandoffReturnPosted(ctx context.Context, caller, callee string) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	f := w.focus[caller]
	if f == nil {
		return fmt.Errorf("%s answers no thread, so none to read", caller)
	}
	return w.eventually(ctx, fmt.Sprintf("a handoff return from %s in %s's thread", callee, caller), func() (bool, string, error) {
		found, err := w.handoffReturnsIn(ctx, f, caller, callee)
		if err != nil {
			return false, "", err
		}
		return len(found) > 0, "none yet", nil
	})
}

func (w *world) stepOneHandoffReturn(ctx context.Context, caller, callee string) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	f := w.focus[caller]
	if f == nil {
		return fmt.Errorf("%s answers no thread, so none to read", caller)
	}
	// The callee answers in the caller's thread: its barrier goes there.
	prev, had := w.focus[callee]
	w.focus[callee] = f
	defer func() {
		if had {
			w.focus[callee] = prev
		} else {
			delete(w.focus, callee)
		}
	}()
	// The callee's daemon posts a return owed at its start before its
	// intake opens: once the callee answers a barrier, every such post is in.
	if err := w.threadBarrier(ctx, callee); err != nil {
		return err
	}
	found, err := w.handoffReturnsIn(ctx, f, caller, callee)
	if err != nil {
		return err
	}
	if len(found) != 1 {
		return fmt.Errorf("%s's thread holds %d handoff returns from %s (%v), want exactly one", caller, len(found), callee, found)
	}
	return nil
}

func (w *world) stepPostedEncrypted(ctx context.Context, agent, roomName string) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	r, err := w.room(ctx, roomName)
	if err != nil {
		return err
	}
	if err := w.barrier(ctx, agent); err != nil {
		return err
	}
	uid := w.agentUser(agent)
	reader := w.humans[w.humanSeq[0]]
	resp, err := reader.cli.Messages(ctx, r.id, "", "", mautrix.DirectionBackward, nil, 100)
	if err != nil {
		return fmt.Errorf("reading %s as %s: %w", r.name, reader.name, err)
	}
	encrypted := 0
	var clear []string
	for _, ev := range resp.Chunk {
		if ev.Sender != uid {
			continue
		}
		switch ev.Type {
		case event.EventEncrypted:
			encrypted++
		case event.EventMessage:
			body, _ := ev.Content.Raw["body"].(string)
			if !strings.Contains(body, barrierMarker) {
				clear = append(clear, fmt.Sprintf("%s %q", ev.ID, body))
			}
		}
	}
	switch {
	case len(clear) > 0:
		return fmt.Errorf("%s posted %d message(s) in the clear in %s (want none): %s", agent, len(clear), r.name, strings.Join(clear, "; "))
	case encrypted == 0:
		return fmt.Errorf("%s posted no m.room.encrypted event in %s among the newest %d events", agent, r.name, len(resp.Chunk))
	}
	return nil
}
