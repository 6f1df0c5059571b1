// Package report renders what happened in a run — rooms' events, the daemon's
// trace (routing decisions, turns with their tool calls, posts, task steps)
// and, optionally, the divergences of a replay — as one self-contained HTML
// page: inline CSS and script, nothing fetched from the network. Every piece
// of event text is escaped (html/template), since room text is hostile input.
//
// It links no test code, so the daemon binary (zooid replay) and the harness
// binary (zooid sim --report) both use it.
package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/zooid-dev/zooid/zooid/recording"
	"github.com/zooid-dev/zooid/zooid/trace"
)

// Run is one world to show: a recording replayed, or one scenario of a sim
// run.
type Run struct {
	// Title heads the run's section (the recording's name, the scenario's).
	Title string
	// Status is a short verdict shown beside the title ("passed", "failed:
	// …", "diverges"); may be empty.
	Status string
	// Rooms are the run's rooms.
	Rooms []Room
	// Diff is what a replay found different from the recorded trace; its
	// entries are highlighted where the ids they name are shown.
	Diff trace.Diff
}

// Room is one room's timeline: its events as read back and, when the daemon
// traced it, the trace's records for it.
type Room struct {
	// Name is how the run named the room ("#ops").
	Name string
	// ID is the room id the trace knows it by; may be empty.
	ID string
	// Events are the room's events, oldest first.
	Events []Event
	// Trace is the daemon's records for the room; nil when not traced.
	Trace []trace.Record
}

// Event is one event of a room's timeline.
type Event struct {
	// ID is the event id; the trace's records name events by it.
	ID string
	// Label is the recording's label for it, if any.
	Label  string
	Sender string
	// Agent marks a sender that is one of the run's agents.
	Agent bool
	Time  time.Time
	// Type is the event type; MsgType the message's msgtype.
	Type    string
	MsgType string
	Text    string
	// Thread is the id of the thread root it replies in; empty at top level.
	Thread string
	// Relation says how it relates to another event when not a thread
	// reply ("edits $x", "reacts 👍 to $x").
	Relation string
}

// ErrBadTrace is what FromRecording's error wraps when the recording's own
// trace cannot be read: bad input, not a failure to render.
var ErrBadTrace = errors.New("bad trace")

// FromRecording makes a Run of a recording. Its events get the ids of the
// trace's event records they match (same text, in order) so routing
// decisions and turns attach to them; trace events that match no recorded
// event (the recording window started later) are shown where the trace has
// them. tr may be nil; then the recording's own trace lines are used.
func FromRecording(rec *recording.Recording, tr *trace.Trace) (Run, error) {
	run := Run{Title: rec.Name}
	if run.Title == "" {
		run.Title = rec.Path
	}
	if tr == nil && len(rec.Trace) > 0 {
		t, err := parseLines(rec.Trace, recordingLine(rec))
		if err != nil {
			return Run{}, fmt.Errorf("%w: %w", ErrBadTrace, err)
		}
		tr = t
	}
	roomName := rec.Room
	if roomName == "" {
		roomName = "#room"
	}
	room := Room{Name: roomName}
	ids := make([]string, len(rec.Events))
	for i := range rec.Events {
		ids[i] = fmt.Sprintf("rec-%d", i)
	}
	var traced []trace.Record
	if tr != nil && len(tr.Rooms) > 0 {
		tRoom := &tr.Rooms[0]
		for i := range tr.Rooms {
			if tr.Rooms[i].Alias != "" && tr.Rooms[i].Alias == rec.Room {
				tRoom = &tr.Rooms[i]
			}
		}
		room.ID = string(tRoom.ID)
		if tRoom.Alias != "" {
			room.Name = tRoom.Alias
		}
		traced = tRoom.Records
		room.Trace = traced
	}
	agentUser := map[string]bool{}
	for _, r := range traced {
		if r.Event != nil && r.Event.Nobody == trace.WhyAgentPost {
			agentUser[string(r.Event.Sender)] = true
		}
	}
	// Merge: walk the trace's events; each takes the next recorded event
	// with its text (and the sender's name as the localpart), else is
	// inserted as the trace saw it.
	var events []Event
	next := 0
	emit := func(upto int) {
		for ; next < upto; next++ {
			events = append(events, recordedEvent(rec, next, ids))
		}
	}
	for _, r := range traced {
		if r.Kind != trace.KindEvent || r.Event == nil {
			continue
		}
		te := r.Event
		match := -1
		for j := next; j < len(rec.Events); j++ {
			if sameEvent(rec, j, te) {
				match = j
				break
			}
		}
		if match < 0 {
			events = append(events, Event{ID: string(te.ID), Sender: string(te.Sender), Agent: agentUser[string(te.Sender)],
				Time: r.Time, Type: te.Type, MsgType: te.MsgType, Text: te.Text, Thread: string(te.Thread)})
			continue
		}
		ids[match] = string(te.ID)
		emit(match)
		events = append(events, recordedEvent(rec, match, ids))
		next = match + 1
	}
	emit(len(rec.Events))
	room.Events = events
	run.Rooms = []Room{room}
	return run, nil
}

// recordedEvent is event i of rec, its relations named by ids.
func recordedEvent(rec *recording.Recording, i int, ids []string) Event {
	e := rec.Events[i]
	_, isAgent := rec.Agents[e.Sender]
	out := Event{ID: ids[i], Label: e.Label, Sender: e.Sender, Agent: isAgent, Time: e.Timestamp, Type: e.Type, Text: rec.Text(i)}
	if mt, ok := e.Content["msgtype"].(string); ok {
		out.MsgType = mt
	}
	if e.Thread >= 0 {
		out.Thread = ids[e.Thread]
	}
	switch {
	case e.Edits >= 0:
		out.Relation = "edits " + ids[e.Edits]
	case e.ReactsTo >= 0:
		out.Relation = "reacts " + e.Key + " to " + ids[e.ReactsTo]
	case e.Other != nil:
		out.Relation = e.Other.RelType + " to " + ids[e.Other.Target]
	case e.ReplyTo >= 0 && e.Thread < 0:
		out.Relation = "replies to " + ids[e.ReplyTo]
	}
	if out.Text == "" && e.Type != recording.TypeMessage {
		b, _ := json.Marshal(e.Content)
		out.Text = string(b)
	}
	return out
}

// sameEvent says whether trace event te is recording event j. The trace
// spells users as ids, which a harness or Synapse run prefixes
// ("@zs-planner:localhost" is planner), where the recording has the member's
// name ("@planner"); a text the trace cut short matches on its prefix; a
// trace event without text (a join, a reaction) matches on sender and type.
func sameEvent(rec *recording.Recording, j int, te *trace.Event) bool {
	e := rec.Events[j]
	if !isMember(string(te.Sender), e.Sender) {
		return false
	}
	typ := e.Type
	if typ == "" {
		typ = recording.TypeMessage
	}
	if te.Type != "" && te.Type != typ {
		return false
	}
	if te.Text == "" {
		return true
	}
	want, got := mentionNames(rec, rec.Text(j)), mentionNames(rec, te.Text)
	return want == got || (te.TextSize > 0 && strings.HasPrefix(want, got))
}

// isMember says whether user id u is the recording member name: its
// localpart, or the localpart with a run's prefix ("zs-planner").
func isMember(u, name string) bool {
	lp := localpart(u)
	return lp == name || strings.HasSuffix(lp, "-"+name)
}

// userIDRE finds full user ids in a text.
var userIDRE = regexp.MustCompile(`@[A-Za-z0-9._=+/-]+:[A-Za-z0-9.-]+(?::\d+)?`)

// mentionNames spells the user ids in s that are the recording's members as
// the recording does, "@name".
func mentionNames(rec *recording.Recording, s string) string {
	return userIDRE.ReplaceAllStringFunc(s, func(u string) string {
		for _, m := range rec.Members {
			if isMember(u, m) {
				return "@" + m
			}
		}
		return u
	})
}

func localpart(u string) string {
	u = strings.TrimPrefix(u, "@")
	if i := strings.IndexByte(u, ':'); i >= 0 {
		u = u[:i]
	}
	return u
}

// ParseLines reads a recording's trace lines (headers and records, as the
// trace files hold them) into a Trace, rooms in the order first seen. A line
// that is not a header or a record this zooid reads (trace.Record.Check) is
// an error naming it.
func ParseLines(lines []json.RawMessage) (*trace.Trace, error) {
	return parseLines(lines, func(n int) string { return fmt.Sprintf("trace line %d", n+1) })
}

// recordingLine names trace line n of rec by its line in the file when rec
// was read from one, so a bad line can be found.
func recordingLine(rec *recording.Recording) func(n int) string {
	return func(n int) string {
		if n < len(rec.TraceLines) {
			return fmt.Sprintf("%s:%d: trace line %d", rec.Path, rec.TraceLines[n], n+1)
		}
		return fmt.Sprintf("%s: trace line %d", rec.Path, n+1)
	}
}

func parseLines(lines []json.RawMessage, where func(n int) string) (*trace.Trace, error) {
	t := &trace.Trace{}
	index := map[string]int{}
	room := func(id string) *trace.Room {
		i, ok := index[id]
		if !ok {
			i = len(t.Rooms)
			index[id] = i
			t.Rooms = append(t.Rooms, trace.Room{})
		}
		return &t.Rooms[i]
	}
	for n, line := range lines {
		var probe struct {
			Format string `json:"format"`
			Room   string `json:"room"`
		}
		if err := json.Unmarshal(line, &probe); err != nil {
			return nil, fmt.Errorf("%s: %w", where(n), err)
		}
		if probe.Format != "" {
			var h trace.Header
			if err := json.Unmarshal(line, &h); err != nil {
				return nil, fmt.Errorf("%s: %w", where(n), err)
			}
			if h.Format != trace.FormatName {
				return nil, fmt.Errorf("%s: a header of format %q, not %q", where(n), h.Format, trace.FormatName)
			}
			if h.Version > trace.Version || h.Version < 1 {
				return nil, fmt.Errorf("%s: trace format version %d; this zooid reads version %d and older", where(n), h.Version, trace.Version)
			}
			r := room(string(h.Room))
			r.ID = h.Room
			continue
		}
		var rec trace.Record
		if err := json.Unmarshal(line, &rec); err != nil {
			return nil, fmt.Errorf("%s: %w", where(n), err)
		}
		if err := rec.Check(); err != nil {
			return nil, fmt.Errorf("%s: %w", where(n), err)
		}
		r := room(string(rec.Room))
		r.ID = rec.Room
		r.Records = append(r.Records, rec)
		if rec.Start != nil && rec.Start.Alias != "" {
			r.Alias = rec.Start.Alias
		}
	}
	return t, nil
}
