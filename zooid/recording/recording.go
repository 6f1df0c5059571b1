// Package recording reads and writes recorded rooms (`zooid record`): a
// room's members and its events in order, with senders as the short names
// steps use ("ori", "agent-a") and relations by the index or label of an
// earlier event, so one file replays on the fake homeserver and on Synapse
// alike. The recordings themselves live in the repository's scenarios/,
// whose README.md describes the file format.
package recording

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/config"
)

// Event types and relation types a recording speaks of.
const (
	TypeMessage  = "m.room.message"
	TypeReaction = "m.reaction"
	RelThread    = "m.thread"
	RelReplace   = "m.replace"
	RelAnnotate  = "m.annotation"
)

// nameRE is what a member may be called: the step vocabulary's names.
var nameRE = regexp.MustCompile(config.NamePattern)

// labelRE is what an event label may be; a label is never all digits, so a
// reference is unambiguously an index or a label.
var labelRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,63}$`)

// Version is the newest recording format this package reads and the one
// Write produces. Version 1 (no "version" field) had members as bare names
// and no other relations than thread, reply_to, edits and reacts_to.
const Version = 2

// Member roles.
const (
	RoleHuman = "human"
	RoleAgent = "agent"
)

// Recording is a loaded, validated room scenario.
type Recording struct {
	// Path is the file it came from, for messages.
	Path string
	// Version is the format version the file was written in (1 or 2).
	Version int
	// Name is the room's display name; may be empty.
	Name string
	// Room is how steps named the recorded room ("#ops"); may be empty.
	Room string
	// Members are the room's members by short name, senders included.
	Members []string
	// Agents are the members that were agents, by name; the others are humans.
	Agents map[string]Agent
	// Events are the room's events, oldest first.
	Events []Event
	// LeftOut counts what the recorder could not keep, by reason
	// ("encrypted", "redacted", "outside_window", "no_body"), so a gap is never silent.
	LeftOut map[string]int
	// Trace is the daemon's flight-recorder lines for the room, verbatim
	// (one JSON object each), when the recording carries one.
	Trace []json.RawMessage
	// TraceLines are the lines of the file Trace's entries start on, when
	// the recording was read from one, so a bad trace line can be named.
	TraceLines []int `json:"-"`
}

// Agent is a member that was an agent: the rooms it was bound to (as steps
// name rooms, "#ops") and what woke it.
type Agent struct {
	Rooms   []string
	Trigger string
}

// Event is one recorded event with its relations resolved to indexes into
// Recording.Events; an index is -1 when the relation is absent.
type Event struct {
	Label     string
	Sender    string
	Timestamp time.Time
	Type      string
	// Content is the event content as recorded, without m.relates_to; user
	// ids of members appear as "@name" and m.mentions lists names.
	Content map[string]any
	// Thread is the thread root this event replies in.
	Thread int
	// ReplyTo is the event this one answers (m.in_reply_to).
	ReplyTo int
	// Edits is the event this one replaces (m.replace).
	Edits int
	// ReactsTo is the event this one annotates (m.annotation) with Key.
	ReactsTo int
	Key      string
	// Other is any other relation (m.reference, or a rel_type this package
	// does not know), kept verbatim; nil when absent.
	Other *Relation
	// Decrypted marks an event that was end-to-end encrypted in the room:
	// the recording holds its plaintext as the recording agent's device
	// decrypted it (zooid record --decrypt). A replay sends it as the
	// plain message it was.
	Decrypted bool
}

// Relation is a relation kept verbatim: its rel_type, the event it points
// at (an index) and every other field of m.relates_to as recorded.
type Relation struct {
	RelType string
	Target  int
	Fields  map[string]any
}

// fileFormat is the JSON on disk.
type fileFormat struct {
	Version int               `json:"version,omitempty"`
	Name    string            `json:"name,omitempty"`
	Room    string            `json:"room,omitempty"`
	Members []fileMember      `json:"members"`
	LeftOut map[string]int    `json:"left_out,omitempty"`
	Events  []fileEvent       `json:"events"`
	Trace   []json.RawMessage `json:"trace,omitempty"`
}

// fileMember is a bare name (a human, as version 1 wrote it) or an object
// with a role.
type fileMember struct {
	Name    string   `json:"name"`
	Role    string   `json:"role"`
	Rooms   []string `json:"rooms,omitempty"`
	Trigger string   `json:"trigger,omitempty"`
}

// UnmarshalJSON accepts "ori" or {"name": "agent-a", "role": "agent", ...}.
func (m *fileMember) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		m.Role = RoleHuman
		return json.Unmarshal(b, &m.Name)
	}
	type plain fileMember
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var p plain
	if err := dec.Decode(&p); err != nil {
		return fmt.Errorf("a member is a name or {\"name\", \"role\", \"rooms\", \"trigger\"}: %w", err)
	}
	*m = fileMember(p)
	return nil
}

type fileEvent struct {
	Label    string         `json:"label,omitempty"`
	Sender   string         `json:"sender"`
	TS       string         `json:"ts"`
	Type     string         `json:"type,omitempty"`
	Content  map[string]any `json:"content,omitempty"`
	Thread   *Ref           `json:"thread,omitempty"`
	ReplyTo  *Ref           `json:"reply_to,omitempty"`
	Edits    *Ref           `json:"edits,omitempty"`
	ReactsTo *Ref           `json:"reacts_to,omitempty"`
	Key      string         `json:"key,omitempty"`
	Relates  map[string]any `json:"relates,omitempty"`
	// Decrypted is Event.Decrypted.
	Decrypted bool `json:"decrypted,omitempty"`
}

// Ref names an earlier event by index (a JSON number) or label (a string).
type Ref struct {
	Index int
	Label string
}

// UnmarshalJSON accepts 3 or "root-label".
func (r *Ref) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		r.Index = -1
		return json.Unmarshal(b, &r.Label)
	}
	n, err := strconv.Atoi(string(b))
	if err != nil {
		return fmt.Errorf("an event reference is an index or a label, not %s", b)
	}
	r.Index = n
	return nil
}

// MarshalJSON writes the label when there is one, else the index.
func (r Ref) MarshalJSON() ([]byte, error) {
	if r.Label != "" {
		return json.Marshal(r.Label)
	}
	return json.Marshal(r.Index)
}

// Load reads and validates a recording file.
func Load(path string) (*Recording, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("loading scenario: %w", err)
	}
	defer f.Close()
	return Parse(f, path)
}

// lineAt is the 1-based line of byte offset off in data. A negative offset
// (bytes.Index found no such key) is line 1.
func lineAt(data []byte, off int64) int {
	if off < 0 {
		off = 0
	}
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	return bytes.Count(data[:off], []byte("\n")) + 1
}

// nextValue is the offset of the first byte of the next JSON value at or
// after off: whitespace and a separating comma skipped.
func nextValue(data []byte, off int64) int64 {
	for off < int64(len(data)) {
		switch data[off] {
		case ' ', '\t', '\r', '\n', ',', ':':
			off++
			continue
		}
		break
	}
	return off
}

// lineError is an error at a line of the file.
type lineError struct {
	line int
	err  error
}

func (e *lineError) Error() string { return fmt.Sprintf("%d: %v", e.line, e.err) }
func (e *lineError) Unwrap() error { return e.err }

// decodeFile reads the file's JSON strictly, keeping the line each event
// starts on, so errors can point at it.
func decodeFile(data []byte) (fileFormat, []int, []int, error) {
	var ff fileFormat
	// A syntax error first, with its exact line; then the version, before
	// fields a newer version may have added are refused as unknown.
	var probe struct {
		Version json.RawMessage `json:"version"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return ff, nil, nil, &lineError{lineAt(data, se.Offset), fmt.Errorf("not a recording: %w", err)}
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return ff, nil, nil, &lineError{lineAt(data, te.Offset), fmt.Errorf("not a recording: %w", err)}
		}
		return ff, nil, nil, &lineError{1, fmt.Errorf("not a recording: %w", err)}
	}
	if len(probe.Version) > 0 {
		v, err := strconv.Atoi(string(probe.Version))
		line := lineAt(data, int64(bytes.Index(data, []byte(`"version"`))))
		if err != nil || v < 1 {
			return ff, nil, nil, &lineError{line, fmt.Errorf("version %s: want a whole number from 1 to %d", probe.Version, Version)}
		}
		if v > Version {
			return ff, nil, nil, &lineError{line, fmt.Errorf("version %d is newer than this zooid reads (up to %d); use a newer zooid", v, Version)}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var lines, traceLines []int
	expect := func(want json.Delim) error {
		off := nextValue(data, dec.InputOffset())
		tok, err := dec.Token()
		if err != nil {
			return &lineError{lineAt(data, off), err}
		}
		if d, ok := tok.(json.Delim); !ok || d != want {
			return &lineError{lineAt(data, off), fmt.Errorf("want %q, got %v", want, tok)}
		}
		return nil
	}
	if err := expect('{'); err != nil {
		return ff, nil, nil, err
	}
	for dec.More() {
		keyOff := nextValue(data, dec.InputOffset())
		tok, err := dec.Token()
		if err != nil {
			return ff, nil, nil, &lineError{lineAt(data, keyOff), err}
		}
		key, _ := tok.(string)
		valOff := nextValue(data, dec.InputOffset())
		var into any
		switch key {
		case "version":
			into = &ff.Version
		case "name":
			into = &ff.Name
		case "room":
			into = &ff.Room
		case "members":
			into = &ff.Members
		case "left_out":
			into = &ff.LeftOut
		case "trace":
			// Element by element, so a bad trace line can be named by its
			// line in the file.
			if err := expect('['); err != nil {
				return ff, nil, nil, err
			}
			for dec.More() {
				off := nextValue(data, dec.InputOffset())
				var raw json.RawMessage
				if err := dec.Decode(&raw); err != nil {
					return ff, nil, nil, &lineError{lineAt(data, off), fmt.Errorf("trace line %d: %w", len(ff.Trace)+1, err)}
				}
				ff.Trace = append(ff.Trace, raw)
				traceLines = append(traceLines, lineAt(data, off))
			}
			if err := expect(']'); err != nil {
				return ff, nil, nil, err
			}
			continue
		case "events":
			if err := expect('['); err != nil {
				return ff, nil, nil, err
			}
			for dec.More() {
				off := nextValue(data, dec.InputOffset())
				var fe fileEvent
				if err := dec.Decode(&fe); err != nil {
					return ff, nil, nil, &lineError{lineAt(data, off), fmt.Errorf("event %d: %w", len(ff.Events), err)}
				}
				ff.Events = append(ff.Events, fe)
				lines = append(lines, lineAt(data, off))
			}
			if err := expect(']'); err != nil {
				return ff, nil, nil, err
			}
			continue
		default:
			return ff, nil, nil, &lineError{lineAt(data, keyOff), fmt.Errorf("unknown field %q (known: version, name, room, members, left_out, events, trace)", key)}
		}
		if err := dec.Decode(into); err != nil {
			return ff, nil, nil, &lineError{lineAt(data, valOff), fmt.Errorf("%s: %w", key, err)}
		}
	}
	if err := expect('}'); err != nil {
		return ff, nil, nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return ff, nil, nil, &lineError{lineAt(data, nextValue(data, dec.InputOffset())), errors.New("trailing data after the recording")}
	}
	return ff, lines, traceLines, nil
}

// roomRE is how steps name a room.
var roomRE = regexp.MustCompile(`^#[a-z0-9-]+$`)

// Parse reads and validates a recording; path names it in errors, which
// read "path:line: reason".
func Parse(in io.Reader, path string) (*Recording, error) {
	data, err := io.ReadAll(in)
	if err != nil {
		return nil, fmt.Errorf("%s: reading: %w", path, err)
	}
	ff, lines, traceLines, err := decodeFile(data)
	if err != nil {
		return nil, fmt.Errorf("%s:%w", path, err)
	}
	membersLine := lineAt(data, int64(bytes.Index(data, []byte(`"members"`))))
	rec := &Recording{Path: path, Version: max(ff.Version, 1), Name: ff.Name, Room: ff.Room,
		Agents: map[string]Agent{}, LeftOut: ff.LeftOut, Trace: ff.Trace, TraceLines: traceLines}
	if rec.Room != "" && !roomRE.MatchString(rec.Room) {
		return nil, fmt.Errorf("%s:%d: room %q is not a room name like \"#ops\"", path, lineAt(data, int64(bytes.Index(data, []byte(`"room"`)))), rec.Room)
	}
	members := map[string]bool{}
	for i, fm := range ff.Members {
		m := fm.Name
		if !nameRE.MatchString(m) {
			return nil, fmt.Errorf("%s:%d: member %d %q is not a name like \"ori\" or \"agent-a\" (want %s)", path, membersLine, i, m, nameRE)
		}
		if members[m] {
			return nil, fmt.Errorf("%s:%d: member %q is listed twice", path, membersLine, m)
		}
		switch fm.Role {
		case RoleHuman:
			if len(fm.Rooms) > 0 || fm.Trigger != "" {
				return nil, fmt.Errorf("%s:%d: member %q: a human has no rooms or trigger", path, membersLine, m)
			}
		case RoleAgent:
			a := Agent{Rooms: fm.Rooms, Trigger: fm.Trigger}
			if a.Trigger == "" {
				a.Trigger = "mention"
			}
			if a.Trigger != "mention" && a.Trigger != "any" {
				return nil, fmt.Errorf("%s:%d: member %q: trigger %q, want mention or any", path, membersLine, m, fm.Trigger)
			}
			for _, r := range a.Rooms {
				if !roomRE.MatchString(r) {
					return nil, fmt.Errorf("%s:%d: member %q: room %q is not a room name like \"#ops\"", path, membersLine, m, r)
				}
			}
			rec.Agents[m] = a
		default:
			return nil, fmt.Errorf("%s:%d: member %q: role %q, want %s or %s", path, membersLine, m, fm.Role, RoleHuman, RoleAgent)
		}
		members[m] = true
		rec.Members = append(rec.Members, m)
	}
	for i, t := range rec.Trace {
		var obj map[string]any
		if err := json.Unmarshal(t, &obj); err != nil {
			return nil, fmt.Errorf("%s:%d: trace line %d is not a JSON object: %w", path, lineAt(data, int64(bytes.Index(data, []byte(`"trace"`)))), i, err)
		}
	}
	labels := map[string]int{}
	for i, fe := range ff.Events {
		e, err := rec.event(i, fe, members, labels)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: event %d: %w", path, lines[i], i, err)
		}
		if e.Label != "" {
			labels[e.Label] = i
		}
		rec.Events = append(rec.Events, e)
	}
	return rec, nil
}

// event validates one event against the ones before it.
func (rec *Recording) event(i int, fe fileEvent, members map[string]bool, labels map[string]int) (Event, error) {
	e := Event{Label: fe.Label, Sender: fe.Sender, Type: fe.Type, Content: fe.Content, Key: fe.Key,
		Thread: -1, ReplyTo: -1, Edits: -1, ReactsTo: -1, Decrypted: fe.Decrypted}
	if e.Label != "" {
		if !labelRE.MatchString(e.Label) {
			return e, fmt.Errorf("label %q: want letters, digits, _ . - and not starting with a digit", e.Label)
		}
		if j, dup := labels[e.Label]; dup {
			return e, fmt.Errorf("label %q is already event %d's", e.Label, j)
		}
	}
	if !members[e.Sender] {
		return e, fmt.Errorf("sender %q is not a member (members: %s)", e.Sender, strings.Join(rec.Members, ", "))
	}
	ts, err := time.Parse(time.RFC3339Nano, fe.TS)
	if err != nil {
		return e, fmt.Errorf("timestamp %q is not RFC 3339 (like 2026-03-01T09:14:05Z): %w", fe.TS, err)
	}
	e.Timestamp = ts.UTC()
	if e.Content == nil {
		e.Content = map[string]any{}
	}
	if _, has := e.Content["m.relates_to"]; has {
		return e, errors.New("content has m.relates_to; write relations as thread, reply_to, edits or reacts_to")
	}
	if e.Type == "" {
		e.Type = TypeMessage
		if fe.ReactsTo != nil {
			e.Type = TypeReaction
		}
	}
	resolve := func(what string, r *Ref) (int, error) {
		if r == nil {
			return -1, nil
		}
		j := r.Index
		if r.Label != "" {
			k, ok := labels[r.Label]
			if !ok {
				return 0, fmt.Errorf("%s %q: no earlier event has that label", what, r.Label)
			}
			j = k
		}
		if j < 0 || j >= i {
			return 0, fmt.Errorf("%s %d: must be an earlier event (0..%d)", what, j, i-1)
		}
		return j, nil
	}
	if e.Thread, err = resolve("thread", fe.Thread); err != nil {
		return e, err
	}
	if e.ReplyTo, err = resolve("reply_to", fe.ReplyTo); err != nil {
		return e, err
	}
	if e.Edits, err = resolve("edits", fe.Edits); err != nil {
		return e, err
	}
	if e.ReactsTo, err = resolve("reacts_to", fe.ReactsTo); err != nil {
		return e, err
	}
	if fe.Relates != nil {
		if e.Other, err = otherRelation(fe.Relates, resolve); err != nil {
			return e, err
		}
	}
	// m.relates_to holds one rel_type; only m.in_reply_to rides along with a thread.
	n := 0
	other := -1
	if e.Other != nil {
		other = e.Other.Target
	}
	for _, j := range []int{e.Thread, e.Edits, e.ReactsTo, other} {
		if j >= 0 {
			n++
		}
	}
	if n > 1 || (e.ReplyTo >= 0 && (e.Edits >= 0 || e.ReactsTo >= 0)) {
		return e, errors.New("an event has one relation: thread (optionally with reply_to), reply_to, edits, reacts_to or relates")
	}
	if e.Thread >= 0 {
		root := rec.Events[e.Thread]
		if root.Thread >= 0 || root.Edits >= 0 || root.ReactsTo >= 0 {
			return e, fmt.Errorf("thread %d: that event has a relation itself (a thread reply, edit or reaction), and Synapse refuses a thread started from it", e.Thread)
		}
		if e.ReplyTo >= 0 && e.ReplyTo != e.Thread && rec.Events[e.ReplyTo].Thread != e.Thread {
			return e, fmt.Errorf("reply_to %d is not in thread %d", e.ReplyTo, e.Thread)
		}
	}
	if e.ReactsTo >= 0 {
		if e.Type != TypeReaction {
			return e, fmt.Errorf("a reaction has type %s, not %s", TypeReaction, e.Type)
		}
		if e.Key == "" {
			return e, errors.New("a reaction needs a key (the emoji)")
		}
	} else if e.Key != "" {
		return e, errors.New("key is only for a reaction (reacts_to)")
	}
	if e.Edits >= 0 {
		if e.Type != TypeMessage || rec.Events[e.Edits].Type != TypeMessage {
			return e, fmt.Errorf("an edit and the event it edits (%d) must both be %s", e.Edits, TypeMessage)
		}
		if _, ok := e.Content["body"].(string); !ok {
			return e, errors.New("an edit's content needs the new body")
		}
	}
	if e.Type == TypeMessage && e.Edits < 0 {
		if _, ok := e.Content["body"].(string); !ok {
			return e, errors.New("a message's content needs a body")
		}
	}
	if _, err := json.Marshal(e.Content); err != nil {
		return e, fmt.Errorf("content: %w", err)
	}
	return e, nil
}

// otherRelation reads a "relates" object: rel_type, event_id (an index or
// label of an earlier event) and any other fields, kept as they are.
func otherRelation(m map[string]any, resolve func(string, *Ref) (int, error)) (*Relation, error) {
	rt, _ := m["rel_type"].(string)
	switch rt {
	case "":
		return nil, errors.New("relates needs a rel_type")
	case RelThread, RelReplace, RelAnnotate:
		return nil, fmt.Errorf("relates: write %s as thread, edits or reacts_to", rt)
	}
	var ref Ref
	switch v := m["event_id"].(type) {
	case float64:
		if v != float64(int(v)) {
			return nil, fmt.Errorf("relates: event_id %v is not an index", v)
		}
		ref.Index = int(v)
	case string:
		ref.Index, ref.Label = -1, v
	default:
		return nil, errors.New("relates needs an event_id: the index or label of an earlier event")
	}
	j, err := resolve("relates "+rt, &ref)
	if err != nil {
		return nil, err
	}
	r := &Relation{RelType: rt, Target: j, Fields: map[string]any{}}
	for k, v := range m {
		if k != "rel_type" && k != "event_id" {
			r.Fields[k] = v
		}
	}
	return r, nil
}

// Importable says whether every relation can be given to a bulk importer
// (fakehs.ImportRoom) by index: thread roots, edits and reactions can, a
// reply's m.in_reply_to can't, so a recording with replies must be sent.
func (rec *Recording) Importable() bool {
	for _, e := range rec.Events {
		if e.ReplyTo >= 0 || (e.Other != nil && len(e.Other.Fields) > 0) {
			return false
		}
	}
	return true
}

// Relation is event i's relation other than a thread: rel type, target index
// and annotation key; relType is "" when there is none.
func (rec *Recording) Relation(i int) (relType string, target int, key string) {
	e := rec.Events[i]
	switch {
	case e.Edits >= 0:
		return RelReplace, e.Edits, ""
	case e.ReactsTo >= 0:
		return RelAnnotate, e.ReactsTo, e.Key
	case e.Other != nil:
		return e.Other.RelType, e.Other.Target, ""
	}
	return "", -1, ""
}

// mentionRE finds @name in text; a name is followed by neither a name
// character nor ':' (which would make it a full user id already).
var mentionRE = regexp.MustCompile(`@([a-z][a-z0-9-]{0,31})([^a-z0-9:-]|$)`)

// Content is event i's content for the homeserver: members' "@name" turned
// into their user ids, m.mentions names into ids, an edit's m.new_content
// filled in, and, when ids holds the event ids of the earlier events,
// m.relates_to built from them. With ids nil, relations are left to the
// caller (an importer that takes them by index).
func (rec *Recording) Content(i int, user func(name string) id.UserID, ids []id.EventID) map[string]any {
	e := rec.Events[i]
	isMember := map[string]bool{}
	for _, m := range rec.Members {
		isMember[m] = true
	}
	c := mapIDs(e.Content, user, isMember).(map[string]any)
	if mm, ok := c["m.mentions"].(map[string]any); ok {
		if us, ok := mm["user_ids"].([]any); ok {
			for k, u := range us {
				if s, ok := u.(string); ok && isMember[s] {
					us[k] = string(user(s))
				}
			}
		}
	}
	if e.Edits >= 0 {
		if _, has := c["m.new_content"]; !has {
			nc := map[string]any{}
			for k, v := range c {
				if k != "m.mentions" {
					nc[k] = v
				}
			}
			c["m.new_content"] = nc
			if b, ok := c["body"].(string); ok {
				c["body"] = "* " + b
			}
		}
	}
	if ids == nil {
		return c
	}
	rel := map[string]any{}
	switch {
	case e.Thread >= 0:
		rel["rel_type"], rel["event_id"] = RelThread, string(ids[e.Thread])
		if e.ReplyTo >= 0 {
			rel["m.in_reply_to"] = map[string]any{"event_id": string(ids[e.ReplyTo])}
		} else {
			rel["is_falling_back"] = true
			rel["m.in_reply_to"] = map[string]any{"event_id": string(ids[rec.lastInThread(i, e.Thread)])}
		}
	case e.ReplyTo >= 0:
		rel["m.in_reply_to"] = map[string]any{"event_id": string(ids[e.ReplyTo])}
	case e.Edits >= 0:
		rel["rel_type"], rel["event_id"] = RelReplace, string(ids[e.Edits])
	case e.ReactsTo >= 0:
		rel["rel_type"], rel["event_id"], rel["key"] = RelAnnotate, string(ids[e.ReactsTo]), e.Key
	case e.Other != nil:
		for k, v := range e.Other.Fields {
			rel[k] = v
		}
		rel["rel_type"], rel["event_id"] = e.Other.RelType, string(ids[e.Other.Target])
		if e.ReplyTo >= 0 {
			rel["m.in_reply_to"] = map[string]any{"event_id": string(ids[e.ReplyTo])}
		}
	}
	if len(rel) > 0 {
		c["m.relates_to"] = rel
	}
	return c
}

// lastInThread is the latest event of thread root before event i, which a
// thread reply's fallback m.in_reply_to points at.
func (rec *Recording) lastInThread(i, root int) int {
	last := root
	for j := root + 1; j < i; j++ {
		if rec.Events[j].Thread == root {
			last = j
		}
	}
	return last
}

// mapIDs copies v, turning "@name" of members in strings into user ids.
func mapIDs(v any, user func(string) id.UserID, isMember map[string]bool) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = mapIDs(e, user, isMember)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for k, e := range x {
			out[k] = mapIDs(e, user, isMember)
		}
		return out
	case string:
		return mentionRE.ReplaceAllStringFunc(x, func(m string) string {
			sub := mentionRE.FindStringSubmatch(m)
			if !isMember[sub[1]] {
				return m
			}
			return string(user(sub[1])) + sub[2]
		})
	}
	return v
}

// IsHistory says whether event i is a message the history tools show: an
// m.room.message with a body that is not itself an edit.
func (rec *Recording) IsHistory(i int) bool {
	e := rec.Events[i]
	return e.Type == TypeMessage && e.Edits < 0
}

// Text is the body event i shows once edits apply: the latest edit by the
// original sender wins, as Synapse bundles it.
func (rec *Recording) Text(i int) string {
	e := rec.Events[i]
	body, _ := e.Content["body"].(string)
	for j := i + 1; j < len(rec.Events); j++ {
		ed := rec.Events[j]
		if ed.Edits != i || ed.Sender != e.Sender {
			continue
		}
		if nc, ok := ed.Content["m.new_content"].(map[string]any); ok {
			if b, ok := nc["body"].(string); ok {
				body = b
			}
			continue
		}
		body, _ = ed.Content["body"].(string)
	}
	return body
}

// Replies are the indexes of the history messages in thread root, in order.
func (rec *Recording) Replies(root int) []int {
	var out []int
	for j := root + 1; j < len(rec.Events); j++ {
		if rec.Events[j].Thread == root && rec.IsHistory(j) {
			out = append(out, j)
		}
	}
	return out
}

// TopLevel are the indexes of the history messages outside any thread, in order.
func (rec *Recording) TopLevel() []int {
	var out []int
	for i, e := range rec.Events {
		if e.Thread < 0 && rec.IsHistory(i) {
			out = append(out, i)
		}
	}
	return out
}

// Find is the index of the event labelled label.
func (rec *Recording) Find(label string) (int, error) {
	for i, e := range rec.Events {
		if e.Label == label {
			return i, nil
		}
	}
	return -1, fmt.Errorf("%s has no event labelled %q", rec.Path, label)
}

// Write renders rec in the file format of this Version, references by
// label where the target has one, else by index.
func (rec *Recording) Write(out io.Writer) error {
	ff := fileFormat{Version: Version, Name: rec.Name, Room: rec.Room, LeftOut: rec.LeftOut, Trace: rec.Trace, Events: []fileEvent{}}
	for _, m := range rec.Members {
		fm := fileMember{Name: m, Role: RoleHuman}
		if a, ok := rec.Agents[m]; ok {
			fm = fileMember{Name: m, Role: RoleAgent, Rooms: a.Rooms, Trigger: a.Trigger}
		}
		ff.Members = append(ff.Members, fm)
	}
	ref := func(j int) *Ref {
		if j < 0 {
			return nil
		}
		return &Ref{Index: j, Label: rec.Events[j].Label}
	}
	for _, e := range rec.Events {
		fe := fileEvent{Label: e.Label, Sender: e.Sender, TS: e.Timestamp.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
			Content: e.Content, Thread: ref(e.Thread), ReplyTo: ref(e.ReplyTo), Edits: ref(e.Edits),
			ReactsTo: ref(e.ReactsTo), Key: e.Key, Decrypted: e.Decrypted}
		if len(fe.Content) == 0 {
			fe.Content = nil
		}
		if e.Type != TypeMessage && !(e.Type == TypeReaction && e.ReactsTo >= 0) {
			fe.Type = e.Type
		}
		if o := e.Other; o != nil {
			fe.Relates = map[string]any{}
			for k, v := range o.Fields {
				fe.Relates[k] = v
			}
			fe.Relates["rel_type"] = o.RelType
			if l := rec.Events[o.Target].Label; l != "" {
				fe.Relates["event_id"] = l
			} else {
				fe.Relates["event_id"] = o.Target
			}
		}
		ff.Events = append(ff.Events, fe)
	}
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ff); err != nil {
		return fmt.Errorf("writing recording: %w", err)
	}
	return nil
}

// TextAs is Text with members' "@name" turned into user ids, as the replayed
// event reads back.
func (rec *Recording) TextAs(i int, user func(name string) id.UserID) string {
	isMember := map[string]bool{}
	for _, m := range rec.Members {
		isMember[m] = true
	}
	return mapIDs(rec.Text(i), user, isMember).(string)
}
