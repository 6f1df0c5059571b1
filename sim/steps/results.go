package steps

import (
	"context"
	"fmt"
	"strings"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// Tool results: the last call, its entries, and the orders and ids they are
// checked against.

// lastCall is the most recent call, or an error saying there is none.
func (w *world) lastCall() (*call, error) {
	if w.last == nil {
		return nil, fmt.Errorf("no tool has been called yet")
	}
	return w.last, nil
}

func (c *call) String() string {
	if c.res.Err != "" {
		return fmt.Sprintf("%s(%s) → protocol error %q", c.tool, mustJSON(c.args), c.res.Err)
	}
	text := c.res.Text
	if len(text) > 600 {
		text = text[:600] + "…"
	}
	return fmt.Sprintf("%s(%s) → isError=%v %s", c.tool, mustJSON(c.args), c.res.IsError, text)
}

// okCall is the last call, which must have succeeded.
func (w *world) okCall() (*call, error) {
	c, err := w.lastCall()
	if err != nil {
		return nil, err
	}
	if c.res.IsError || c.res.Err != "" || c.body == nil {
		return nil, fmt.Errorf("the call did not succeed: %s", c)
	}
	return c, nil
}

// okList is the last call, which must have succeeded, and its entries.
func (w *world) okList() (*call, []map[string]any, error) {
	c, err := w.okCall()
	if err != nil {
		return nil, nil, err
	}
	l, err := c.list()
	if err != nil {
		return nil, nil, err
	}
	return c, l, nil
}

// list is the entries of a result: its one array field.
func (c *call) list() ([]map[string]any, error) {
	for _, k := range []string{"threads", "messages", "members", "rooms"} {
		raw, ok := c.body[k]
		if !ok {
			continue
		}
		arr, ok := raw.([]any)
		if !ok {
			return nil, fmt.Errorf("%s is not a list in %s", k, c)
		}
		out := make([]map[string]any, 0, len(arr))
		for _, e := range arr {
			m, ok := e.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("an entry of %s is not an object in %s", k, c)
			}
			out = append(out, m)
		}
		return out, nil
	}
	return nil, fmt.Errorf("no threads, messages, members or rooms in %s", c)
}

// includes says whether got contains want: objects by subset, arrays by each
// wanted element matching some element, numbers by value.
func includes(got, want any, path string) (string, bool) {
	switch wv := want.(type) {
	case map[string]any:
		gm, ok := got.(map[string]any)
		if !ok {
			return path, false
		}
		for k, v := range wv {
			if p, ok := includes(gm[k], v, path+"."+k); !ok {
				return p, false
			}
		}
		return "", true
	case []any:
		ga, ok := got.([]any)
		if !ok {
			return path, false
		}
		for i, v := range wv {
			found := false
			for _, g := range ga {
				if _, ok := includes(g, v, path); ok {
					found = true
					break
				}
			}
			if !found {
				return fmt.Sprintf("%s[%d]", path, i), false
			}
		}
		return "", true
	default:
		return path, fmt.Sprint(got) == fmt.Sprint(want) && (got == nil) == (want == nil)
	}
}

// stamp is an entry's timestamp.
func stamp(e map[string]any) (time.Time, error) {
	s, _ := e["timestamp"].(string)
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("entry %v has no RFC 3339 timestamp: %w", e["id"], err)
	}
	return t, nil
}

// timelineOrder ranks the newest 300 events of each room in the homeserver's
// own timeline order, oldest lowest.
func (w *world) timelineOrder(ctx context.Context) (map[id.EventID]int, error) {
	rank := map[id.EventID]int{}
	for _, rn := range w.roomSeq {
		var ids []id.EventID
		if err := w.pageBack(ctx, w.rooms[rn], 3, func(ev *event.Event) { ids = append(ids, ev.ID) }); err != nil {
			return nil, err
		}
		for i := len(ids) - 1; i >= 0; i-- {
			rank[ids[i]] = len(rank)
		}
	}
	return rank, nil
}

// sendOrder ranks every event the harness put in its rooms, in the order it
// sent or imported them: seeded history first, then what steps posted.
func (w *world) sendOrder() map[id.EventID]int {
	rank := map[id.EventID]int{}
	for _, rn := range w.roomSeq {
		for _, s := range w.rooms[rn].seeded {
			rank[s.id] = len(rank)
		}
	}
	for _, p := range w.posts {
		rank[p.id] = len(rank)
	}
	return rank
}

// replies is every known reply event: generated and harness-posted.
func (w *world) replies() map[id.EventID]id.EventID {
	out := map[id.EventID]id.EventID{}
	for _, r := range w.rooms {
		for _, s := range r.seeded {
			if s.root != "" {
				out[s.id] = s.root
			}
		}
	}
	for _, p := range w.posts {
		if p.root != p.id {
			out[p.id] = p.root
		}
	}
	return out
}

// ids lists the entries' ids.
func ids(l []map[string]any) []id.EventID {
	out := make([]id.EventID, 0, len(l))
	for _, e := range l {
		s, _ := e["id"].(string)
		out = append(out, id.EventID(s))
	}
	return out
}

func (w *world) isKnownTopLevel(e id.EventID) bool {
	for _, r := range w.rooms {
		for _, s := range r.seeded {
			if s.id == e {
				return s.root == ""
			}
		}
	}
	for _, p := range w.posts {
		if p.id == e {
			return p.root == p.id
		}
	}
	return false
}

// walk is the agent's paging walk.
func (w *world) walk(agent string) (*paging, error) {
	p := w.paging[agent]
	if p == nil || len(p.pages) == 0 {
		return nil, fmt.Errorf("%s has not paged anything", agent)
	}
	return p, nil
}

// finishedWalk is agent's paging walk, which must have reached has_more false.
func (w *world) finishedWalk(agent string) (*paging, error) {
	p, err := w.walk(agent)
	if err != nil {
		return nil, err
	}
	if !p.done {
		return nil, fmt.Errorf("%s's walk has not reached has_more false", agent)
	}
	return p, nil
}

// lastWalk is the paging walk of the agent that made the last call.
func (w *world) lastWalk() (*paging, error) {
	c, err := w.lastCall()
	if err != nil {
		return nil, err
	}
	return w.walk(c.agent)
}

func head(x []int) []int { return x[:min(len(x), 10)] }

// diffIDs explains how a list of entries differs from the wanted ids.
func diffIDs(want []id.EventID, got []map[string]any) string {
	var b strings.Builder
	for i := range max(len(want), len(got)) {
		var w, g id.EventID
		text := ""
		if i < len(want) {
			w = want[i]
		}
		if i < len(got) {
			s, _ := got[i]["id"].(string)
			g = id.EventID(s)
			text, _ = got[i]["text"].(string)
		}
		mark := "  "
		if w != g {
			mark = "≠ "
		}
		fmt.Fprintf(&b, "\n    %s%2d want %-46s got %-46s %q", mark, i, w, g, text)
	}
	return b.String()
}
