package steps

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/zooid-dev/zooid/fakeagent"
)

// Calling the daemon's tools as an agent: arguments with placeholders resolved,
// one call, and paging walks.

// call is one tool call an agent made through the real chain.
type call struct {
	agent string
	tool  string
	args  map[string]any
	res   fakeagent.ToolResult
	body  map[string]any // the result text parsed as a JSON object, if it is one
}

// paging is an agent's walk through a history tool, page by page.
type paging struct {
	tool  string
	args  map[string]any
	pages []*call
	done  bool
}

// toolArgs parses a step's JSON arguments and resolves placeholders.
func (w *world) toolArgs(agent, js string) (map[string]any, error) {
	args := map[string]any{}
	if strings.TrimSpace(js) != "" {
		if err := json.Unmarshal([]byte(js), &args); err != nil {
			return nil, fmt.Errorf("tool arguments %s are not a JSON object: %w", js, err)
		}
	}
	v, err := w.resolve(agent, args)
	if err != nil {
		return nil, err
	}
	return v.(map[string]any), nil
}

// resolve replaces placeholder strings (see the catalogue) inside v.
func (w *world) resolve(agent string, v any) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			r, err := w.resolve(agent, e)
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			r, err := w.resolve(agent, e)
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	case string:
		return w.placeholder(agent, x)
	}
	return v, nil
}

func (w *world) placeholder(agent, s string) (any, error) {
	switch {
	case s == "$thread":
		if f := w.focus[agent]; f != nil {
			return string(f.root), nil
		}
		if w.thread == nil {
			return nil, fmt.Errorf("$thread: there is no current thread")
		}
		return string(w.thread.root), nil
	case strings.HasPrefix(s, "$task:"):
		t, err := w.task(strings.TrimPrefix(s, "$task:"))
		if err != nil {
			return nil, err
		}
		return string(t.thread), nil
	case s == "$next_before" || s == "$tampered_next_before":
		nb := w.lastCursor(agent)
		if nb == "" {
			return nil, fmt.Errorf("%s: %s has no next_before from an earlier call", s, agent)
		}
		if s == "$tampered_next_before" {
			return tamper(nb), nil
		}
		return nb, nil
	case strings.HasPrefix(s, "@") && nameRE.MatchString(s[1:]):
		uid, err := w.userID(s[1:])
		if err != nil {
			return nil, err
		}
		return string(uid), nil
	case strings.HasPrefix(s, "#") && (strings.HasSuffix(s, ":alias") || strings.HasSuffix(s, ":short")):
		name, form, _ := strings.Cut(s, ":")
		if err := checkRoom(name); err != nil {
			return nil, err
		}
		if form == "short" {
			return "#" + w.names().aliasLocalpart(name), nil
		}
		return string(w.names().alias(name)), nil
	case strings.HasPrefix(s, "#"):
		name, thread, hasThread := strings.Cut(s, "/thread-")
		if checkRoom(name) != nil {
			return s, nil
		}
		r, ok := w.rooms[name]
		if !ok || !r.created {
			return nil, fmt.Errorf("%s: no such room in this scenario", name)
		}
		if !hasThread {
			return string(r.id), nil
		}
		n, err := strconv.Atoi(thread)
		if err != nil {
			return nil, fmt.Errorf("%s: want #room/thread-N", s)
		}
		root, err := r.threadRoot(n)
		if err != nil {
			return nil, err
		}
		return string(root.id), nil
	}
	return s, nil
}

// threadRoot is the n-th (1-based) generated thread root of a room.
func (r *room) threadRoot(n int) (seeded, error) {
	k := 0
	for _, s := range r.seeded {
		if s.isRoot {
			k++
			if k == n {
				return s, nil
			}
		}
	}
	return seeded{}, fmt.Errorf("%s has %d generated threads, not %d", r.name, k, n)
}

// tamper changes one character in the middle of a cursor.
func tamper(s string) string {
	b := []byte(s)
	i := len(b) / 2
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

// lastCursor is the next_before of the agent's latest call that had one.
func (w *world) lastCursor(agent string) string {
	cs := w.calls[agent]
	for i := len(cs) - 1; i >= 0; i-- {
		if nb, ok := cs[i].body["next_before"].(string); ok && nb != "" {
			return nb
		}
	}
	return ""
}

// call drives one tool call through the real chain: it makes sure the agent
// is idle in its current thread, queues a turn calling the tool, wakes the
// agent there with a mention and waits for the result.
func (w *world) call(ctx context.Context, agent, tool string, args map[string]any) (*call, error) {
	if err := w.start(ctx); err != nil {
		return nil, err
	}
	a, err := w.agent(agent)
	if err != nil {
		return nil, err
	}
	f := w.focus[agent]
	if f == nil {
		if len(a.rooms) == 0 {
			return nil, fmt.Errorf("%s is bound to no room, so no message can wake it", agent)
		}
		if err := w.stepAnswering(ctx, agent, a.rooms[0]); err != nil {
			return nil, err
		}
		f = w.focus[agent]
	}
	// The turn queued next must be consumed by the wake below, not by the
	// message the agent is still answering.
	if err := w.waitPrompted(ctx, agent, f.core); err != nil {
		return nil, err
	}
	before := len(w.ctl.ToolResults(agent))
	w.ctl.Queue(agent, fakeagent.Turn{fakeagent.CallTool(tool, args), fakeagent.Stop("end_turn")})
	w.stepSeq++
	if _, err := w.say(ctx, f.sender, f.room.name, fmt.Sprintf("@%s go on (%d)", agent, w.stepSeq), f.root, true); err != nil {
		return nil, err
	}
	wctx, cancel := w.waitCtx(ctx)
	defer cancel()
	rs, err := w.ctl.WaitToolResults(wctx, agent, before+1)
	if err != nil {
		return nil, fmt.Errorf("%s calling %s: %w; %s; MCP errors: %v", agent, tool, err, w.promptsSeen(agent), w.ctl.MCPErrors(agent))
	}
	c := &call{agent: agent, tool: tool, args: args, res: rs[before]}
	var body map[string]any
	if json.Unmarshal([]byte(c.res.Text), &body) == nil {
		c.body = body
	}
	w.calls[agent] = append(w.calls[agent], c)
	w.last = c
	return c, nil
}

// maxPages stops a walk whose has_more never ends.
const maxPages = 500

func (w *world) page(ctx context.Context, agent string, p *paging, pages int) error {
	for n := 0; n < pages && !p.done; n++ {
		if len(p.pages) >= maxPages {
			return fmt.Errorf("%s paged %s %d times and has_more is still true", agent, p.tool, maxPages)
		}
		args := make(map[string]any, len(p.args)+1)
		for k, v := range p.args {
			args[k] = v
		}
		if len(p.pages) > 0 {
			prev := p.pages[len(p.pages)-1]
			nb, _ := prev.body["next_before"].(string)
			if nb == "" {
				return fmt.Errorf("page %d of %s had has_more true but no next_before: %s", len(p.pages), p.tool, prev.res.Text)
			}
			args["before"] = nb
		}
		c, err := w.call(ctx, agent, p.tool, args)
		if err != nil {
			return err
		}
		if c.res.IsError || c.res.Err != "" || c.body == nil {
			return fmt.Errorf("page %d of %s failed: %s %s", len(p.pages)+1, p.tool, c.res.Text, c.res.Err)
		}
		p.pages = append(p.pages, c)
		more, ok := c.body["has_more"].(bool)
		if !ok {
			return fmt.Errorf("page %d of %s has no boolean has_more: %s", len(p.pages), p.tool, c.res.Text)
		}
		p.done = !more
	}
	return nil
}

func (w *world) startPaging(ctx context.Context, agent, tool, js string) (*paging, error) {
	if err := w.start(ctx); err != nil {
		return nil, err
	}
	args, err := w.toolArgs(agent, js)
	if err != nil {
		return nil, err
	}
	p := &paging{tool: tool, args: args}
	w.paging[agent] = p
	return p, nil
}
