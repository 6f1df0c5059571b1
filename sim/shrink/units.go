package shrink

import (
	"slices"
	"sort"
	"strings"
)

// groupUnits joins into units what a shrink keeps or removes together, so
// that no candidate splits it (a split one replays with differences the
// input never had, or stalls waiting for a turn nothing causes):
//   - a task: its root, everything in the thread under the root (the
//     assignee's turns and posts, replies, the dev.zooid.* result), the posts
//     of its attempt (the notice in the caller's thread), the turn that
//     delegated it with the event that triggered that turn, and the caller's
//     turn that got the result with what it posted;
//   - a restart with what it interrupted: the event whose turn a kill cut
//     short, with what the daemon posted of that turn after the restart
//     (its error, the notice that the agent was interrupted) and the turn
//     that redid it, which has the same trigger. (The restart itself is a
//     step of the replay, made from the trace's start records; it is never
//     removed.)
//
// Every other event is a unit of its own. An agent's prose can go alone:
// its turn stays, prompted as recorded, and says less. An event that
// triggered a turn takes the turn and its posts with it (closure, in kept).
func (g *graph) groupUnits() {
	n := len(g.rec.Events)
	parent := seq(n)
	var find func(int) int
	find = func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	union := func(a, b int) {
		ra, rb := find(a), find(b)
		if ra == rb {
			return
		}
		if rb < ra {
			ra, rb = rb, ra
		}
		parent[rb] = ra
	}
	attempts := map[string]string{} // a task's attempt → its thread
	for _, l := range g.lines {
		if l.rec != nil && l.rec.Task != nil && l.rec.Task.Thread != "" && l.rec.Task.Attempt != "" {
			attempts[l.rec.Task.Attempt] = string(l.rec.Task.Thread)
		}
	}
	// The caller's turn on a task's result is woken by the daemon, not by an
	// event: its prompt names the task's thread.
	for ti := range g.turns {
		t := &g.turns[ti]
		if _, ok := g.byID[t.trigger]; ok {
			continue
		}
		if p := g.lines[t.lines[0]].rec.Prompt; p != nil {
			for _, thread := range attempts {
				if strings.Contains(p.Text, thread) && !slices.Contains(t.tasks, thread) {
					t.tasks = append(t.tasks, thread)
				}
			}
		}
	}
	for _, t := range g.turns {
		var together []int
		for _, task := range t.tasks {
			if k, ok := g.byID[task]; ok {
				together = append(together, k)
			}
		}
		if k, ok := g.byID[t.trigger]; ok {
			together = append(together, k)
		}
		for _, k := range together {
			union(together[0], k)
		}
		// A turn with no trigger of its own (the caller's turn on a task's
		// result) goes with its task, and so does what it posted; a turn a
		// restart cut short goes with what the daemon posted of it after
		// (the error and the notice that it was interrupted), which a
		// replay's restart posts again whatever the recording holds.
		if _, ok := g.byID[t.trigger]; (!ok || !t.ended) && len(together) > 0 {
			for _, k := range t.posted {
				union(together[0], k)
			}
		}
	}
	for attempt, thread := range attempts {
		root, ok := g.byID[thread]
		if !ok {
			continue
		}
		for i, e := range g.rec.Events {
			if e.Thread == root {
				union(root, i)
			}
		}
		for _, l := range g.lines {
			if l.rec == nil || l.rec.Post == nil || !strings.HasPrefix(l.rec.Post.TxnID, attempt) {
				continue
			}
			if k, ok := g.byID[string(l.rec.Post.ID)]; ok {
				union(root, k)
			}
		}
	}
	g.unit = make([]int, n)
	byRoot := map[int]int{}
	for i := range n {
		r := find(i)
		u, ok := byRoot[r]
		if !ok {
			u = len(g.units)
			byRoot[r] = u
			g.units = append(g.units, nil)
		}
		g.unit[i] = u
		g.units[u] = append(g.units[u], i)
	}
}

// unitsOf are the units all of whose events are in events, in order.
func (g *graph) unitsOf(events []int) []int {
	in := map[int]bool{}
	for _, e := range events {
		in[e] = true
	}
	var out []int
	for u, evs := range g.units {
		all := len(evs) > 0
		for _, e := range evs {
			all = all && in[e]
		}
		if all {
			out = append(out, u)
		}
	}
	return out
}

// eventsOf are the events of units, in order.
func (g *graph) eventsOf(units []int) []int {
	var out []int
	for _, u := range units {
		out = append(out, g.units[u]...)
	}
	sort.Ints(out)
	return out
}

func anyOf(set map[string]bool, keys []string) bool {
	for _, k := range keys {
		if set[k] {
			return true
		}
	}
	return false
}
