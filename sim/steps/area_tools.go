package steps

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/cucumber/godog"

	"github.com/zooid-dev/zooid/fakeagent"
)

// The catalogue's "Calling tools" steps (area tools) and the step methods they
// run.

func toolSteps(w *world) []stepDef {
	return []stepDef{
		{area: "tools", pattern: `^([a-z0-9-]+) calls (zooid_[a-z_]+)(?: with (\{.*\}))?$`,
			example: `agent-a calls zooid_get_recent_threads with {"limit": 5}`,
			doc:     "Wakes the agent in its current thread with a turn that calls the tool, and waits for the result.",
			fn:      w.stepCalls},
		{area: "tools", pattern: `^([a-z0-9-]+) calls (zooid_[a-z_]+) with:$`,
			example: `agent-a calls zooid_start_task_threads with:`,
			doc:     "The same, with the JSON arguments in a DocString below the step, for arguments too long for one line.",
			fn: func(ctx context.Context, agent, tool string, doc *godog.DocString) error {
				return w.stepCalls(ctx, agent, tool, doc.Content)
			}},
		{area: "tools", pattern: `^([a-z0-9-]+) pages (zooid_[a-z_]+)(?: with (\{.*\}))? until has_more is false$`,
			example: `agent-a pages zooid_get_history with {"limit": 200} until has_more is false`,
			doc:     "Calls the tool, then again with each next_before as before, until has_more is false.",
			fn:      w.stepPagesAll},
		{area: "tools", pattern: `^([a-z0-9-]+) pages (zooid_[a-z_]+)(?: with (\{.*\}))? for (\d+) pages?$`,
			example: `agent-a pages zooid_get_history with {"limit": 200} for 3 pages`,
			doc:     "Starts a paging walk and stops after that many pages (or earlier at the end).",
			fn:      w.stepPagesSome},
		{area: "tools", pattern: `^([a-z0-9-]+) pages on until has_more is false$`,
			example: `agent-a pages on until has_more is false`,
			doc:     "Continues the agent's paging walk from its last next_before to the end.",
			fn:      w.stepPagesOn},

		// Recorded rooms (scenarios/), sent in as history or played into the
		// daemon.
		{area: "tools", pattern: `^([a-z0-9-]+) reads the recorded thread "([^"]+)" of "(#[a-z0-9-]+)"$`,
			example: `agent-a reads the recorded thread "alarm" of "#ops"`,
			doc:     "Calls zooid_get_thread_history on the replayed thread whose root has that label in the recording.",
			fn:      w.stepReadsRecordedThread},

		// Long messages, cut and posted whole.
		{area: "tools", pattern: `^([a-z0-9-]+) calls zooid_send_message in "(#[a-z0-9-]+)" with (\d+) bytes of prose$`,
			example: `agent-a calls zooid_send_message in "#ops" with 70000 bytes of prose`,
			doc:     "Calls zooid_send_message top-level in the room with a text of that many bytes, made as the long reply's prose is.",
			fn:      w.stepSendsProse},

		// The fake homeserver's misbehaviour beyond a plain error answer (the
		// "homeserver answers" step), and how the daemon retried.
		{area: "tools", pattern: `^([a-z0-9-]+) calls zooid_start_task_threads with (\{.*\}), and the daemon dies before answering$`,
			example: `planner calls zooid_start_task_threads with {"tasks": [{"agent": "coder", "prompt": "audit svc-a"}]}, and the daemon dies before answering`,
			doc:     "Makes the call as the plain call step does but waits for no result (the daemon is to die at an armed fault point meanwhile); its tasks are known by their prompts, and a later \"has exactly one root\" step finds each one's thread in the room.",
			fn:      w.stepStartCutShort},
		{area: "tools", pattern: `^([a-z0-9-]+) calls zooid_handoff with (\{.*\}), and the daemon dies before answering$`,
			example: `planner calls zooid_handoff with {"agent": "coder", "prompt": "check the certificates"}, and the daemon dies before answering`,
			doc:     "Makes the call as the plain call step does but waits for no result (the daemon is to die at an armed fault point meanwhile).",
			fn:      w.stepHandoffCutShort},
	}
}

func (w *world) stepCalls(ctx context.Context, agent, tool, js string) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	args, err := w.toolArgs(agent, js)
	if err != nil {
		return err
	}
	_, err = w.call(ctx, agent, tool, args)
	return err
}

func (w *world) stepPagesAll(ctx context.Context, agent, tool, js string) error {
	p, err := w.startPaging(ctx, agent, tool, js)
	if err != nil {
		return err
	}
	return w.page(ctx, agent, p, maxPages+1)
}

func (w *world) stepPagesSome(ctx context.Context, agent, tool, js string, n int) error {
	p, err := w.startPaging(ctx, agent, tool, js)
	if err != nil {
		return err
	}
	return w.page(ctx, agent, p, n)
}

func (w *world) stepPagesOn(ctx context.Context, agent string) error {
	p := w.paging[agent]
	if p == nil {
		return fmt.Errorf("%s has not started paging", agent)
	}
	return w.page(ctx, agent, p, maxPages+1)
}

func (w *world) stepReadsRecordedThread(ctx context.Context, agent, label, roomName string) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	r, rec, err := w.replayed(roomName)
	if err != nil {
		return err
	}
	i, err := rec.Find(label)
	if err != nil {
		return err
	}
	_, err = w.call(ctx, agent, "zooid_get_thread_history", map[string]any{"thread_id": string(r.seeded[i].id)})
	return err
}

func (w *world) stepSendsProse(ctx context.Context, agent, roomName, n string) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	args, err := w.toolArgs(agent, fmt.Sprintf(`{"room": %q}`, roomName)) // the room's name on this homeserver
	if err != nil {
		return err
	}
	k, _ := strconv.Atoi(n)
	args["text"] = longProse(k)
	_, err = w.call(ctx, agent, "zooid_send_message", args)
	return err
}

func (w *world) stepStartCutShort(ctx context.Context, agent, js string) error {
	args, err := w.cutShortArgs(ctx, agent, js)
	if err != nil {
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
	f := w.focus[agent]
	if err := w.callInNextTurn(ctx, agent, "zooid_start_task_threads", args); err != nil {
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

func (w *world) stepHandoffCutShort(ctx context.Context, agent, js string) error {
	args, err := w.cutShortArgs(ctx, agent, js)
	if err != nil {
		return err
	}
	return w.callInNextTurn(ctx, agent, "zooid_handoff", args)
}

// cutShortArgs is what a call the daemon dies in needs first: a daemon
// process to kill, the call's arguments, and the agent's thread, whose
// prompt has reached the agent.
func (w *world) cutShortArgs(ctx context.Context, agent, js string) (map[string]any, error) {
	if err := w.start(ctx); err != nil {
		return nil, err
	}
	if w.tw().proc == nil {
		return nil, errors.New("only a daemon process can die mid-call: declare \"the daemon runs as its own process\" first")
	}
	args, err := w.toolArgs(agent, js)
	if err != nil {
		return nil, err
	}
	f := w.focus[agent]
	if f == nil {
		return nil, fmt.Errorf("%s is answering no mention yet: have someone mention it first", agent)
	}
	if err := w.waitPrompted(ctx, agent, f.core); err != nil {
		return nil, err
	}
	return args, nil
}

// callInNextTurn scripts the agent's next turn to make the call and end,
// and mentions it in its thread to start that turn.
func (w *world) callInNextTurn(ctx context.Context, agent, tool string, args map[string]any) error {
	f := w.focus[agent]
	w.ctl.Queue(agent, fakeagent.Turn{fakeagent.CallTool(tool, args), fakeagent.Stop("end_turn")})
	w.stepSeq++
	_, err := w.say(ctx, f.sender, f.room.name, fmt.Sprintf("@%s go on (%d)", agent, w.stepSeq), f.root, true)
	return err
}
