package steps

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/cucumber/godog"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/fakeagent"
)

// The catalogue's "Tool results" steps (area results) and the step methods they
// run.

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
		{area: "results", pattern: `^no message in the result is undecryptable$`,
			example: `no message in the result is undecryptable`,
			doc:     "No entry of the last result carries undecryptable: true (each was decrypted, or was never encrypted).",
			fn:      w.stepNoneUndecryptable},
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
			example: `agent-a saw each of the 800 generated messages of "#ops" exactly once, in order`,
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
		{area: "results", pattern: `^every page's result was at most (\d+) bytes$`,
			example: `every page's result was at most 65536 bytes`,
			doc:     "No page of the paging walk had a result text (the JSON the agent reads) longer than that many bytes.",
			fn:      w.stepPageBytes},
		{area: "results", pattern: `^page (\d+) of the walk held (\d+) entries$`,
			example: `page 2 of the walk held 10 entries`,
			doc:     "That page of the paging walk (1 is the newest) held exactly that many entries.",
			fn:      w.stepPageEntries},
		{area: "results", pattern: `^([a-z0-9-]+) saw each message ([a-z0-9-]+) posted in "(#[a-z0-9-]+)" exactly once, in order$`,
			example: `agent-a saw each message mia posted in "#ops" exactly once, in order`,
			doc:     "Over the agent's paging walk (pages newest to oldest, each page chronological), every message the scenario had that human post in the room appears once, in the order posted, with its text whole.",
			fn:      w.stepSawPosted},

		// Task threads (behaviour §5). Tasks are named by a piece of their prompt;
		// their thread roots become threads the shared steps can name too ("ori
		// replies in the thread of "audit svc-a": …").
		{area: "results", pattern: `^([a-z0-9-]+) got a result from (zooid_[a-z_]+)$`,
			example: `agent-b got a result from zooid_complete_task`,
			doc:     "Waits for the next result of that tool in the agent's scripted turns and makes it the last call, for the result steps.",
			fn:      w.stepGotResult},
		{area: "results", pattern: `^tasks? ((?:\d+(?:, | and )?)+) (?:is|are) (started|refused|failed)(?: \(([a-z_]+)\))?$`,
			example: `task 6 is refused (at_capacity)`,
			doc:     "Entries (1-based) of the last zooid_start_task_threads result: started with a thread_id, or refused/failed with that reason.",
			fn:      w.stepTaskStatus},

		// Recorded rooms (scenarios/), sent in as history or played into the
		// daemon.
		{area: "results", pattern: `^the recording is the recorded scenario "([^"]+)" again$`,
			example: `the recording is the recorded scenario "svc-a-incident" again`,
			doc:     "The last recording has the scenario's members (and the scenario's other humans, whom the harness joins to every room) and roles and its events in order: senders, types, relations, content (mentions mapped back to names) and edited text. Timestamps are compared only where the history was imported (fakehs, no rich replies), which keeps the recorded ones.",
			fn:      w.stepRecordingIs},
		{area: "results", pattern: `^the threads are the recorded top-level messages of "(#[a-z0-9-]+)", newest first$`,
			example: `the threads are the recorded top-level messages of "#ops", newest first`,
			doc:     "The last result lists the replayed top-level messages and thread roots (after the harness's own top-level posts) newest first, with their senders, edited text and reply counts.",
			fn:      w.stepRecordedThreads},
		{area: "results", pattern: `^the messages are the recorded thread "([^"]+)" of "(#[a-z0-9-]+)", root first$`,
			example: `the messages are the recorded thread "alarm" of "#ops", root first`,
			doc:     "The last result is that replayed thread exactly: root, then replies in order (and any posted since), each with the root as thread_id and its edited text.",
			fn:      w.stepRecordedThread},
		{area: "results", pattern: `^the messages hold the recorded history of "(#[a-z0-9-]+)" in order$`,
			example: `the messages hold the recorded history of "#ops" in order`,
			doc:     "Every replayed message appears once, in recorded order, with its thread_id and edited text; reactions and edits are not messages.",
			fn:      w.stepRecordedHistory},
	}
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

func (w *world) stepNoneUndecryptable() error {
	l, err := w.entriesToCheck()
	if err != nil {
		return err
	}
	for i, e := range l {
		if u, _ := e["undecryptable"].(bool); u {
			return fmt.Errorf("entry %d is undecryptable: %v", i, e)
		}
	}
	return nil
}

// entriesToCheck are the last result's entries; none is an error, since a
// step about every entry would otherwise pass on nothing.
func (w *world) entriesToCheck() ([]map[string]any, error) {
	c, l, err := w.okList()
	if err != nil {
		return nil, err
	}
	if len(l) == 0 {
		return nil, fmt.Errorf("the result has no entries to check: %s", c)
	}
	return l, nil
}

func (w *world) stepEveryHas(fields string) error {
	l, err := w.entriesToCheck()
	if err != nil {
		return err
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

func (w *world) stepSawAll(agent string, n int, roomName string) error {
	p, err := w.finishedWalk(agent)
	if err != nil {
		return err
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
	p, err := w.finishedWalk(agent)
	if err != nil {
		return err
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

func (w *world) stepHasMoreExact() error {
	p, err := w.lastWalk()
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
	p, err := w.lastWalk()
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

func (w *world) stepPageBytes(n int) error {
	p, err := w.lastWalk()
	if err != nil {
		return err
	}
	for i, pg := range p.pages {
		if len(pg.res.Text) > n {
			return fmt.Errorf("page %d's result is %d bytes, more than %d", i+1, len(pg.res.Text), n)
		}
	}
	return nil
}

func (w *world) stepPageEntries(page, n int) error {
	p, err := w.lastWalk()
	if err != nil {
		return err
	}
	if page < 1 || page > len(p.pages) {
		return fmt.Errorf("the walk has %d pages, no page %d", len(p.pages), page)
	}
	l, err := p.pages[page-1].list()
	if err != nil {
		return err
	}
	if len(l) != n {
		var sizes []int
		for _, e := range l {
			t, _ := e["text"].(string)
			sizes = append(sizes, len(t))
		}
		return fmt.Errorf("page %d holds %d entries (%d bytes; texts of %v bytes), want %d", page, len(l), len(p.pages[page-1].res.Text), sizes, n)
	}
	return nil
}

func (w *world) stepSawPosted(agent, who, roomName string) error {
	p, err := w.finishedWalk(agent)
	if err != nil {
		return err
	}
	r := w.rooms[roomName]
	if r == nil {
		return fmt.Errorf("no room %s in this scenario", roomName)
	}
	var want []id.EventID
	text := map[id.EventID]string{}
	for _, ps := range w.posts {
		if ps.sender == who && ps.room == r {
			want = append(want, ps.id)
			text[ps.id] = ps.text
		}
	}
	if len(want) == 0 {
		return fmt.Errorf("%s posted nothing in %s", who, roomName)
	}
	// Pages go back in time; each page is chronological.
	var got []map[string]any
	for i := len(p.pages) - 1; i >= 0; i-- {
		l, err := p.pages[i].list()
		if err != nil {
			return err
		}
		for _, e := range l {
			if s, _ := e["id"].(string); text[id.EventID(s)] != "" {
				got = append(got, e)
			}
		}
	}
	if !slices.Equal(want, ids(got)) {
		return fmt.Errorf("over %d pages, %s's messages: %s", len(p.pages), who, diffIDs(want, got))
	}
	for _, e := range got {
		s, _ := e["id"].(string)
		if t, _ := e["text"].(string); t != text[id.EventID(s)] {
			return fmt.Errorf("%s came back as %d bytes of text, not the %d posted", s, len(t), len(text[id.EventID(s)]))
		}
	}
	return nil
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

func (w *world) stepRecordingIs(ref string) error {
	got := w.recording
	if got == nil {
		return fmt.Errorf("nothing has been recorded; use: \"#room\" is recorded as agent-a")
	}
	want, err := loadRecording(ref)
	if err != nil {
		return err
	}
	for _, m := range want.Members {
		if !slices.Contains(got.Members, m) {
			return fmt.Errorf("members %v, want %s among them", got.Members, m)
		}
	}
	// The harness joins every human of the scenario to every room; those
	// are members the recording did not have.
	for _, m := range got.Members {
		if _, human := w.humans[m]; !slices.Contains(want.Members, m) && !human {
			return fmt.Errorf("member %s recorded, which is neither in %s nor a human of this scenario", m, want.Path)
		}
	}
	// Version 1 recordings have no roles to compare.
	for m, a := range want.Agents {
		g, ok := got.Agents[m]
		if !ok || g.Trigger != a.Trigger {
			return fmt.Errorf("member %s recorded as %+v (agent %v), want an agent with trigger %s", m, g, ok, a.Trigger)
		}
	}
	if want.Version > 1 && len(got.Agents) != len(want.Agents) {
		return fmt.Errorf("%d agents recorded, want %d", len(got.Agents), len(want.Agents))
	}
	if len(got.Events) != len(want.Events) {
		return fmt.Errorf("%d events recorded, want %d", len(got.Events), len(want.Events))
	}
	keepsTime := w.recordedFrom.replay != nil && w.recordedFrom.replay.imported
	for i, x := range want.Events {
		g := got.Events[i]
		if g.Sender != x.Sender || g.Type != x.Type || g.Thread != x.Thread || g.ReplyTo != x.ReplyTo || g.Edits != x.Edits ||
			g.ReactsTo != x.ReactsTo || g.Key != x.Key || (keepsTime && !g.Timestamp.Equal(x.Timestamp)) {
			return fmt.Errorf("event %d recorded as %+v, want %+v", i, g, x)
		}
		if len(g.Content) == 0 && len(x.Content) == 0 {
			continue
		}
		gc, err := json.Marshal(g.Content)
		if err != nil {
			return err
		}
		xc, err := json.Marshal(x.Content)
		if err != nil {
			return err
		}
		if !bytes.Equal(gc, xc) {
			return fmt.Errorf("event %d content %s, want %s", i, gc, xc)
		}
		if want.IsHistory(i) && got.Text(i) != want.Text(i) {
			return fmt.Errorf("event %d reads %q, want %q", i, got.Text(i), want.Text(i))
		}
	}
	return nil
}

func (w *world) stepRecordedThreads(roomName string) error {
	c, r, rec, err := w.okCallOnReplayed(roomName)
	if err != nil {
		return err
	}
	var want []expected
	for _, i := range rec.TopLevel() {
		x, err := w.recordedEntry(r, rec, i)
		if err != nil {
			return err
		}
		want = append(want, x)
	}
	for _, p := range w.posts {
		if p.room == r && p.root == p.id {
			x, err := w.postEntry(p)
			if err != nil {
				return err
			}
			want = append(want, x)
		}
	}
	// Newest first.
	for a, b := 0, len(want)-1; a < b; a, b = a+1, b-1 {
		want[a], want[b] = want[b], want[a]
	}
	l, err := c.list()
	if err != nil {
		return err
	}
	more, _ := c.body["has_more"].(bool)
	if len(l) > len(want) || (!more && len(l) != len(want)) {
		return fmt.Errorf("want %d entries (has_more %v), got %d:%s", len(want), more, len(l), diffIDs(wantIDs(want), l))
	}
	for k, e := range l {
		if err := want[k].check(e, true); err != nil {
			return fmt.Errorf("entry %d: %w:%s", k, err, diffIDs(wantIDs(want), l))
		}
	}
	return nil
}

func (w *world) stepRecordedThread(label, roomName string) error {
	c, r, rec, err := w.okCallOnReplayed(roomName)
	if err != nil {
		return err
	}
	root, err := rec.Find(label)
	if err != nil {
		return err
	}
	x, err := w.recordedEntry(r, rec, root)
	if err != nil {
		return err
	}
	x.root = x.id // the root carries its own id as thread_id in thread history
	want := []expected{x}
	for _, i := range rec.Replies(root) {
		x, err := w.recordedEntry(r, rec, i)
		if err != nil {
			return err
		}
		want = append(want, x)
	}
	for _, p := range w.posts {
		if p.room == r && p.root == r.seeded[root].id && p.id != p.root {
			x, err := w.postEntry(p)
			if err != nil {
				return err
			}
			want = append(want, x)
		}
	}
	l, err := c.list()
	if err != nil {
		return err
	}
	if len(l) != len(want) {
		return fmt.Errorf("thread %q of %s: want %d messages, got %d:%s", label, roomName, len(want), len(l), diffIDs(wantIDs(want), l))
	}
	for k, e := range l {
		if err := want[k].check(e, false); err != nil {
			return fmt.Errorf("message %d: %w", k, err)
		}
	}
	if more, _ := c.body["has_more"].(bool); more {
		return fmt.Errorf("the whole thread fits the page yet has_more is true")
	}
	return nil
}

func (w *world) stepRecordedHistory(roomName string) error {
	c, r, rec, err := w.okCallOnReplayed(roomName)
	if err != nil {
		return err
	}
	l, err := c.list()
	if err != nil {
		return err
	}
	pos := map[id.EventID]int{}
	for k, e := range l {
		s, _ := e["id"].(string)
		if _, dup := pos[id.EventID(s)]; dup {
			return fmt.Errorf("%s appears twice in the result", s)
		}
		pos[id.EventID(s)] = k
	}
	last := -1
	for i := range rec.Events {
		k, seen := pos[r.seeded[i].id]
		if !rec.IsHistory(i) {
			if seen {
				return fmt.Errorf("recorded event %d (%s) is not a message, yet it is entry %d", i, rec.Events[i].Type, k)
			}
			continue
		}
		if !seen {
			return fmt.Errorf("recorded event %d (%q) is missing from the result", i, rec.Text(i))
		}
		if k < last {
			return fmt.Errorf("recorded event %d is entry %d, before the previous recorded message (entry %d)", i, k, last)
		}
		last = k
		x, err := w.recordedEntry(r, rec, i)
		if err != nil {
			return err
		}
		if err := x.check(l[k], false); err != nil {
			return fmt.Errorf("entry %d: %w", k, err)
		}
	}
	return nil
}
