package steps

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/zooid-dev/zooid/zooid/zevent"
)

// realWait bounds the waits of scenarios with real agents: a real adapter
// takes seconds to start (node, its own settings and extensions), many more
// on a loaded 2-core machine.
const realWait = 120 * time.Second

// modelSteps script a real agent's model and follow what it started.
func modelSteps(w *world) []stepDef {
	return []stepDef{
		{area: "script", pattern: `^([a-z0-9-]+)'s model will call ([A-Za-z][A-Za-z0-9_]*)(?: with (\{.*\}))?$`,
			example: `scout's model will call zooid_send_message with {"room": "{#ops}", "text": "heads-up"}`,
			doc:     "Appends a tool call to a real agent's model script (placeholders resolved now); each of its turn's model requests takes the script's next step. Zooid's tools by their own names (the model double finds the name the agent offers them under, such as Claude Code's mcp__zooid__…); other tools by the agent's name for them (Bash).",
			fn:      w.stepModelCalls},
		{area: "script", pattern: `^([a-z0-9-]+)'s model will say "([^"]*)"$`,
			example: `scout's model will say "recent: {result}"`,
			doc:     "Appends a reply that ends the turn to a real agent's model script; {result} becomes the text of the last tool result the model got, {prompt} the text of its last prompt.",
			fn:      w.stepModelSays},
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

func (w *world) stepModelCalls(ctx context.Context, agent, tool, args string) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	a, err := w.toolArgs(agent, args)
	if err != nil {
		return err
	}
	return w.scriptStep(agent, tool, a, "")
}

func (w *world) stepModelSays(agent, text string) error {
	return w.scriptStep(agent, "", nil, text)
}

func (w *world) stepPostsContaining(ctx context.Context, agent, text string) error {
	if w.thread == nil {
		return fmt.Errorf("there is no current thread yet")
	}
	return w.waitPost(ctx, agent, w.thread.room, fmt.Sprintf("a notice containing %q", text), w.thread.root,
		func(m seenMsg) bool { return strings.Contains(m.body, text) })
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
	uid := w.names().agent(caller)
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
