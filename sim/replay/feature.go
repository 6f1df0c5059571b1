package replay

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode/utf8"

	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/fakeagent"
	"github.com/zooid-dev/zooid/zooid/recording"
	"github.com/zooid-dev/zooid/zooid/trace"
)

// Feature writes a regression scenario for a recording that carries the
// daemon's trace: a Background that plays the recording (the agents answer
// with their recorded turns, the daemon makes its posts again), the recorded
// daemon restarts where the trace has them, and Then-steps for what the
// trace observed — who was prompted with what, what the agents posted where,
// how task threads ended — for a maintainer to edit into what should happen.
// ref is how the Background names the recording: a name in scenarios/ or a
// path.
func Feature(rec *recording.Recording, ref string) (string, error) {
	want, err := RecordedTrace(rec)
	if err != nil {
		return "", err
	}
	p, err := newPlan(rec, want)
	if err != nil {
		return "", err
	}
	room := roomName(rec)
	title := rec.Name
	if title == "" {
		title = room
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Feature: %s plays as recorded\n", oneLine(title))
	fmt.Fprintf(&b, "  Written by `zooid replay --feature` from %s. The Background plays the recording\n", ref)
	b.WriteString("  through the daemon: humans' events are sent as they were, the agents answer with the turns\n")
	b.WriteString("  the trace recorded, and the daemon makes its own posts again. The Then-steps say what the\n")
	b.WriteString("  recording observed; edit them into what should happen, so the scenario fails on the bug.\n\n")
	b.WriteString("  Background:\n")
	fmt.Fprintf(&b, "    Given %q is played from the recording %q\n", room, ref)
	restarts := 0
	for _, st := range p.steps {
		if st.restart {
			restarts++
		}
	}
	if restarts > 0 {
		b.WriteString("    And the daemon runs as its own process\n")
	}
	b.WriteString("\n  Scenario: the recording plays as it was recorded\n")
	first := true
	when := func(s string) {
		if first {
			b.WriteString("    When " + s + "\n")
			first = false
		} else {
			b.WriteString("    And " + s + "\n")
		}
	}
	// evRef names recording event i in a step: its label, else its index,
	// with a comment saying so (an index breaks when events are added).
	evRef := func(i int) string {
		if l := rec.Events[i].Label; l != "" {
			return l
		}
		b.WriteString(fmt.Sprintf("    # recording event %d has no label: the step names it by its index\n", i))
		return fmt.Sprint(i)
	}
	waits := turnsBeforeRestarts(p, want.Rooms[0].Records)
	played := -1
	restart := 0
	for _, st := range p.steps {
		if !st.restart {
			continue
		}
		if st.upTo > played {
			when(fmt.Sprintf("the recording of %q is played up to %q", room, evRef(st.upTo)))
			played = st.upTo
		}
		// The kill must land after the turns the recorded daemon had
		// started: a play step returns once the events are sent, before the
		// daemon has taken them up.
		if restart < len(waits) {
			for _, w := range waits[restart] {
				if w.index <= played {
					when(fmt.Sprintf("the trace of %q records %s prompted for the recorded event %q", room, w.agent, evRef(w.index)))
				}
			}
		}
		restart++
		when("the daemon is killed and started again")
	}
	// A recording that ends at the last restart (a shrunk one often does)
	// has nothing left to play, and the step would refuse to play nothing.
	if played < len(rec.Events)-1 {
		when(fmt.Sprintf("the recording of %q is played", room))
	}
	then := thens(p, room, want.Rooms[0].Records)
	for i, t := range then {
		if i == 0 {
			b.WriteString("    Then " + t + "\n")
		} else {
			b.WriteString("    And " + t + "\n")
		}
	}
	return b.String(), nil
}

// promptWait is a recorded turn a generated feature waits for the daemon to
// start: agent prompted for recording event index.
type promptWait struct {
	agent string
	index int
}

// turnsBeforeRestarts lists, for each recorded restart in order, the turns
// the recorded daemon started (prompted) since the previous start, on
// recording events, each once.
func turnsBeforeRestarts(p *plan, recs []trace.Record) [][]promptWait {
	index := map[id.EventID]int{}
	for _, pe := range p.events {
		if pe.index >= 0 {
			index[pe.rec.ID] = pe.index
		}
	}
	var out [][]promptWait
	var cur []promptWait
	seen := map[promptWait]bool{}
	started := false
	for _, r := range recs {
		switch {
		case r.Start != nil:
			if started && r.Start.Restart {
				out = append(out, cur)
				cur, seen = nil, map[promptWait]bool{}
			}
			started = true
		case r.Prompt != nil && r.Prompt.Trigger != "":
			i, ok := index[r.Prompt.Trigger]
			w := promptWait{r.Prompt.Agent, i}
			if ok && !seen[w] {
				seen[w] = true
				cur = append(cur, w)
			}
		}
	}
	return out
}

// WriteFeatureFile writes Feature(rec, ref) to path.
func WriteFeatureFile(path string, rec *recording.Recording, ref string) error {
	f, err := Feature(rec, ref)
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, []byte(f), 0o644); err != nil {
		return fmt.Errorf("writing the feature: %w", err)
	}
	return nil
}

// thens are the Then-steps of what the trace observed, in its order.
func thens(p *plan, room string, recs []trace.Record) []string {
	text := map[id.EventID]string{}
	for _, r := range recs {
		if r.Event != nil {
			text[r.Event.ID] = r.Event.Text
		}
		if r.Post != nil && r.Post.ID != "" {
			text[r.Post.ID] = r.Post.Text
		}
	}
	// A post step wants exactly one post of that text from the agent in the
	// room: say only what is unique, and never the scripted agent's default
	// reply, which the harness's barriers make it post too.
	type postKey struct {
		sender id.UserID
		text   string
	}
	posts := map[postKey]int{}
	for _, r := range recs {
		if po := r.Post; po != nil && po.Type == "m.room.message" {
			posts[postKey{po.Sender, po.Text}]++
		}
	}
	// "the thread of X" finds the first root containing X: say only roots
	// no other root's text contains.
	var roots []string
	for _, r := range recs {
		if r.Event != nil && r.Event.Thread == "" {
			roots = append(roots, r.Event.Text)
		}
	}
	unique := func(c string) bool {
		n := 0
		for _, t := range roots {
			if strings.Contains(t, c) {
				n++
			}
		}
		return n == 1
	}
	var out []string
	seen := map[string]bool{}
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, r := range recs {
		switch {
		case r.Event != nil:
			c := core(r.Event.Text)
			if c == "" {
				continue
			}
			for _, w := range r.Event.Woke {
				add(fmt.Sprintf("%s is prompted with %q", w.Agent, c))
			}
		case r.Post != nil && isProse(r.Post):
			po := r.Post
			who := p.name[po.Sender]
			root := core(text[po.Thread])
			if who == "" || root == "" || !unique(root) || posts[postKey{po.Sender, po.Text}] != 1 || po.Text == fakeagent.DefaultReply ||
				po.Text != strings.TrimSpace(po.Text) || strings.ContainsAny(po.Text, "\"\n") {
				continue
			}
			add(fmt.Sprintf("%s posts %q in the thread of %q", who, po.Text, root))
		case r.Task != nil && r.Task.Step == trace.StepClosed && isWord(r.Task.Status):
			add(fmt.Sprintf("the trace of %q records %s's task closed %s", room, r.Task.Agent, r.Task.Status))
		}
	}
	return out
}

// isProse says whether a post is an agent's own words in its thread (the
// daemon's m.notice for it), not a tool's post, a task root or an error.
func isProse(po *trace.Post) bool {
	return po.Type == "m.room.message" && po.MsgType == "m.notice" && strings.HasPrefix(po.TxnID, "zooid.") &&
		!strings.HasPrefix(po.Text, "⚠ ") && po.Error == "" && po.ID != ""
}

func isWord(s string) bool {
	for _, r := range s {
		if (r < 'a' || r > 'z') && r != '_' {
			return false
		}
	}
	return s != ""
}

// core is a step-sized piece of a message that holds on any server: user
// ids left out, the first line, up to a quote, at most 60 bytes on a word.
func core(s string) string {
	s = userRE.ReplaceAllString(s, "")
	s = strings.TrimSpace(strings.SplitN(s, "\n", 2)[0])
	if i := strings.IndexByte(s, '"'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 60 {
		cut := 60
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		if sp := strings.LastIndexByte(s[:cut], ' '); sp > 20 {
			cut = sp
		}
		s = s[:cut]
	}
	return strings.TrimSpace(s)
}

// roomName is how the feature names the played room: the recording's room,
// else its name or its first agent's first room when they read as a step's
// room name, else "#replayed".
func roomName(rec *recording.Recording) string {
	cands := []string{rec.Room, rec.Name}
	for _, m := range rec.Members {
		if a, ok := rec.Agents[m]; ok && len(a.Rooms) > 0 {
			cands = append(cands, a.Rooms[0])
		}
	}
	for _, c := range cands {
		if stepRoomRE.MatchString(c) {
			return c
		}
	}
	return "#replayed"
}

var stepRoomRE = regexp.MustCompile(`^#[a-z0-9-]+$`)

// FeatureRef is how a feature names the recording at path: its name when
// it lies in a scenarios/ directory (the steps look there), else the path.
func FeatureRef(path string) string {
	if filepath.Base(filepath.Dir(path)) == "scenarios" && strings.HasSuffix(path, ".json") {
		return strings.TrimSuffix(filepath.Base(path), ".json")
	}
	return path
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
