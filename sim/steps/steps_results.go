package steps

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/cucumber/godog"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

func resultSteps(w *world) []stepDef {
	return []stepDef{
		{area: "results", pattern: `^the call succeeds$`,
			example: `the call succeeds`,
			doc:     "The last call returned a JSON object and no error.",
			fn:      w.stepSucceeds},
		{area: "results", pattern: `^the call is refused with "([a-z_]+)"$`,
			example: `the call is refused with "invalid_cursor"`,
			doc:     "The last call returned a tool result (not a protocol or bridge error) with isError, whose text is \"code: message\" with exactly that code.",
			fn:      w.stepRefusedWith},
		{area: "results", pattern: `^the call is refused with exactly "([a-z_]+: [^"]+)"$`,
			example: `the call is refused with exactly "unavailable: the homeserver did not answer within 2s; try again"`,
			doc:     "The last call returned a tool result (not a protocol or bridge error) with isError and exactly that \"code: message\" text.",
			fn:      w.stepRefusedExactly},
		{area: "results", pattern: `^the call is refused as an unknown tool$`,
			example: `the call is refused as an unknown tool`,
			doc:     "The last call got the MCP answer for a tool not offered to the session: a JSON-RPC invalid-params error naming the tool (not a tool result, not a broken bridge).",
			fn:      w.stepUnknownTool},
		{area: "results", pattern: `^the result includes (\{.*\})$`,
			example: `the result includes {"members": [{"id": "@agent-a", "is_agent": true, "agent_name": "agent-a"}]}`,
			doc:     "The last result contains the JSON: objects by subset, arrays by each expected element matching some actual one.",
			fn:      w.stepIncludes},
		{area: "results", pattern: `^the result includes:$`,
			example: `the result includes:`,
			doc:     "The same, with the expected JSON in a DocString below the step, for JSON too long for one line.",
			fn:      func(doc *godog.DocString) error { return w.stepIncludes(doc.Content) }},
		{area: "results", pattern: `^the result has (\d+) (threads?|messages?|members?|rooms?)$`,
			example: `the result has 5 threads`,
			doc:     "The last result's list has exactly that many entries.",
			fn:      w.stepHasN},
		{area: "results", pattern: `^the (threads|messages) are (newest|oldest) first$`,
			example: `the threads are newest first`,
			doc:     "The entries are in the order the harness sent them (newest or oldest first); messages it did not send (the daemon's, an agent's) are checked against the homeserver's own timeline, threads it did not start by timestamp.",
			fn:      w.stepOrdered},
		{area: "results", pattern: `^no (?:thread|message) in the result is a thread reply$`,
			example: `no thread in the result is a thread reply`,
			doc:     "No entry is a reply: none is a generated or harness reply, none has a thread_id other than its own id.",
			fn:      w.stepNoReplies},
		{area: "results", pattern: `^every (?:thread|message|member|room) in the result has ([a-z_, ]+)$`,
			example: `every thread in the result has reply_count and last_activity_at`,
			doc:     "Each entry of the last result's list has these fields, not null.",
			fn:      w.stepEveryHas},
		{area: "results", pattern: `^has_more is (true|false)$`,
			example: `has_more is false`,
			doc:     "The last result's has_more.",
			fn:      w.stepHasMore},
		{area: "results", pattern: `^the messages are thread (\d+) of "(#[a-z0-9-]+)", root first$`,
			example: `the messages are thread 3 of "#ops", root first`,
			doc:     "The last result is that generated thread exactly: its root, then its replies in order, with has_more false.",
			fn:      w.stepIsThread},
		{area: "results", pattern: `^each reply in the result carries its thread_id and no top-level message does$`,
			example: `each reply in the result carries its thread_id and no top-level message does`,
			doc:     "Generated replies carry their root's id as thread_id; generated top-level messages carry none.",
			fn:      w.stepThreadIDs},
		{area: "results", pattern: `^([a-z0-9-]+) saw each of the (\d+) generated messages of "(#[a-z0-9-]+)" exactly once, in order$`,
			example: `agent-a saw each of the 2000 generated messages of "#ops" exactly once, in order`,
			doc:     "Over the agent's paging walk (pages newest to oldest, each page chronological), every generated message appears once, in history order.",
			fn:      w.stepSawAll},
		{area: "results", pattern: `^([a-z0-9-]+) saw each of the (\d+) generated thread roots of "(#[a-z0-9-]+)" exactly once$`,
			example: `agent-a saw each of the 40 generated thread roots of "#ops" exactly once`,
			doc:     "Over the agent's paging walk of zooid_get_recent_threads, every generated thread root appears on exactly one page, once, and no entry of any kind appears twice.",
			fn:      w.stepSawRoots},
		{area: "results", pattern: `^the room info is "(#[a-z0-9-]+)", named "([^"]+)", on the (matrix|http) transport$`,
			example: `the room info is "#ops", named "#ops", on the matrix transport`,
			doc:     "The last result is exactly that room: its room id, its name (the m.room.name the harness gave it, taken literally) and its transport.",
			fn:      w.stepRoomInfo},
		{area: "results", pattern: `^has_more was true on every page but the last$`,
			example: `has_more was true on every page but the last`,
			doc:     "The paging walk's has_more was exact: true until the final page, false there, and that final page not empty.",
			fn:      w.stepHasMoreExact},
		{area: "results", pattern: `^every page had at most (\d+) messages$`,
			example: `every page had at most 200 messages`,
			doc:     "No page of the paging walk held more entries than that.",
			fn:      w.stepPageSize},
	}
}

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

func (w *world) stepSucceeds() error {
	_, err := w.okCall()
	return err
}

// stepRefusedWith checks a refusal by its code. A protocol error (the bridge
// or the MCP layer failing) is not a refusal: the daemon refuses with a tool
// result a model can read, so accepting any error would let a broken bridge pass.
func (w *world) stepRefusedWith(code string) error {
	c, err := w.lastCall()
	if err != nil {
		return err
	}
	if c.res.Err != "" {
		return fmt.Errorf("want a tool result refusing with %q, got a protocol error: %s", code, c)
	}
	if !c.res.IsError || !strings.HasPrefix(c.res.Text, code+": ") {
		return fmt.Errorf("want a tool result with isError and text %q…, got %s", code+": ", c)
	}
	return nil
}

func (w *world) stepRefusedExactly(text string) error {
	c, err := w.lastCall()
	if err != nil {
		return err
	}
	if c.res.Err != "" || !c.res.IsError || c.res.Text != text {
		return fmt.Errorf("want a tool result with isError and text %q, got %s", text, c)
	}
	return nil
}

// stepUnknownTool checks the MCP refusal of a tool the session was not
// offered. MCP makes it a protocol error (invalid params), so it is told from a
// broken bridge by its JSON-RPC code and by naming the tool.
func (w *world) stepUnknownTool() error {
	c, err := w.lastCall()
	if err != nil {
		return err
	}
	if !c.res.InvalidParams || !strings.Contains(c.res.Err, "'"+c.tool+"' not found") {
		return fmt.Errorf("want a JSON-RPC invalid-params error saying %s is not found, got %s", c.tool, c)
	}
	return nil
}

func (w *world) stepIncludes(js string) error {
	c, err := w.okCall()
	if err != nil {
		return err
	}
	var want any
	if err := json.Unmarshal([]byte(js), &want); err != nil {
		return fmt.Errorf("expected JSON %s: %w", js, err)
	}
	want, err = w.resolve(c.agent, want)
	if err != nil {
		return err
	}
	if path, ok := includes(c.body, want, "$"); !ok {
		return fmt.Errorf("the result lacks %s (first difference at %s): %s", js, path, c)
	}
	return nil
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

func (w *world) stepHasN(n int, _ string) error {
	c, l, err := w.okList()
	if err != nil {
		return err
	}
	if len(l) != n {
		return fmt.Errorf("want %d entries, got %d: %s", n, len(l), c)
	}
	return nil
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

func (w *world) stepOrdered(ctx context.Context, kind, order string) error {
	c, l, err := w.okList()
	if err != nil {
		return err
	}
	rank := w.sendOrder()
	var timeline map[id.EventID]int
	for i := 1; i < len(l); i++ {
		ida, _ := l[i-1]["id"].(string)
		idb, _ := l[i]["id"].(string)
		ra, knownA := rank[id.EventID(ida)]
		rb, knownB := rank[id.EventID(idb)]
		if (!knownA || !knownB) && kind == "messages" {
			// A message the harness did not send (the daemon's, an agent's):
			// the homeserver's timeline is the order, and its timestamps may
			// disagree with it when two sends raced (Synapse stamps an event
			// before it takes its place: 11 ms apart in one CI run).
			if timeline == nil {
				if timeline, err = w.timelineOrder(ctx); err != nil {
					return err
				}
			}
			ra, knownA = timeline[id.EventID(ida)]
			rb, knownB = timeline[id.EventID(idb)]
		}
		if knownA && knownB {
			// The harness knows which it sent first: the timeline order, which a
			// real server's timestamps may disagree with by a millisecond.
			if (order == "newest" && rb > ra) || (order == "oldest" && rb < ra) {
				return fmt.Errorf("entries %d (%s) and %d (%s) are not %s first: %s", i-1, ida, i, idb, order, c)
			}
			continue
		}
		a, err := stamp(l[i-1])
		if err != nil {
			return err
		}
		b, err := stamp(l[i])
		if err != nil {
			return err
		}
		if (order == "newest" && b.After(a)) || (order == "oldest" && b.Before(a)) {
			return fmt.Errorf("entries %d (%s) and %d (%s) are not %s first: %s", i-1, a, i, b, order, c)
		}
	}
	return nil
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

func (w *world) stepNoReplies() error {
	_, l, err := w.okList()
	if err != nil {
		return err
	}
	reps := w.replies()
	for _, e := range l {
		eid, _ := e["id"].(string)
		if root, ok := reps[id.EventID(eid)]; ok {
			return fmt.Errorf("entry %s is a reply in thread %s", eid, root)
		}
		if t, ok := e["thread_id"].(string); ok && t != "" && t != eid {
			return fmt.Errorf("entry %s carries thread_id %s", eid, t)
		}
	}
	return nil
}

func (w *world) stepEveryHas(fields string) error {
	c, l, err := w.okList()
	if err != nil {
		return err
	}
	if len(l) == 0 {
		return fmt.Errorf("the result has no entries to check: %s", c)
	}
	for i, e := range l {
		for _, f := range bareList(fields) {
			if v, ok := e[f]; !ok || v == nil {
				return fmt.Errorf("entry %d lacks %s: %v", i, f, e)
			}
		}
	}
	return nil
}

func (w *world) stepHasMore(want string) error {
	c, err := w.okCall()
	if err != nil {
		return err
	}
	got, ok := c.body["has_more"].(bool)
	if !ok || fmt.Sprint(got) != want {
		return fmt.Errorf("want has_more %s: %s", want, c)
	}
	return nil
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

func (w *world) stepIsThread(n int, roomName string) error {
	c, err := w.okCall()
	if err != nil {
		return err
	}
	r, ok := w.rooms[roomName]
	if !ok {
		return fmt.Errorf("no room %s", roomName)
	}
	root, err := r.threadRoot(n)
	if err != nil {
		return err
	}
	want := []id.EventID{root.id}
	for _, s := range r.seeded {
		if s.root == root.id {
			want = append(want, s.id)
		}
	}
	for _, p := range w.posts {
		if p.root == root.id && p.id != root.id {
			want = append(want, p.id)
		}
	}
	l, err := c.list()
	if err != nil {
		return err
	}
	got := ids(l)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		return fmt.Errorf("thread %d of %s: want %d messages, got %d:%s", n, roomName, len(want), len(got), diffIDs(want, l))
	}
	if more, _ := c.body["has_more"].(bool); more {
		return fmt.Errorf("the whole thread fits the page yet has_more is true")
	}
	return nil
}

func (w *world) stepThreadIDs() error {
	_, l, err := w.okList()
	if err != nil {
		return err
	}
	reps := w.replies()
	for _, e := range l {
		eid, _ := e["id"].(string)
		tid, _ := e["thread_id"].(string)
		root, isReply := reps[id.EventID(eid)]
		switch {
		case isReply && id.EventID(tid) != root:
			return fmt.Errorf("reply %s has thread_id %q, want %s", eid, tid, root)
		case !isReply && w.isKnownTopLevel(id.EventID(eid)) && tid != "" && tid != eid:
			return fmt.Errorf("top-level message %s has thread_id %q", eid, tid)
		}
	}
	return nil
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

func (w *world) stepSawAll(agent string, n int, roomName string) error {
	p, err := w.walk(agent)
	if err != nil {
		return err
	}
	if !p.done {
		return fmt.Errorf("%s's walk has not reached has_more false", agent)
	}
	r := w.rooms[roomName]
	if r == nil || len(r.seeded) != n {
		return fmt.Errorf("%s has no %d generated messages", roomName, n)
	}
	index := make(map[id.EventID]int, n)
	for i, s := range r.seeded {
		index[s.id] = i
	}
	// Pages go back in time; each page is chronological.
	var seen []int
	count := make([]int, n)
	for i := len(p.pages) - 1; i >= 0; i-- {
		l, err := p.pages[i].list()
		if err != nil {
			return err
		}
		for _, e := range ids(l) {
			if k, ok := index[e]; ok {
				seen = append(seen, k)
				count[k]++
			}
		}
	}
	var missing, twice []int
	for k, c := range count {
		if c == 0 {
			missing = append(missing, k)
		} else if c > 1 {
			twice = append(twice, k)
		}
	}
	if len(missing) > 0 || len(twice) > 0 {
		return fmt.Errorf("over %d pages: %d generated messages never seen (first indexes %v), %d seen more than once (%v)", len(p.pages), len(missing), head(missing), len(twice), head(twice))
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] < seen[i-1] {
			return fmt.Errorf("generated message %d came after %d", seen[i], seen[i-1])
		}
	}
	return nil
}

func (w *world) stepSawRoots(agent string, n int, roomName string) error {
	p, err := w.walk(agent)
	if err != nil {
		return err
	}
	if !p.done {
		return fmt.Errorf("%s's walk has not reached has_more false", agent)
	}
	r := w.rooms[roomName]
	if r == nil {
		return fmt.Errorf("no room %s", roomName)
	}
	roots := map[id.EventID]int{}
	for _, s := range r.seeded {
		if s.isRoot {
			roots[s.id] = 0
		}
	}
	if len(roots) != n {
		return fmt.Errorf("%s has %d generated thread roots, not %d", roomName, len(roots), n)
	}
	seen := map[id.EventID]bool{}
	var twice []id.EventID
	for _, pg := range p.pages {
		l, err := pg.list()
		if err != nil {
			return err
		}
		for _, e := range ids(l) {
			if seen[e] {
				twice = append(twice, e)
			}
			seen[e] = true
			if _, ok := roots[e]; ok {
				roots[e]++
			}
		}
	}
	var missing []id.EventID
	for e, c := range roots {
		if c == 0 {
			missing = append(missing, e)
		}
	}
	if len(missing) > 0 || len(twice) > 0 {
		return fmt.Errorf("over %d pages: %d of %d thread roots never seen (%v), %d entries seen more than once (%v)",
			len(p.pages), len(missing), n, missing[:min(len(missing), 5)], len(twice), twice[:min(len(twice), 5)])
	}
	return nil
}

func (w *world) stepRoomInfo(roomName, name, transport string) error {
	c, err := w.okCall()
	if err != nil {
		return err
	}
	r := w.rooms[roomName]
	if r == nil || !r.created {
		return fmt.Errorf("no room %s in this scenario", roomName)
	}
	gotID, _ := c.body["id"].(string)
	gotName, _ := c.body["name"].(string)
	gotTransport, _ := c.body["transport"].(string)
	if id.RoomID(gotID) != r.id || gotName != name || gotTransport != transport {
		return fmt.Errorf("want room %s (%s) named %q on %s, got %s", roomName, r.id, name, transport, c)
	}
	return nil
}

func head(x []int) []int { return x[:min(len(x), 10)] }

func (w *world) stepHasMoreExact() error {
	c, err := w.lastCall()
	if err != nil {
		return err
	}
	p, err := w.walk(c.agent)
	if err != nil {
		return err
	}
	for i, pg := range p.pages {
		more, _ := pg.body["has_more"].(bool)
		if last := i == len(p.pages)-1; more == last {
			return fmt.Errorf("page %d of %d has has_more %v", i+1, len(p.pages), more)
		}
	}
	// has_more was a guess if the page it promised turned out empty.
	if n := len(p.pages); n > 1 {
		if l, err := p.pages[n-1].list(); err == nil && len(l) == 0 {
			return fmt.Errorf("page %d said has_more true, but the last page %d was empty", n-1, n)
		}
	}
	return nil
}

func (w *world) stepPageSize(n int) error {
	c, err := w.lastCall()
	if err != nil {
		return err
	}
	p, err := w.walk(c.agent)
	if err != nil {
		return err
	}
	for i, pg := range p.pages {
		l, err := pg.list()
		if err != nil {
			return err
		}
		if len(l) > n {
			return fmt.Errorf("page %d has %d entries, more than %d", i+1, len(l), n)
		}
	}
	return nil
}

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
