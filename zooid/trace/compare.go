package trace

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Difference is one way got departs from want.
type Difference struct {
	// Room is the want room's alias (or id).
	Room string
	// Stream names the sequence the records belong to: "routing", a session
	// ("session agent-a in thread $…"), a sender's posts, or a task thread.
	Stream string
	// What says what differs, naming want's and got's ids.
	What string
}

func (d Difference) String() string {
	return fmt.Sprintf("%s, %s: %s", d.Room, d.Stream, d.What)
}

// Diff is what Compare found; empty when the traces agree.
type Diff []Difference

func (d Diff) String() string {
	var b strings.Builder
	for _, x := range d {
		b.WriteString(x.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// Compare diffs two traces: routing decisions, prompts, tool calls and
// results, posts and task steps. Ids that differ from run to run (event,
// thread, room and user ids, session keys, txn ids, history cursors) are
// mapped as the traces are walked — the first id met in want is paired with
// the id at the same place in got, and a pairing once made must hold
// everywhere — so two runs of one room on different homeservers compare
// equal. Timestamps are ignored.
//
// Records are compared per stream, in order within each: the room's events
// with their routing decisions first, then each session's prompts, tool calls
// and turn ends, each sender's posts per thread, and each task thread's steps.
// Streams run concurrently in the daemon, so their interleaving is not
// compared; within a stream, records whose order is itself a race (two task
// roots posted at once) are paired by content before position.
func Compare(want, got *Trace) Diff {
	c := &comparer{m: newIDMap()}
	for _, pair := range c.pairRooms(want, got) {
		c.compareRoom(pair.w, pair.g)
	}
	return c.diff
}

type comparer struct {
	m    *idMap
	diff Diff
	room string
}

type roomPair struct{ w, g *Room }

// pairRooms pairs rooms by alias, then by order among the rest.
func (c *comparer) pairRooms(want, got *Trace) []roomPair {
	var out []roomPair
	usedG := map[int]bool{}
	var restW []*Room
	for i := range want.Rooms {
		w := &want.Rooms[i]
		found := false
		for j := range got.Rooms {
			if !usedG[j] && w.Alias != "" && got.Rooms[j].Alias == w.Alias {
				usedG[j] = true
				out = append(out, roomPair{w, &got.Rooms[j]})
				found = true
				break
			}
		}
		if !found {
			restW = append(restW, w)
		}
	}
	for _, w := range restW {
		found := false
		for j := range got.Rooms {
			if !usedG[j] {
				usedG[j] = true
				out = append(out, roomPair{w, &got.Rooms[j]})
				found = true
				break
			}
		}
		if !found {
			out = append(out, roomPair{w, nil})
		}
	}
	for j := range got.Rooms {
		if !usedG[j] {
			out = append(out, roomPair{nil, &got.Rooms[j]})
		}
	}
	return out
}

func roomName(r *Room) string {
	if r.Alias != "" {
		return r.Alias
	}
	return string(r.ID)
}

func (c *comparer) add(stream, format string, args ...any) {
	c.diff = append(c.diff, Difference{Room: c.room, Stream: stream, What: fmt.Sprintf(format, args...)})
}

func (c *comparer) compareRoom(w, g *Room) {
	switch {
	case w == nil:
		c.room = roomName(g)
		c.add("room", "got a room want does not have (%s, %d records)", g.ID, len(g.Records))
		return
	case g == nil:
		c.room = roomName(w)
		c.add("room", "want has a room got does not (%s, %d records)", w.ID, len(w.Records))
		return
	}
	c.room = roomName(w)
	c.m.unify([][2]string{{string(w.ID), string(g.ID)}})
	ws, gs := streams(w.Records), streams(g.Records)
	usedG := map[int]bool{}
	for _, s := range ws {
		j := c.matchStream(s, gs, usedG)
		if j < 0 {
			c.align(s.label, s.recs, nil)
			continue
		}
		usedG[j] = true
		c.align(s.label, s.recs, gs[j].recs)
	}
	for j, s := range gs {
		if !usedG[j] {
			c.align(s.label, nil, s.recs)
		}
	}
}

type stream struct {
	key   string // with ids in it, matched through the map
	label string
	recs  []Record
}

// streams splits a room's records; the routing stream comes first so the ids
// it pairs name the others' threads and sessions.
func streams(recs []Record) []stream {
	idx := map[string]int{}
	var out []stream
	add := func(key, label string, r Record) {
		i, ok := idx[key]
		if !ok {
			i = len(out)
			idx[key] = i
			out = append(out, stream{key: key, label: label})
		}
		out[i].recs = append(out[i].recs, r)
	}
	add("routing", "routing", Record{Kind: "none"}) // keep it first
	out[0].recs = nil
	for _, r := range recs {
		switch {
		case r.Kind == KindEvent:
			add("routing", "routing", r)
		case r.Kind == KindStart:
			add("starts", "daemon starts", r)
		case r.Kind == KindPost && r.Post != nil:
			where := "top level"
			if r.Post.Thread != "" {
				where = "thread " + string(r.Post.Thread)
			}
			add("posts "+string(r.Post.Sender)+" "+string(r.Post.Thread), "posts by "+string(r.Post.Sender)+" in "+where, r)
		case r.Session != "":
			add("session "+r.Session, "session "+sessionLabel(r.Session), r)
		case r.Kind == KindTask && r.Task != nil:
			add("task "+string(r.Task.Thread), "task thread "+string(r.Task.Thread), r)
		default:
			add("other "+string(r.Kind), string(r.Kind), r)
		}
	}
	if len(out[0].recs) == 0 {
		out = out[1:]
	}
	return out
}

func sessionLabel(key string) string {
	parts := strings.SplitN(key, "|", 3)
	if len(parts) != 3 {
		return key
	}
	if parts[2] == "" {
		return parts[0] + " (no thread)"
	}
	return parts[0] + " in thread " + parts[2]
}

// matchStream finds the got stream whose key matches s's through the map.
func (c *comparer) matchStream(s stream, gs []stream, used map[int]bool) int {
	wk := norm(s.key)
	for j, g := range gs {
		if used[j] {
			continue
		}
		gk := norm(g.key)
		if wk.skel == gk.skel && c.m.fits(wk.ids, gk.ids) {
			c.m.unify(pairs(wk.ids, gk.ids))
			return j
		}
	}
	return -1
}

// align pairs the records of one stream: by identity first (so a race in
// order is no difference), else by position; then compares their outcomes.
func (c *comparer) align(label string, want, got []Record) {
	used := make([]bool, len(got))
	for i, w := range want {
		wi := identity(w)
		j := -1
		for k, g := range got {
			if used[k] {
				continue
			}
			gi := identity(g)
			if wi.skel == gi.skel && c.m.fits(wi.ids, gi.ids) {
				j = k
				break
			}
		}
		if w.Prompt != nil && j >= 0 {
			// A prompt is its agent's in its session, so every prompt of the
			// session has its identity; which of them came first is a race
			// when they wake the agent for things that ended at once (two
			// task results for one caller). Pair it with the same prompt
			// wherever it is, and only then with the next one.
			if k := c.samePrompt(w, wi, got, used); k >= 0 {
				j = k
			}
		}
		if j < 0 {
			k0 := -1
			for k := range got {
				if !used[k] {
					k0 = k
					break
				}
			}
			if k0 >= 0 && got[k0].Kind == w.Kind && !c.laterMatch(got[k0], want[i+1:]) {
				// The same step, changed.
				used[k0] = true
				c.add(label, "want %s; got %s", describe(w), describe(got[k0]))
				continue
			}
			c.add(label, "missing: %s", describe(w))
			continue
		}
		used[j] = true
		g := got[j]
		gi := identity(g)
		c.m.unify(pairs(wi.ids, gi.ids))
		w, g = comparable(w, g)
		wo, gout := outcome(w), outcome(g)
		if wo.skel != gout.skel || !c.m.fits(wo.ids, gout.ids) {
			c.add(label, "%s: want %s; got %s", describe(w), outcomeText(w), outcomeText(g))
			continue
		}
		c.m.unify(pairs(wo.ids, gout.ids))
	}
	for k, g := range got {
		if !used[k] {
			c.add(label, "unexpected: %s", describe(g))
		}
	}
}

// samePrompt finds the unused prompt in got with w's identity and text,
// ids mapped, or -1.
func (c *comparer) samePrompt(w Record, wi normed, got []Record, used []bool) int {
	for k, g := range got {
		if used[k] || g.Prompt == nil {
			continue
		}
		gi := identity(g)
		if wi.skel != gi.skel || !c.m.fits(wi.ids, gi.ids) {
			continue
		}
		w2, g2 := comparable(w, g)
		wo, gout := outcome(w2), outcome(g2)
		if wo.skel == gout.skel && c.m.fits(append(append([]string(nil), wi.ids...), wo.ids...), append(append([]string(nil), gi.ids...), gout.ids...)) {
			return k
		}
	}
	return -1
}

// laterMatch says whether g is the identity of a record still to come in want.
func (c *comparer) laterMatch(g Record, rest []Record) bool {
	gi := identity(g)
	for _, w := range rest {
		wi := identity(w)
		if wi.skel == gi.skel && c.m.fits(wi.ids, gi.ids) {
			return true
		}
	}
	return false
}

// norm is text with its run-dependent parts taken out: ids become a marker
// in skel and are listed in ids; timestamps become a marker.
type normed struct {
	skel string
	ids  []string
}

var (
	// Matrix ids (event, room, alias, user), txn ids and opaque cursors.
	idPattern = regexp.MustCompile(`"(?:next_before|before)":"([^"]*)"` +
		`|([$][A-Za-z0-9._=+/-]{8,}(?::[A-Za-z0-9.-]+(?::\d+)?)?` +
		`|[!#][A-Za-z0-9._=+/-]+:[A-Za-z0-9.-]+(?::\d+)?` +
		`|@[A-Za-z0-9._=+/-]+:[A-Za-z0-9.-]+(?::\d+)?` +
		`|zooid[.-](?:mcp-)?[0-9A-Za-z]{24,}|internal\.[0-9A-Za-z]{24,}|z[th][0-9A-Za-z]{24,})` +
		`|(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d))`)
)

func norm(s string) normed {
	var b strings.Builder
	var ids []string
	last := 0
	for _, m := range idPattern.FindAllStringSubmatchIndex(s, -1) {
		switch {
		case m[2] >= 0: // a cursor: its value is an id
			b.WriteString(s[last:m[2]])
			b.WriteString("\x00id")
			ids = append(ids, s[m[2]:m[3]])
			last = m[3]
		case m[4] >= 0:
			b.WriteString(s[last:m[4]])
			b.WriteString("\x00id")
			ids = append(ids, s[m[4]:m[5]])
			last = m[5]
		case m[6] >= 0:
			b.WriteString(s[last:m[6]])
			b.WriteString("\x00time")
			last = m[7]
		}
	}
	b.WriteString(s[last:])
	return normed{skel: b.String(), ids: ids}
}

// join normalises several fields as one text.
func join(parts ...string) normed {
	return norm(strings.Join(parts, "\x1f"))
}

// identity is what names a record within its stream (which event, which
// call); outcome is what the daemon did with it.
func identity(r Record) normed {
	switch {
	case r.Event != nil:
		e := r.Event
		return join(string(r.Kind), string(e.ID), string(e.Sender), e.Type, e.MsgType, string(e.Thread), e.Text)
	case r.Prompt != nil:
		return join(string(r.Kind), r.Prompt.Agent)
	case r.Tool != nil:
		return join(string(r.Kind), r.Tool.Agent, r.Tool.Tool, r.Tool.Args)
	case r.Post != nil:
		p := r.Post
		return join(string(r.Kind), string(p.Sender), p.Type, p.MsgType, string(p.Thread), p.Text)
	case r.Task != nil:
		return join(string(r.Kind), r.Task.Step, r.Task.Agent, r.Task.Caller)
	case r.Agent != nil:
		return join(string(r.Kind), r.Agent.Agent)
	case r.TurnEnd != nil:
		return join(string(r.Kind), r.TurnEnd.Agent)
	case r.Start != nil:
		return join(string(r.Kind))
	}
	return join(string(r.Kind))
}

// comparable is w and g as far as both recorded them: of two event records,
// one written before the decision was recorded, only whom each woke.
func comparable(w, g Record) (Record, Record) {
	if w.Event == nil || g.Event == nil || (w.Event.Decision == nil) == (g.Event.Decision == nil) {
		return w, g
	}
	we, ge := *w.Event, *g.Event
	we.Decision, ge.Decision = nil, nil
	w.Event, g.Event = &we, &ge
	return w, g
}

func outcome(r Record) normed {
	switch {
	case r.Event != nil:
		var parts []string
		for _, w := range r.Event.Woke {
			parts = append(parts, w.Agent, w.Why, string(w.Thread))
		}
		parts = append(parts, r.Event.Nobody)
		if d := r.Event.Decision; d != nil {
			parts = append(parts, "decided", fmt.Sprint(d.Reset), fmt.Sprint(d.Recall), d.TaskRoot)
		}
		return join(parts...)
	case r.Prompt != nil:
		return join(string(r.Prompt.Trigger), r.Prompt.Text, fmt.Sprint(r.Prompt.Fresh))
	case r.Tool != nil:
		return join(r.Tool.Result, r.Tool.Error)
	case r.Post != nil:
		return join(string(r.Post.ID), r.Post.TxnID, r.Post.Error)
	case r.Task != nil:
		return join(string(r.Task.Thread), r.Task.Status, r.Task.Reason, r.Task.Output)
	case r.Agent != nil:
		return join(r.Agent.What)
	case r.TurnEnd != nil:
		return join(r.TurnEnd.Stop, r.TurnEnd.Error)
	case r.Start != nil:
		a := append([]string(nil), r.Start.Agents...)
		sort.Strings(a)
		return join(strings.Join(a, ","), fmt.Sprint(r.Start.Restart))
	}
	return join()
}

// describe names a record for a reader: what it is and which ids it carries.
func describe(r Record) string {
	switch {
	case r.Event != nil:
		e := r.Event
		where := ""
		if e.Thread != "" {
			where = " in thread " + string(e.Thread)
		}
		return fmt.Sprintf("event %s from %s%s %q", e.ID, e.Sender, where, short(e.Text))
	case r.Prompt != nil:
		return fmt.Sprintf("prompt to %s %q", r.Prompt.Agent, short(r.Prompt.Text))
	case r.Tool != nil:
		return fmt.Sprintf("%s called %s %s", r.Tool.Agent, r.Tool.Tool, short(r.Tool.Args))
	case r.Post != nil:
		p := r.Post
		return fmt.Sprintf("post %s by %s (%s %s) %q", p.ID, p.Sender, p.Type, p.MsgType, short(p.Text))
	case r.Task != nil:
		t := r.Task
		s := fmt.Sprintf("task %s of %s", t.Step, t.Agent)
		if t.Thread != "" {
			s += " (thread " + string(t.Thread) + ")"
		}
		if t.Status != "" || t.Reason != "" {
			s += " " + strings.TrimSpace(t.Status+" "+t.Reason)
		}
		return s
	case r.Agent != nil:
		return fmt.Sprintf("agent %s %s", r.Agent.Agent, r.Agent.What)
	case r.TurnEnd != nil:
		return fmt.Sprintf("turn of %s ended %s%s", r.TurnEnd.Agent, r.TurnEnd.Stop, r.TurnEnd.Error)
	case r.Start != nil:
		return "daemon start"
	}
	return string(r.Kind)
}

// outcomeText says what the daemon did with a record.
func outcomeText(r Record) string {
	switch {
	case r.Event != nil:
		s := "woke nobody (" + r.Event.Nobody + ")"
		if len(r.Event.Woke) > 0 {
			var ws []string
			for _, w := range r.Event.Woke {
				ws = append(ws, fmt.Sprintf("%s (%s, thread %s)", w.Agent, w.Why, w.Thread))
			}
			s = "woke " + strings.Join(ws, ", ")
		}
		if d := r.Event.Decision.String(); d != "" {
			s += "; " + d
		}
		return s
	case r.Prompt != nil:
		return fmt.Sprintf("%q", short(r.Prompt.Text))
	case r.Tool != nil:
		if r.Tool.Error != "" {
			return "error " + short(r.Tool.Error)
		}
		return "result " + short(r.Tool.Result)
	case r.Post != nil:
		if r.Post.Error != "" {
			return "failed: " + r.Post.Error
		}
		return "posted " + string(r.Post.ID) + " (txn " + r.Post.TxnID + ")"
	case r.Task != nil:
		return describe(r)
	case r.TurnEnd != nil:
		if r.TurnEnd.Error != "" {
			return "error " + r.TurnEnd.Error
		}
		return "stop " + r.TurnEnd.Stop
	}
	return describe(r)
}

func short(s string) string {
	const n = 200
	if len(s) <= n {
		return s
	}
	t, _ := Bound(s, n)
	return t + "…"
}

// idMap is the bijection between want's and got's run-dependent ids.
type idMap struct {
	fwd, back map[string]string
}

func newIDMap() *idMap { return &idMap{fwd: map[string]string{}, back: map[string]string{}} }

func pairs(w, g []string) [][2]string {
	out := make([][2]string, 0, len(w))
	for i := range w {
		out = append(out, [2]string{w[i], g[i]})
	}
	return out
}

// fits says whether w and g can be paired id by id without breaking the map.
func (m *idMap) fits(w, g []string) bool {
	if len(w) != len(g) {
		return false
	}
	fwd, back := map[string]string{}, map[string]string{}
	for i := range w {
		a, b := w[i], g[i]
		if x, ok := m.fwd[a]; ok && x != b {
			return false
		}
		if x, ok := m.back[b]; ok && x != a {
			return false
		}
		if x, ok := fwd[a]; ok && x != b {
			return false
		}
		if x, ok := back[b]; ok && x != a {
			return false
		}
		fwd[a], back[b] = b, a
	}
	return true
}

// unify records pairs that fit; it is called only after fits.
func (m *idMap) unify(ps [][2]string) {
	for _, p := range ps {
		if _, ok := m.fwd[p[0]]; ok {
			continue
		}
		if _, ok := m.back[p[1]]; ok {
			continue
		}
		m.fwd[p[0]], m.back[p[1]] = p[1], p[0]
	}
}
