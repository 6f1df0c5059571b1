package steps

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	acp "github.com/coder/acp-go-sdk"
	"github.com/cucumber/godog"

	"github.com/zooid-dev/zooid/fakeagent"
	"github.com/zooid-dev/zooid/modeldouble"
)

// The catalogue's "Scripting agents" steps (area script) and the step methods
// they run.

func scriptSteps(w *world) []stepDef {
	return []stepDef{
		{area: "script", pattern: `^([a-z0-9-]+) will reply "([^"]*)"$`,
			example: `agent-a will reply "on it"`,
			doc:     "Queues a turn that says the text in one chunk and ends.",
			fn:      w.stepWillReply},
		{area: "script", pattern: `^([a-z0-9-]+) will reply "([^"]*)" in (\d+) chunks$`,
			example: `agent-a will reply "checking the logs now" in 4 chunks`,
			doc:     "Queues a turn that streams the text split into that many chunks, then ends.",
			fn:      w.stepWillReplyChunks},
		{area: "script", pattern: `^([a-z0-9-]+) will call (zooid_[a-z_]+)(?: with (\{.*\}))?$`,
			example: `agent-a will call zooid_get_history with {"limit": 5}`,
			doc:     "Queues a turn that calls the tool (placeholders resolved now) and ends without prose.",
			fn:      w.stepWillCall},
		{area: "script", pattern: `^([a-z0-9-]+) will (crash|hang)$`,
			example: `agent-a will crash`,
			doc:     "Queues a turn in which the agent process exits mid-turn, or blocks until cancelled.",
			fn:      w.stepWillFail},
		{area: "script", pattern: `^([a-z0-9-]+) will list its tools$`,
			example: `agent-a will list its tools`,
			doc:     "Queues a turn that runs tools/list on its MCP servers and ends.",
			fn:      w.stepWillList},

		// Task threads (behaviour §5). Tasks are named by a piece of their prompt;
		// their thread roots become threads the shared steps can name too ("ori
		// replies in the thread of "audit svc-a": …").
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

		// Long messages, cut and posted whole.
		{area: "script", pattern: `^([a-z0-9-]+) will reply with (\d+) bytes of prose$`,
			example: `agent-a will reply with 150000 bytes of prose`,
			doc:     "Queues a turn that says a long text of that many bytes (numbered paragraphs of mixed ASCII and UTF-8, each starting \"long report\") in one chunk, and ends.",
			fn:      w.stepWillReplyProse},

		// The fake homeserver's misbehaviour beyond a plain error answer (the
		// "homeserver answers" step), and how the daemon retried.
		{area: "script", pattern: `^([a-z0-9-]+) will flood the thread with (\d+) bytes of prose$`,
			example: `agent-a will flood the thread with 2000000 bytes of prose`,
			doc:     "Queues a turn that streams a long text of that many bytes (made as the long reply's prose is) in chunks of about 32 KiB, and ends.",
			fn:      w.stepWillFlood},

		// A real agent's model, scripted, and what it started.
		{area: "script", pattern: `^([a-z0-9-]+)'s model will call ([A-Za-z][A-Za-z0-9_]*)(?: with (\{.*\}))?$`,
			example: `scout's model will call zooid_send_message with {"room": "{#ops}", "text": "heads-up"}`,
			doc:     "Appends a tool call to a real agent's model script (placeholders resolved now); each of its turn's model requests takes the script's next step. Zooid's tools by their own names (the model double finds the name the agent offers them under, such as Claude Code's mcp__zooid__…); other tools by the agent's name for them (Bash).",
			fn:      w.stepModelCalls},
		{area: "script", pattern: `^([a-z0-9-]+)'s model will say "([^"]*)"$`,
			example: `scout's model will say "recent: {result}"`,
			doc:     "Appends a reply that ends the turn to a real agent's model script; {result} becomes the text of the last tool result the model got, {prompt} the text of its last prompt.",
			fn:      w.stepModelSays},

		// Real agents: their adapters against the model double.
		{area: "script", pattern: `^([a-z0-9-]+)'s model will fail with HTTP (\d{3})(?: and Retry-After (\d+))?$`,
			example: `claude1's model will fail with HTTP 429 and Retry-After 1`,
			doc:     "Appends a fault to a real agent's model script: its next turn request is answered with that status, the API's error body and the Retry-After header; the agent's retry takes the step after. The scenario fails if the fault never fired.",
			fn:      w.stepModelFails},
		{area: "script", pattern: `^([a-z0-9-]+)'s model will cut its answer off mid-stream$`,
			example: `claude1's model will cut its answer off mid-stream`,
			doc:     "Appends a fault to a real agent's model script: its next turn request gets half an answer and a dropped connection. The scenario fails if the fault never fired.",
			fn:      w.stepModelCuts},
	}
}

func (w *world) stepWillReply(agent, text string) error {
	return w.queue(agent, fakeagent.Turn{fakeagent.Say(text), fakeagent.Stop("end_turn")})
}

func (w *world) stepWillReplyChunks(agent, text, n string) error {
	k, _ := strconv.Atoi(n)
	return w.queue(agent, fakeagent.Turn{fakeagent.SayInChunks(fakeagent.SplitChunks(text, k)...), fakeagent.Stop("end_turn")})
}

func (w *world) stepWillCall(ctx context.Context, agent, tool, args string) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	a, err := w.toolArgs(agent, args)
	if err != nil {
		return err
	}
	return w.queue(agent, fakeagent.Turn{fakeagent.CallTool(tool, a), fakeagent.Stop("end_turn")})
}

func (w *world) stepWillFail(agent, how string) error {
	return w.queue(agent, fakeagent.FailTurn(how))
}

func (w *world) stepWillList(agent string) error {
	return w.queue(agent, fakeagent.Turn{fakeagent.ListTools(), fakeagent.Stop("end_turn")})
}

func (w *world) stepTurnTable(ctx context.Context, agent string, table *godog.Table) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	rows := make([][]string, len(table.Rows))
	for i, row := range table.Rows {
		for _, c := range row.Cells {
			rows[i] = append(rows[i], strings.TrimSpace(c.Value))
		}
	}
	// The rows a script file for a fake-agent run by hand takes too
	// (fakeagent.ParseScript), with the features' placeholders resolved.
	turn, err := fakeagent.TurnFromRows(rows, func(js string) (map[string]any, error) { return w.toolArgs(agent, js) })
	if err != nil {
		return err
	}
	return w.queue(agent, turn)
}

func (w *world) stepRelease(agent string) error {
	if _, err := w.agent(agent); err != nil {
		return err
	}
	w.ctl.Release(agent)
	return nil
}

func (w *world) stepReplyAfter(agent, text, secs string) error {
	f, err := strconv.ParseFloat(secs, 64)
	if err != nil {
		return fmt.Errorf("seconds %q: %w", secs, err)
	}
	d := time.Duration(f * float64(time.Second))
	return w.queue(agent, fakeagent.Turn{fakeagent.Wait(d), fakeagent.Say(text), fakeagent.Stop(acp.StopReasonEndTurn)})
}

func (w *world) stepWillReplyProse(agent, n string) error {
	k, _ := strconv.Atoi(n)
	if w.prose == nil {
		w.prose = map[string]string{}
	}
	w.prose[agent] = longProse(k)
	return w.queue(agent, fakeagent.Turn{fakeagent.Say(w.prose[agent]), fakeagent.Stop("end_turn")})
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

func (w *world) stepModelFails(agent, status, retryAfter string) error {
	sc, err := w.modelScript(agent)
	if err != nil {
		return err
	}
	f := &modeldouble.Fault{Kind: modeldouble.FaultStatus}
	f.Status, _ = strconv.Atoi(status)
	if retryAfter != "" {
		f.RetryAfter, _ = strconv.Atoi(retryAfter)
	}
	sc.Add(modeldouble.Step{Fault: f})
	return nil
}

func (w *world) stepModelCuts(agent string) error {
	sc, err := w.modelScript(agent)
	if err != nil {
		return err
	}
	sc.Add(modeldouble.Step{Fault: &modeldouble.Fault{Kind: modeldouble.FaultCut}})
	return nil
}
