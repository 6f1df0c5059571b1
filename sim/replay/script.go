package replay

import (
	"encoding/json"
	"fmt"
	"sync"

	acp "github.com/coder/acp-go-sdk"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/fakeagent"
	"github.com/zooid-dev/zooid/zooid/recording"
	"github.com/zooid-dev/zooid/zooid/trace"
)

// Script plays the agents' side of a recording that carries a trace: it
// answers each prompt a live daemon sends with the turn the trace recorded
// for it, and pairs the live run's events with the recorded ones (Observe)
// so the recorded ids in those turns become the run's. Run uses one; so does
// the steps' played room (a feature's Background that plays a recording).
// All methods are safe for concurrent use.
type Script struct {
	plan *plan
	live func(name string) id.UserID
	// alias, when set, is this run's alias of a room as steps name it.
	alias func(room string) id.RoomAlias

	mu     sync.Mutex
	idmap  map[string]string // recorded id -> this run's id
	paired []bool            // plan.events already paired with a live event
	ids    []id.EventID      // this run's id of each recording event, once known
	notes  []string
}

// NewScript reads rec's trace; live names this run's user of each member
// (called when needed, not now).
func NewScript(rec *recording.Recording, live func(name string) id.UserID) (*Script, error) {
	want, err := RecordedTrace(rec)
	if err != nil {
		return nil, err
	}
	p, err := newPlan(rec, want)
	if err != nil {
		return nil, err
	}
	return newScript(p, len(rec.Events), live), nil
}

func newScript(p *plan, events int, live func(string) id.UserID) *Script {
	return &Script{plan: p, live: live, idmap: map[string]string{},
		paired: make([]bool, len(p.events)), ids: make([]id.EventID, events)}
}

// MadeByDaemon says whether recording event i is a post the daemon made
// (an agent's prose, a task root, a result): a replay does not send it, the
// daemon makes it again.
func (s *Script) MadeByDaemon(i int) bool { return s.plan.made[i] }

// EventID is this run's id of recording event i, once it was sent (SetEventID)
// or seen made by the daemon (Observe); "" before.
func (s *Script) EventID(i int) id.EventID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ids[i]
}

// SetEventID records the id recording event i got when it was sent.
func (s *Script) SetEventID(i int, e id.EventID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ids[i] = e
}

func (s *Script) liveIDs() []id.EventID {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]id.EventID(nil), s.ids...)
}

// Notes are what the script could not do (a recorded tool call whose
// arguments were cut short in the trace).
func (s *Script) Notes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.notes...)
}

// Observe takes one record of the live run's trace of the played room. An
// event is paired with the first recorded event of the same sender, type and
// text (ids aside) not yet paired.
func (s *Script) Observe(r trace.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.idmap[string(s.plan.wantRoom)]; !ok && r.Room != "" {
		s.idmap[string(s.plan.wantRoom)] = string(r.Room)
	}
	e := r.Event
	if e == nil || isState(e.Type) {
		return
	}
	key := eventKey(s.liveName(e.Sender), e)
	for k, pe := range s.plan.events {
		if s.paired[k] || pe.key != key {
			continue
		}
		s.paired[k] = true
		s.idmap[string(pe.rec.ID)] = string(e.ID)
		if pe.index >= 0 && s.ids[pe.index] == "" {
			s.ids[pe.index] = e.ID
		}
		return
	}
}

// liveName is the member name of a live user id ("" for none).
func (s *Script) liveName(u id.UserID) string {
	for n := range s.plan.user {
		if s.live(n) == u {
			return n
		}
	}
	return ""
}

// MapAliases makes the recorded turns name the recording's rooms by this
// run's aliases: alias gives the alias of a room as steps name it ("#dev"),
// which a shared homeserver suffixes per run. Without it (zooid replay, whose
// rooms keep their recorded aliases) aliases are sent as recorded. Call it
// before the first prompt.
func (s *Script) MapAliases(alias func(room string) id.RoomAlias) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.alias = alias
}

// mapIDs turns the recorded ids in a text into this run's: event and room
// ids as paired so far, user ids by member name, and, with MapAliases, the
// recording's room aliases.
func (s *Script) mapIDs(text string) string {
	if s.alias != nil {
		text = aliasRE.ReplaceAllStringFunc(text, func(x string) string {
			if room, ok := s.plan.stepRoom[x]; ok {
				if a := s.alias(room); a != "" {
					return string(a)
				}
			}
			return x
		})
	}
	text = idRE.ReplaceAllStringFunc(text, func(x string) string {
		if to, ok := s.idmap[x]; ok && to != "" {
			return to
		}
		return x
	})
	return userRE.ReplaceAllStringFunc(text, func(x string) string {
		if n, ok := s.plan.name[id.UserID(x)]; ok {
			if u := s.live(n); u != "" {
				return string(u)
			}
		}
		return x
	})
}

// Respond is a fakeagent.Controller responder: it answers a prompt with the
// recorded turn it matches — the agent's first unused turn with the same
// text (ids aside), else its first unused turn. With none left it returns
// false (the controller's queue, then the default reply, answer).
func (s *Script) Respond(agent string, pr fakeagent.Prompt) (fakeagent.Turn, bool) {
	key := mask(pr.Text)
	s.mu.Lock()
	defer s.mu.Unlock()
	var t *turn
	for _, c := range s.plan.turns[agent] {
		if !c.used && c.key == key {
			t = c
			break
		}
	}
	if t == nil {
		for _, c := range s.plan.turns[agent] {
			if !c.used {
				t = c
				break
			}
		}
	}
	if t == nil {
		return nil, false
	}
	t.used = true
	out := fakeagent.Turn{}
	for _, a := range t.actions {
		switch {
		case a.say != "":
			out = append(out, fakeagent.Say(s.mapIDs(a.say)))
		case a.tool != "":
			args := map[string]any{}
			if err := json.Unmarshal([]byte(s.mapIDs(a.args)), &args); err != nil {
				s.notes = append(s.notes, fmt.Sprintf("%s's recorded call of %s has arguments that are not a JSON object (cut short in the trace?): %v", agent, a.tool, err))
				continue
			}
			out = append(out, fakeagent.CallTool(a.tool, args))
		case a.crash:
			out = append(out, fakeagent.Crash())
		case a.hang:
			out = append(out, fakeagent.Hang())
		case a.stop != "":
			out = append(out, fakeagent.Stop(acp.StopReason(a.stop)))
		}
	}
	if len(out) == 0 {
		// A turn that said nothing: the default reply would post "ok".
		out = append(out, fakeagent.Stop(acp.StopReasonEndTurn))
	}
	return out, true
}

// RecordedTurn is a turn the recorded daemon started: the agent prompted
// for a recording event (Trigger, an index; -1 for a prompt with no
// triggering event, such as a task's result to its caller), the Nth such prompt of that
// agent for that event (0 for the first; a restart can prompt it again), and
// whether the turn had ended (its turn_end record) at the point asked about.
type RecordedTurn struct {
	Agent   string
	Trigger int
	Nth     int
	Ended   bool
}

// TurnsBefore lists the turns the recorded daemon had started before it
// took up recording event i (its event record in the trace), in trace
// order, each saying whether it had ended by then. A played recording waits
// for them before sending event i, so an event that came in while a turn
// ran comes in while it runs again, and one that came after it ended comes
// after. Turns on events that are not the recording's are left out (those
// on no event are kept, Trigger -1); so is
// everything when event i is not in the trace (nil).
func (s *Script) TurnsBefore(i int) []RecordedTurn {
	recs := s.plan.want.Rooms[0].Records
	index := map[id.EventID]int{}
	for _, pe := range s.plan.events {
		if pe.index >= 0 {
			index[pe.rec.ID] = pe.index
		}
	}
	at := -1
	for k, r := range recs {
		if r.Event != nil {
			if j, ok := index[r.Event.ID]; ok && j == i {
				at = k
				break
			}
		}
	}
	if at < 0 {
		return nil
	}
	var out []RecordedTurn
	byTurn := map[string]int{} // recorded turn id -> its place in out
	nth := map[[2]string]int{}
	for _, r := range recs[:at] {
		switch {
		case r.Prompt != nil:
			j, ok := index[r.Prompt.Trigger]
			if r.Prompt.Trigger == "" {
				j, ok = -1, true // a turn of the daemon's own (a task's result to its caller)
			}
			if !ok {
				continue
			}
			key := [2]string{r.Prompt.Agent, string(r.Prompt.Trigger)}
			byTurn[r.Prompt.Turn] = len(out)
			out = append(out, RecordedTurn{Agent: r.Prompt.Agent, Trigger: j, Nth: nth[key]})
			nth[key]++
		case r.TurnEnd != nil:
			if k, ok := byTurn[r.TurnEnd.Turn]; ok {
				out[k].Ended = true
			}
		}
	}
	return out
}
