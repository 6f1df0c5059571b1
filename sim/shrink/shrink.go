package shrink

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/recording"
	"github.com/zooid-dev/zooid/zooid/trace"
)

// Fails says whether a candidate recording still fails the way the input
// did; for `zooid replay --shrink` it replays the candidate and asks SameWay.
// An error wrapping ErrCouldNotRun counts as not failing that way (the
// candidate is not kept) and is counted in Result.Failed; any other error
// stops the shrink.
type Fails func(ctx context.Context, rec *recording.Recording) (bool, error)

// ErrCouldNotRun marks a candidate a Fails could not test (its replay could
// not start, or was given up on).
var ErrCouldNotRun = errors.New("the candidate could not be tested")

// Result is a shrunk recording and what it took.
type Result struct {
	Recording *recording.Recording
	// Tests is how many candidates were tested (replayed); Cached how many
	// were answered without (met before, or equal to another after
	// closure); Failed how many of Tests could not run.
	Tests, Cached, Failed int
	// Units is how many units (see Recording) the shrunk recording keeps,
	// of InputUnits in the input.
	Units, InputUnits int
	// Minimal says the result is 1-minimal, shown by a test of each single
	// removal at the end: removing any one remaining unit or member loses
	// the failure. Unknown counts single removals that could not be tested;
	// Minimal is false when there are any.
	Minimal bool
	Unknown int
}

// Recording reduces rec to a smallest recording for which fails holds:
// ddmin over its members (a member removed takes its events with it), then
// over its units of events, then over the members again, then a test of
// each single removal, taking any that still fails, until none does (so the
// result is 1-minimal unless a test could not run).
//
// A unit is what belongs together and is never split (groupUnits): an
// agent's turn with the event that triggered it and what it posted; a task
// with its root, the thread under it, its result and notice, and the turns
// that delegated it and received its result; a turn cut short by a restart
// with the turn that redid it. An event that belongs to nothing else is a
// unit of its own. Whatever depends on a removed event goes with it too, so
// every candidate is a valid recording: the events relating to it (thread
// replies, replies, edits, reactions, other relations), the agents' turns
// it triggered or that ran in its thread (their prompt, tool calls, task
// steps, posts and turn end in the trace), and the events those turns
// posted. A removed agent is also taken out of the trace's routing
// decisions and start records, as if it had never been configured. fails
// must hold for rec itself; that is checked first.
func Recording(ctx context.Context, rec *recording.Recording, fails Fails) (*Result, error) {
	g, err := newGraph(rec)
	if err != nil {
		return nil, err
	}
	res := &Result{InputUnits: len(g.units)}
	cache := map[string]bool{}
	test := func(ctx context.Context, members, events []int) (bool, error) {
		cand, key := g.candidate(members, events)
		if v, ok := cache[key]; ok {
			res.Cached++
			return v, nil
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
		res.Tests++
		v, err := fails(ctx, cand)
		if errors.Is(err, ErrCouldNotRun) {
			res.Failed++
			v, err = false, nil
		}
		if err != nil {
			return false, err
		}
		cache[key] = v
		return v, nil
	}
	allM := seq(len(rec.Members))
	allE := seq(len(rec.Events))
	ok, err := test(ctx, allM, allE)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%s does not fail to begin with: nothing to shrink", rec.Path)
	}
	members, st, err := DDMinFrom(ctx, allM, func(ctx context.Context, keep []int) (bool, error) { return test(ctx, keep, allE) })
	res.Cached += st.Cached
	if err != nil {
		return nil, err
	}
	units, st, err := DDMinFrom(ctx, g.unitsOf(g.kept(members, allE)), func(ctx context.Context, keep []int) (bool, error) {
		return test(ctx, members, g.eventsOf(keep))
	})
	res.Cached += st.Cached
	if err != nil {
		return nil, err
	}
	members, st, err = DDMinFrom(ctx, members, func(ctx context.Context, keep []int) (bool, error) { return test(ctx, keep, g.eventsOf(units)) })
	res.Cached += st.Cached
	if err != nil {
		return nil, err
	}
	// The phases above can each leave what a later one made removable, and
	// a replay can answer differently twice; test each single removal.
	for {
		units = g.unitsOf(g.kept(members, g.eventsOf(units)))
		failedBefore := res.Failed
		var took bool
		for i := range units {
			rest := append(append([]int(nil), units[:i]...), units[i+1:]...)
			ok, err := test(ctx, members, g.eventsOf(rest))
			if err != nil {
				return nil, err
			}
			if ok {
				units, took = rest, true
				break
			}
		}
		for i := 0; !took && i < len(members); i++ {
			rest := append(append([]int(nil), members[:i]...), members[i+1:]...)
			ok, err := test(ctx, rest, g.eventsOf(units))
			if err != nil {
				return nil, err
			}
			if ok {
				members, took = rest, true
			}
		}
		if !took {
			res.Unknown = res.Failed - failedBefore
			break
		}
	}
	res.Minimal = res.Unknown == 0
	res.Units = len(units)
	res.Recording, _ = g.candidate(members, g.eventsOf(units))
	return res, nil
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// line is one trace line of the recording: a header (rec nil) or a record.
type line struct {
	raw json.RawMessage
	rec *trace.Record
}

// turnSpan is one agent turn in the trace: its lines, the event that
// triggered it and the thread it ran in (trace ids), and the recording
// events it posted.
type turnSpan struct {
	agent, trigger, thread string
	lines                  []int
	posted                 []int
	// tasks are the task threads (trace ids) whose steps the turn wrote: the
	// turn that delegated, and the caller's turn that got the result.
	tasks []string
	// ended says the trace holds the turn's end; a turn a kill cut short
	// has none, and its posts are what the daemon said of it after.
	ended bool
}

// graph is what depends on what in a recording and its trace.
type graph struct {
	rec     *recording.Recording
	lines   []line
	traceID []string       // recording event → the trace's id for it ("" if unmatched)
	byID    map[string]int // trace event id → recording event
	turns   []turnSpan
	// children[i] are the events that go when event i goes.
	children [][]int
	// unit[i] is the unit event i belongs to, an index into units: what is
	// kept or removed together (see units).
	unit  []int
	units [][]int
}

var serverRE = regexp.MustCompile(`@([A-Za-z0-9._=/+-]+):[A-Za-z0-9.-]+(?::\d+)?`)

func newGraph(rec *recording.Recording) (*graph, error) {
	g := &graph{rec: rec, traceID: make([]string, len(rec.Events)), byID: map[string]int{}, children: make([][]int, len(rec.Events))}
	for n, raw := range rec.Trace {
		var probe struct {
			Format string `json:"format"`
		}
		if err := json.Unmarshal(raw, &probe); err != nil {
			return nil, fmt.Errorf("%s: trace line %d: %w", rec.Path, n+1, err)
		}
		l := line{raw: raw}
		if probe.Format == "" {
			l.rec = &trace.Record{}
			if err := json.Unmarshal(raw, l.rec); err != nil {
				return nil, fmt.Errorf("%s: trace line %d: %w", rec.Path, n+1, err)
			}
		}
		g.lines = append(g.lines, l)
	}
	g.align()
	g.cutTurns()
	for i, e := range rec.Events {
		for _, p := range []int{e.Thread, e.ReplyTo, e.Edits, e.ReactsTo} {
			if p >= 0 {
				g.children[p] = append(g.children[p], i)
			}
		}
		if e.Other != nil {
			g.children[e.Other.Target] = append(g.children[e.Other.Target], i)
		}
	}
	g.groupUnits()
	for _, t := range g.turns {
		for _, parent := range []string{t.trigger, t.thread} {
			if p, ok := g.byID[parent]; ok {
				for _, k := range t.posted {
					if k != p {
						g.children[p] = append(g.children[p], k)
					}
				}
			}
		}
	}
	return g, nil
}

// sameSender says whether the trace's user is the recording's member: its
// localpart is the name, or ends in "-name" (a shared Synapse prefixes
// localparts).
func sameSender(user, name string) bool {
	lp := strings.TrimPrefix(user, "@")
	if i := strings.IndexByte(lp, ':'); i >= 0 {
		lp = lp[:i]
	}
	return lp == name || strings.HasSuffix(lp, "-"+name)
}

// align pairs the trace's event records with the recording's events in
// order: same type, sender and body, user ids in the trace's text read as
// @name. (State events, joins, are in the trace but not the recording.)
func (g *graph) align() {
	next := 0
	for _, l := range g.lines {
		if l.rec == nil || l.rec.Event == nil {
			continue
		}
		e := l.rec.Event
		text := serverRE.ReplaceAllString(e.Text, "@$1")
		for j := next; j < len(g.rec.Events); j++ {
			re := g.rec.Events[j]
			body, _ := re.Content["body"].(string)
			typ := re.Type
			if typ == "" {
				typ = recording.TypeMessage
			}
			if typ != e.Type || !sameSender(string(e.Sender), re.Sender) {
				continue
			}
			if body == e.Text || body == text || mentionsOf(text, body) {
				g.traceID[j] = string(e.ID)
				g.byID[string(e.ID)] = j
				next = j + 1
				break
			}
		}
	}
}

// mentionsOf says whether text is body with prefixed names (@h3f9a1-ori for
// @ori), as a shared Synapse writes them.
func mentionsOf(text, body string) bool {
	return prefixRE.ReplaceAllString(text, "@") == body
}

var prefixRE = regexp.MustCompile(`@[a-z0-9]+-`)

// sessionParts splits a session key "agent|room|thread".
func sessionParts(s string) (agent, thread string) {
	parts := strings.Split(s, "|")
	if len(parts) < 2 {
		return s, ""
	}
	return parts[0], parts[len(parts)-1]
}

// cutTurns finds each turn: a prompt, then its session's records up to the
// turn's end, and the session-less posts of the agent in that thread
// meanwhile (its prose, posted by the daemon for it).
func (g *graph) cutTurns() {
	for i, l := range g.lines {
		if l.rec == nil || l.rec.Prompt == nil {
			continue
		}
		p := l.rec.Prompt
		agent, thread := sessionParts(l.rec.Session)
		t := turnSpan{agent: agent, trigger: string(p.Trigger), thread: thread, lines: []int{i}}
		if t.trigger == "" {
			t.trigger = p.Turn
		}
	walk:
		for j := i + 1; j < len(g.lines); j++ {
			x := g.lines[j].rec
			switch {
			case x == nil:
			case x.Session == l.rec.Session && x.Prompt != nil:
				break walk
			case x.Session == l.rec.Session:
				t.lines = append(t.lines, j)
				if x.Post != nil {
					t.post(g, x.Post.ID)
				}
				if x.Task != nil && x.Task.Thread != "" {
					t.post(g, x.Task.Thread)
					t.tasks = append(t.tasks, string(x.Task.Thread))
				}
				if x.TurnEnd != nil {
					t.ended = true
					break walk
				}
			case x.Session == "" && x.Post != nil && sameSender(string(x.Post.Sender), agent) && string(x.Post.Thread) == thread:
				t.lines = append(t.lines, j)
				t.post(g, x.Post.ID)
			}
		}
		g.turns = append(g.turns, t)
	}
}

func (t *turnSpan) post(g *graph, id id.EventID) {
	if k, ok := g.byID[string(id)]; ok {
		t.posted = append(t.posted, k)
	}
}

// kept is events minus what goes with the events and members left out.
func (g *graph) kept(members, events []int) []int {
	inM := map[string]bool{}
	for _, m := range members {
		inM[g.rec.Members[m]] = true
	}
	keep := make([]bool, len(g.rec.Events))
	for _, i := range events {
		keep[i] = inM[g.rec.Events[i].Sender]
	}
	// Children come after their parents except posts of turns, which the
	// closure reaches from either side, and a unit goes whole whichever of
	// its events goes first; iterate to a fixed point.
	for changed := true; changed; {
		changed = false
		for i := range g.rec.Events {
			if keep[i] {
				continue
			}
			for _, c := range g.children[i] {
				if keep[c] {
					keep[c], changed = false, true
				}
			}
			for _, c := range g.units[g.unit[i]] {
				if keep[c] {
					keep[c], changed = false, true
				}
			}
		}
	}
	var out []int
	for i, k := range keep {
		if k {
			out = append(out, i)
		}
	}
	return out
}

// candidate is the recording with only members and events (closed), its
// trace cut to match, and a key naming it for the cache.
func (g *graph) candidate(members, events []int) (*recording.Recording, string) {
	rec := g.rec
	events = g.kept(members, events)
	out := &recording.Recording{Path: rec.Path, Version: recording.Version, Name: rec.Name, Room: rec.Room,
		Agents: map[string]recording.Agent{}, LeftOut: rec.LeftOut}
	gone := map[string]bool{}
	for _, m := range members {
		name := rec.Members[m]
		out.Members = append(out.Members, name)
		if a, ok := rec.Agents[name]; ok {
			out.Agents[name] = a
		}
	}
	for name := range rec.Agents {
		if _, ok := out.Agents[name]; !ok {
			gone[name] = true
		}
	}
	newIndex := make([]int, len(rec.Events))
	for i := range newIndex {
		newIndex[i] = -1
	}
	for n, i := range events {
		newIndex[i] = n
	}
	removedID := map[string]bool{}
	for i, tid := range g.traceID {
		if newIndex[i] < 0 && tid != "" {
			removedID[tid] = true
		}
	}
	re := func(i int) int {
		if i < 0 {
			return -1
		}
		return newIndex[i]
	}
	for _, i := range events {
		e := rec.Events[i]
		e.Thread, e.ReplyTo, e.Edits, e.ReactsTo = re(e.Thread), re(e.ReplyTo), re(e.Edits), re(e.ReactsTo)
		if e.Other != nil {
			o := *e.Other
			o.Target = re(o.Target)
			e.Other = &o
		}
		out.Events = append(out.Events, e)
	}
	// The trace: drop the removed events' records, the turns they triggered
	// or that ran in their threads, and the removed agents' part.
	drop := make([]bool, len(g.lines))
	for _, t := range g.turns {
		if removedID[t.trigger] || removedID[t.thread] || gone[t.agent] || anyOf(removedID, t.tasks) {
			for _, j := range t.lines {
				drop[j] = true
			}
		}
	}
	for j, l := range g.lines {
		if drop[j] {
			continue
		}
		if l.rec == nil {
			out.Trace = append(out.Trace, l.raw)
			continue
		}
		r := *l.rec
		agent, thread := sessionParts(r.Session)
		switch {
		case r.Session != "" && (gone[agent] || removedID[thread]):
			continue
		case r.Event != nil && removedID[string(r.Event.ID)]:
			continue
		case r.Post != nil && removedID[string(r.Post.ID)]:
			continue
		case r.Task != nil && (removedID[string(r.Task.Thread)] || gone[r.Task.Agent]):
			continue
		case r.Agent != nil && gone[r.Agent.Agent]:
			continue
		case r.Event != nil && len(gone) > 0 && (len(r.Event.Woke) > 0 || r.Event.Decision != nil && gone[r.Event.Decision.TaskRoot]):
			ev := *r.Event
			ev.Woke = nil
			for _, w := range r.Event.Woke {
				if !gone[w.Agent] {
					ev.Woke = append(ev.Woke, w)
				}
			}
			if len(ev.Woke) == 0 && len(r.Event.Woke) > 0 {
				ev.Nobody = trace.WhyNotNotified
			}
			if d := r.Event.Decision; d != nil && gone[d.TaskRoot] {
				// No task of an agent that is not configured is journaled.
				nd := *d
				nd.TaskRoot = ""
				ev.Decision = &nd
			}
			r.Event = &ev
			out.Trace = append(out.Trace, mustJSON(r))
		case r.Start != nil && len(gone) > 0:
			st := *r.Start
			st.Agents = nil
			for _, a := range r.Start.Agents {
				if !gone[a] {
					st.Agents = append(st.Agents, a)
				}
			}
			r.Start = &st
			out.Trace = append(out.Trace, mustJSON(r))
		default:
			out.Trace = append(out.Trace, l.raw)
		}
	}
	return out, fmt.Sprint(members, events)
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("a trace record that was read does not encode: %v", err))
	}
	return b
}

// maskRE finds what differs from run to run in a difference's text: event
// and room ids (and the session keys and threads made of them), the
// daemon's txn, turn and attempt ids, timestamps and record counts.
var maskRE = regexp.MustCompile(`[$][^\s",;)|]+` +
	`|![A-Za-z0-9._=+/-]+:[A-Za-z0-9.-]+(?::\d+)?` +
	`|zooid[.-][0-9a-f]{8,}|internal\.[0-9a-f]{8,}|zt[0-9a-f]{32}|zh[0-9A-Z]{24,}` +
	`|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)|\d+ records`)

// Signature is a difference with what differs from run to run masked: its
// room, its stream and what it says, with event, room, txn and attempt ids,
// timestamps and record counts replaced by "…". Names, agents, tools,
// decisions and texts stay.
func Signature(d trace.Difference) string {
	m := func(s string) string { return maskRE.ReplaceAllString(s, "…") }
	return m(d.Room) + "\x1f" + m(d.Stream) + "\x1f" + m(d.What)
}

// SameWay says whether a candidate's diff diverges exactly the way the
// original's did: the same differences, by Signature, as many times each —
// none missing and none more. A candidate that differs in more ways (a
// prompt that showed a removed message, a turn whose trigger is gone) is not
// the same failure: its shrunk recording would show what the input never
// did.
func SameWay(original, candidate trace.Diff) bool {
	if len(original) == 0 || len(original) != len(candidate) {
		return false
	}
	have := map[string]int{}
	for _, d := range candidate {
		have[Signature(d)]++
	}
	for _, d := range original {
		s := Signature(d)
		if have[s] == 0 {
			return false
		}
		have[s]--
	}
	return true
}
