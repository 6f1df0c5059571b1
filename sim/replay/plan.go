package replay

import (
	"fmt"
	"regexp"
	"strings"

	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/recording"
	"github.com/zooid-dev/zooid/zooid/trace"
)

// plan is what a replay will do, worked out from the recording and its
// trace before anything starts.
type plan struct {
	want     *trace.Trace
	wantRoom id.RoomID
	// server is the recorded server name; users keep their recorded ids,
	// so mentions and texts need no mapping.
	server string
	alias  string   // the played room
	rooms  []string // every room to create, the played one first
	agents []string // recorded agents, in member order
	// agentRooms are each agent's rooms (aliases), the played one first.
	agentRooms map[string][]string
	// stepRoom names each recorded room alias (full, as the trace and the
	// tool calls spell it) the way steps do: "#ops", "#dev".
	stepRoom map[string]string
	user     map[string]id.UserID // each member's recorded user id
	name     map[id.UserID]string // and back
	posted   map[id.EventID]bool  // recorded events the daemon posted
	made     map[int]bool         // recording events the daemon posted
	events   []plannedEvent       // the recorded trace's events, in order
	seed     []int                // recording events sent before the daemon starts
	steps    []step
	total    map[trace.Kind]int
	turns    map[string][]*turn // each agent's recorded turns, in prompt order
}

// plannedEvent is one event record of the recorded trace and the recording
// event it is (index -1 when none is).
type plannedEvent struct {
	rec   *trace.Event
	key   string
	index int
}

// step is a push of a recording event or a daemon restart, after the run
// has at least want records of each kind.
type step struct {
	event   int
	restart bool
	upTo    int // for a restart: the last recording event before it (-1: none)
	want    map[trace.Kind]int
	what    string
}

// turn is one recorded prompt turn of an agent.
type turn struct {
	key     string // the prompt text, ids masked
	prompt  string
	cut     bool // the recorded daemon was killed during the turn
	actions []action
	used    bool
}

// action is one thing the agent did in a recorded turn.
type action struct {
	say   string
	tool  string
	args  string
	crash bool
	hang  bool
	stop  string
}

func newPlan(rec *recording.Recording, want *trace.Trace) (*plan, error) {
	room := want.Rooms[0]
	p := &plan{want: want, wantRoom: room.ID, user: map[string]id.UserID{},
		agentRooms: map[string][]string{}, made: map[int]bool{}, turns: map[string][]*turn{}, total: map[trace.Kind]int{}}
	p.users(rec, room.Records)
	p.roomsOf(rec, room.Alias)
	if err := p.align(rec, room.Records); err != nil {
		return nil, err
	}
	p.turnsOf(room.Records)
	return p, nil
}

// users gives each member the user id the trace shows it had (a Synapse run
// prefixes localparts), else @name:server.
func (p *plan) users(rec *recording.Recording, recs []trace.Record) {
	var seen []id.UserID
	add := func(u id.UserID) {
		if u != "" && !slicesContains(asStrings(seen), string(u)) {
			seen = append(seen, u)
		}
	}
	for _, r := range recs {
		switch {
		case r.Event != nil:
			add(r.Event.Sender)
		case r.Post != nil:
			add(r.Post.Sender)
		}
	}
	// A member that sent nothing the trace kept (an agent whose posts a
	// shrink removed) is still named where it is mentioned.
	for _, r := range recs {
		if r.Event != nil {
			for _, u := range userRE.FindAllString(r.Event.Text, -1) {
				add(id.UserID(u))
			}
		}
	}
	p.server = "localhost"
	if len(seen) > 0 {
		p.server = seen[0].Homeserver()
	}
	for _, m := range rec.Members {
		var best id.UserID
		for _, u := range seen {
			lp := strings.ToLower(u.Localpart())
			if lp == m {
				best = u
				break
			}
			if strings.HasSuffix(lp, "-"+m) && best == "" {
				best = u
			}
		}
		if best == "" {
			best = id.NewUserID(m, p.server)
		}
		p.user[m] = best
		if _, ok := rec.Agents[m]; ok {
			p.agents = append(p.agents, m)
		}
	}
}

func asStrings(us []id.UserID) []string {
	out := make([]string, len(us))
	for i, u := range us {
		out[i] = string(u)
	}
	return out
}

// roomsOf names the played room as the recorded daemon did (the start
// record's alias) and the agents' other rooms with the same prefix.
func (p *plan) roomsOf(rec *recording.Recording, recorded string) {
	short := rec.Room
	if short == "" {
		short = "#replayed"
	}
	alias := recorded
	if alias == "" {
		alias = short
	}
	if !strings.Contains(alias, ":") {
		alias += ":" + p.server
	}
	p.alias = alias
	p.rooms = []string{alias}
	p.stepRoom = map[string]string{alias: short}
	lp := strings.TrimPrefix(strings.SplitN(alias, ":", 2)[0], "#")
	// A shared server's run prefixes or suffixes aliases ("#ops" became
	// "#ops-s7c2e"); the agents' other rooms get the same.
	prefix, suffix := "", ""
	if s := strings.TrimPrefix(short, "#"); strings.HasSuffix(lp, s) {
		prefix = strings.TrimSuffix(lp, s)
	} else if strings.HasPrefix(lp, s) {
		suffix = strings.TrimPrefix(lp, s)
	}
	for _, a := range p.agents {
		rooms := []string{alias}
		for _, rn := range rec.Agents[a].Rooms {
			if rn == short || rn == alias {
				continue
			}
			full := rn
			if !strings.Contains(full, ":") {
				full = "#" + prefix + strings.TrimPrefix(rn, "#") + suffix + ":" + p.server
				p.stepRoom[full] = rn
			}
			if !slicesContains(rooms, full) {
				rooms = append(rooms, full)
			}
			if !slicesContains(p.rooms, full) {
				p.rooms = append(p.rooms, full)
			}
		}
		p.agentRooms[a] = rooms
	}
}

// idRE finds the ids that differ from run to run: event and room ids, the
// daemon's txn and turn ids, task attempt and handoff ids, and timestamps.
var idRE = regexp.MustCompile(`[$][A-Za-z0-9._=+/-]{8,}(?::[A-Za-z0-9.-]+(?::\d+)?)?` +
	`|![A-Za-z0-9._=+/-]+:[A-Za-z0-9.-]+(?::\d+)?` +
	`|zooid[.-](?:mcp-)?[0-9A-Za-z]{24,}|internal\.[0-9A-Za-z]{24,}|z[th][0-9A-Za-z]{24,}` +
	`|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)`)

// userRE finds user ids, which a run on another server spells otherwise.
var userRE = regexp.MustCompile(`@[A-Za-z0-9._=+/-]+:[A-Za-z0-9.-]+(?::\d+)?`)

// aliasRE finds room aliases, which a shared server suffixes per run.
var aliasRE = regexp.MustCompile(`#[A-Za-z0-9._=+/-]+:[A-Za-z0-9.-]+(?::\d+)?`)

// mask takes the run-dependent parts out of a text, for matching.
func mask(s string) string {
	s = idRE.ReplaceAllString(s, "\x00")
	s = userRE.ReplaceAllString(s, "\x01")
	return aliasRE.ReplaceAllString(s, "\x02")
}

// eventKey is what pairs a live event with a recorded one: the sender's
// name, the type, whether it is in a thread, and the text with ids masked.
func eventKey(sender string, e *trace.Event) string {
	return strings.Join([]string{sender, e.Type, fmt.Sprint(e.Thread != ""), mask(e.Text)}, "\x1f")
}

// align pairs the trace's events with the recording's, works out what is
// history (sent before the daemon starts) and what is pushed, and where the
// daemon restarted.
func (p *plan) align(rec *recording.Recording, recs []trace.Record) error {
	posted := map[id.EventID]bool{}
	for _, r := range recs {
		if r.Post != nil && r.Post.ID != "" {
			posted[r.Post.ID] = true
		}
	}
	p.posted = posted
	user := func(n string) id.UserID { return p.user[n] }
	name := map[id.UserID]string{}
	for n, u := range p.user {
		name[u] = n
	}
	p.name = name
	matches := func(j int, e *trace.Event) bool {
		ev := rec.Events[j]
		typ := ev.Type
		if typ == "" {
			typ = recording.TypeMessage
		}
		if name[e.Sender] != ev.Sender || typ != e.Type {
			return false
		}
		if e.Text == "" {
			return true
		}
		body, _ := rec.Content(j, user, nil)["body"].(string)
		return body == e.Text || (e.TextSize > 0 && strings.HasPrefix(body, e.Text))
	}
	next := 0
	first := -1
	counts := map[trace.Kind]int{}
	snapshot := func() map[trace.Kind]int {
		c := make(map[trace.Kind]int, len(counts))
		for k, v := range counts {
			c[k] = v
		}
		return c
	}
	isHuman := func(j int) bool { _, agent := rec.Agents[rec.Events[j].Sender]; return !agent }
	started := false
	for i := range recs {
		r := &recs[i]
		switch {
		case r.Start != nil:
			if started && r.Start.Restart {
				p.steps = append(p.steps, step{restart: true, upTo: next - 1, want: snapshot(), what: fmt.Sprintf("the daemon restart (trace seq %d)", r.Seq)})
			}
			started = true
		case r.Event != nil:
			pe := plannedEvent{rec: r.Event, key: eventKey(name[r.Event.Sender], r.Event), index: -1}
			for j := next; j < len(rec.Events); j++ {
				if matches(j, r.Event) {
					pe.index = j
					break
				}
			}
			if j := pe.index; j >= 0 {
				if first < 0 {
					first = j
					for k := 0; k < j; k++ {
						p.seed = append(p.seed, k)
					}
				} else {
					for k := next; k < j; k++ {
						if isHuman(k) {
							p.steps = append(p.steps, step{event: k, want: snapshot(), what: fmt.Sprintf("recording event %d", k)})
						}
					}
				}
				if !posted[r.Event.ID] {
					p.steps = append(p.steps, step{event: j, want: snapshot(), what: fmt.Sprintf("recording event %d (%s)", j, short(r.Event.Text))})
				} else {
					p.made[j] = true
				}
				next = j + 1
			}
			p.events = append(p.events, pe)
		}
		if r.Kind != trace.KindStart {
			counts[r.Kind]++
		}
	}
	if first < 0 && len(rec.Events) > 0 {
		return fmt.Errorf("%s: none of the trace's events is one of the recording's events: the trace belongs to another room or window", rec.Path)
	}
	for k := next; k < len(rec.Events); k++ {
		if isHuman(k) {
			p.steps = append(p.steps, step{event: k, want: snapshot(), what: fmt.Sprintf("recording event %d", k)})
		}
	}
	p.total = snapshot()
	return nil
}

// turnsOf cuts the trace into each agent's turns: a prompt, then what the
// agent did in that session until the turn ended — its prose (the daemon's
// m.notice posts for it in the session's thread), its tool calls, a crash or
// a hang.
func (p *plan) turnsOf(recs []trace.Record) {
	for i, r := range recs {
		if r.Prompt == nil {
			continue
		}
		agent, sess := r.Prompt.Agent, r.Session
		thread := id.EventID(sess[strings.LastIndex(sess, "|")+1:])
		t := &turn{key: mask(r.Prompt.Text), prompt: r.Prompt.Text}
	walk:
		for _, x := range recs[i+1:] {
			switch {
			case x.Post != nil && x.Session == "":
				po := x.Post
				if po.Sender == p.user[agent] && po.Thread == thread && po.Type == "m.room.message" &&
					po.MsgType == "m.notice" && strings.HasPrefix(po.TxnID, "zooid.") && !strings.HasPrefix(po.Text, "⚠ ") {
					t.actions = append(t.actions, action{say: po.Text})
				}
			case x.Start != nil:
				// The daemon was killed mid-turn: the turn never ended. The
				// replay's agent hangs until the replayed restart stops it.
				t.actions = append(t.actions, action{hang: true})
				t.cut = true
				break walk
			case x.Session != sess:
			case x.Tool != nil:
				t.actions = append(t.actions, action{tool: x.Tool.Tool, args: x.Tool.Args})
			case x.Agent != nil:
				switch x.Agent.What {
				case trace.AgentCrashed:
					t.actions = append(t.actions, action{crash: true})
				case trace.AgentTimedOut:
					t.actions = append(t.actions, action{hang: true})
				}
			case x.TurnEnd != nil:
				if s := x.TurnEnd.Stop; s != "" && s != "end_turn" && s != "cancelled" {
					t.actions = append(t.actions, action{stop: s})
				}
				break walk
			case x.Prompt != nil:
				break walk
			}
		}
		p.turns[agent] = append(p.turns[agent], t)
	}
}
