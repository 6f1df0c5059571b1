package recording

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// RecordOptions say which room Record reads, as whom, and what it knows
// about the agents.
type RecordOptions struct {
	// Homeserver is the base URL, e.g. http://127.0.0.1:8008.
	Homeserver string
	// Token is the access token: a member's, or the appservice's with AsUser.
	Token string
	// AsUser, when set, is the appservice user Token impersonates
	// (?user_id=); it must be a member of the room.
	AsUser id.UserID
	// Room is an alias (#ops:server) or a room id (!abc:server).
	Room string
	// Limit is how many of the newest events to keep at most.
	Limit int
	// Strip are prefixes cut from localparts to get names ("zs-").
	Strip []string
	// Names, when set, names these users outright (a test harness that
	// knows its own name mapping); others are named from their localpart.
	Names map[id.UserID]string
	// Agents are the users that were agents, with their rooms (full aliases
	// or ids, as zooid.yaml has them) and trigger; everyone else is a human.
	Agents map[id.UserID]Agent
	// Anonymize replaces people and words; see Recording.Anonymize.
	Anonymize bool
	// TraceFile is the daemon's flight recorder to carry along: a trace
	// directory (`zooid run --trace DIR`), whose files for the recorded room
	// are taken in segment order, or one file of JSON lines.
	TraceFile string
	// Decrypt, when set, decrypts an m.room.encrypted event with the keys
	// of the agent the recording reads as (zooid record --decrypt): one it
	// decrypts is recorded in plain text, marked Decrypted; one it cannot
	// is left out and counted, as without it.
	Decrypt func(ctx context.Context, evt *event.Event) (*event.Event, error)
}

// recordPage is how many events one /messages request asks for.
const recordPage = 100

// Record reads the room backwards and turns its events into a recording:
// user ids into short names, event ids into indexes, state left out except
// who the members are. notes say what had to be dropped.
func Record(ctx context.Context, o RecordOptions) (*Recording, []string, error) {
	if o.Limit < 1 {
		o.Limit = 500
	}
	cli, err := mautrix.NewClient(o.Homeserver, o.AsUser, o.Token)
	if err != nil {
		return nil, nil, fmt.Errorf("client for %s: %w", o.Homeserver, err)
	}
	cli.SetAppServiceUserID = o.AsUser != ""
	roomID := id.RoomID(o.Room)
	if strings.HasPrefix(o.Room, "#") {
		res, err := cli.ResolveAlias(ctx, id.RoomAlias(o.Room))
		if err != nil {
			return nil, nil, fmt.Errorf("resolving %s: %w", o.Room, err)
		}
		roomID = res.RoomID
	} else if !strings.HasPrefix(o.Room, "!") {
		return nil, nil, fmt.Errorf("--room %q is neither an alias (#ops:server) nor a room id (!abc:server)", o.Room)
	}
	var trace []json.RawMessage
	if o.TraceFile != "" {
		if trace, err = readTrace(o.TraceFile, roomID); err != nil {
			return nil, nil, err
		}
	}
	var newest []*event.Event // newest first
	decrypted := map[id.EventID]bool{}
	var notes []string
	leftOut := map[string]int{}
	from := ""
	for len(newest) < o.Limit {
		page, err := cli.Messages(ctx, roomID, from, "", mautrix.DirectionBackward, nil, min(recordPage, o.Limit-len(newest)))
		if err != nil {
			return nil, nil, fmt.Errorf("reading %s: %w", o.Room, err)
		}
		for _, e := range page.Chunk {
			switch {
			case e.StateKey != nil:
				continue // members are taken from the room's membership below
			case e.Unsigned.RedactedBecause != nil || len(e.Content.VeryRaw) <= 2:
				leftOut["redacted"]++
				continue
			case e.Type == event.EventEncrypted && o.Decrypt != nil:
				e.RoomID = roomID
				dec, err := o.Decrypt(ctx, e)
				if err != nil {
					leftOut["encrypted"]++
					continue
				}
				decrypted[dec.ID] = true
				e = dec
			case e.Type == event.EventEncrypted:
				leftOut["encrypted"]++ // ciphertext would replay as noise
				continue
			}
			newest = append(newest, e)
			if len(newest) == o.Limit {
				break
			}
		}
		if page.End == "" || len(page.Chunk) == 0 {
			break
		}
		from = page.End
	}
	slices.Reverse(newest)
	joined, err := cli.JoinedMembers(ctx, roomID)
	if err != nil {
		return nil, nil, fmt.Errorf("listing the members of %s: %w", o.Room, err)
	}
	users := make([]id.UserID, 0, len(joined.Joined))
	for u := range joined.Joined {
		users = append(users, u)
	}
	for _, e := range newest {
		if !slices.Contains(users, e.Sender) {
			users = append(users, e.Sender)
		}
	}
	slices.Sort(users)
	var rest []id.UserID
	for _, u := range users {
		if _, ok := o.Names[u]; !ok {
			rest = append(rest, u)
		}
	}
	names, err := shortNames(rest, o.Strip)
	if err != nil {
		return nil, nil, err
	}
	for _, u := range users {
		if n, ok := o.Names[u]; ok {
			names[u] = n
		}
	}
	rec := &Recording{Path: o.Room, Version: Version, Agents: map[string]Agent{}, Trace: trace}
	if strings.HasPrefix(o.Room, "#") {
		rec.Room = shortRoom(o.Room)
	}
	var nameContent struct {
		Name string `json:"name"`
	}
	if err := cli.StateEvent(ctx, roomID, event.StateRoomName, "", &nameContent); err == nil {
		rec.Name = nameContent.Name
	}
	for _, u := range users {
		rec.Members = append(rec.Members, names[u])
		if a, ok := o.Agents[u]; ok {
			short := Agent{Trigger: a.Trigger}
			for _, r := range a.Rooms {
				if sr := shortRoom(r); sr != "" && !slices.Contains(short.Rooms, sr) {
					short.Rooms = append(short.Rooms, sr)
				}
			}
			// It is in the recorded room, so bound to it, perhaps by room id.
			if rec.Room != "" && !slices.Contains(short.Rooms, rec.Room) {
				short.Rooms = append(short.Rooms, rec.Room)
			}
			rec.Agents[names[u]] = short
		}
	}
	index := map[id.EventID]int{}
	for _, e := range newest {
		re, why, err := recordedEvent(e, index, names)
		if err != nil {
			return nil, nil, fmt.Errorf("event %s: %w", e.ID, err)
		}
		if why != "" {
			leftOut[why]++
			continue
		}
		re.Decrypted = decrypted[e.ID]
		index[e.ID] = len(rec.Events)
		rec.Events = append(rec.Events, re)
	}
	for _, k := range []string{"encrypted", "redacted", "outside_window", "no_body", "malformed"} {
		n := leftOut[k]
		if n == 0 {
			continue
		}
		why := leftOutWhy[k]
		if k == "encrypted" && o.Decrypt != nil {
			why = "encrypted events the agent's device holds no room key for (sent before its device existed, or to a device list without it); the gap is counted under left_out"
		}
		notes = append(notes, fmt.Sprintf("warning: left out %d %s", n, why))
	}
	if n := len(decrypted); n > 0 {
		notes = append(notes, fmt.Sprintf("decrypted %d encrypted events with the agent's device; each is marked \"decrypted\": true and holds the plain text", n))
	}
	if len(leftOut) > 0 {
		rec.LeftOut = leftOut
	}
	if o.Anonymize {
		rec.Anonymize()
		if len(trace) > 0 {
			notes = append(notes, "warning: --anonymize dropped the trace (it holds the original words)")
		}
	} else {
		rec.LabelThreads()
	}
	// What the loader refuses must not be written: a maintainer would only
	// find out when replaying.
	var b bytes.Buffer
	if err := rec.Write(&b); err != nil {
		return nil, nil, err
	}
	if _, err := Parse(&b, o.Room); err != nil {
		return nil, nil, fmt.Errorf("the recording does not load back: %w", err)
	}
	return rec, notes, nil
}

// leftOutWhy explains each reason Record leaves an event out.
var leftOutWhy = map[string]string{
	"encrypted":      "encrypted events: the room is end-to-end encrypted and zooid record read it without keys (--decrypt reads it with an agent's device: docs/security.md, \"Encrypted rooms\"); the gap is counted under left_out",
	"redacted":       "redacted events",
	"outside_window": "events relating to events before the first recorded one (raise --limit to keep those)",
	"no_body":        "messages without a body",
	"malformed":      "malformed events (a reaction without an m.annotation relation)",
}

// shortRoom is how steps name a room given as an alias: "#Ops:server" →
// "#ops"; "" for a room id or a name steps can't use.
func shortRoom(r string) string {
	if !strings.HasPrefix(r, "#") {
		return ""
	}
	lp, _, _ := strings.Cut(r[1:], ":")
	s := "#" + strings.Trim(nameChars.ReplaceAllString(strings.ToLower(lp), "-"), "-")
	if !roomRE.MatchString(s) {
		return ""
	}
	return s
}

// readTrace reads the flight recorder of room: every line of a file, or of
// a directory the files whose header names the room, oldest segment first
// (file names end in the segment number, so name order is segment order).
func readTrace(path string, room id.RoomID) ([]json.RawMessage, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("reading the trace: %w", err)
	}
	if !st.IsDir() {
		return readTraceFile(path, "")
	}
	files, err := filepath.Glob(filepath.Join(path, "*.jsonl"))
	if err != nil {
		return nil, fmt.Errorf("reading the trace: %w", err)
	}
	slices.Sort(files)
	var out []json.RawMessage
	for _, f := range files {
		lines, err := readTraceFile(f, room)
		if err != nil {
			return nil, err
		}
		out = append(out, lines...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("the trace %s has no file for room %s", path, room)
	}
	return out, nil
}

// readTraceFile reads one trace file: one JSON object a line. With room
// set, a file whose first line (the header) names another room is skipped.
// A last line without its newline is a record the daemon is still writing
// (the writer puts each line with its newline in one write; a reader of a
// live trace can see part of it): it is left for the next read, not called
// broken. A line that ends but does not parse is broken.
func readTraceFile(path string, room id.RoomID) ([]json.RawMessage, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the trace: %w", err)
	}
	defer f.Close()
	var out []json.RawMessage
	rd := bufio.NewReaderSize(f, 64*1024)
	for n := 1; ; n++ {
		raw, err := rd.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			break // raw, if any, is the unfinished last line
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", path, err)
		}
		line := bytes.TrimSpace(raw)
		if len(line) == 0 {
			continue
		}
		var obj map[string]any
		if err := json.Unmarshal(line, &obj); err != nil {
			return nil, fmt.Errorf("%s:%d: a trace line is one JSON object: %w", path, n, err)
		}
		if n == 1 && room != "" {
			if r, _ := obj["room"].(string); r != string(room) {
				return nil, nil
			}
		}
		out = append(out, json.RawMessage(bytes.Clone(line)))
	}
	return out, nil
}

// nameChars is what may stay of a localpart in a name.
var nameChars = regexp.MustCompile(`[^a-z0-9-]+`)

// shortNames turns user ids into the names steps use: localparts, minus a
// stripped prefix, lowercased, other characters as '-'.
func shortNames(users []id.UserID, strip []string) (map[id.UserID]string, error) {
	out := make(map[id.UserID]string, len(users))
	taken := map[string]id.UserID{}
	for _, u := range users {
		lp := strings.ToLower(u.Localpart())
		for _, p := range strip {
			if s, ok := strings.CutPrefix(lp, p); ok && s != "" {
				lp = s
				break
			}
		}
		n := strings.Trim(nameChars.ReplaceAllString(lp, "-"), "-")
		if n == "" || n[0] < 'a' || n[0] > 'z' {
			n = "u-" + n
		}
		if len(n) > 32 {
			n = n[:32]
		}
		if other, dup := taken[n]; dup {
			return nil, fmt.Errorf("%s and %s would both be called %q; rename one with --strip-prefix or edit the file by hand", other, u, n)
		}
		taken[n] = u
		out[u] = n
	}
	return out, nil
}

// recordedEvent converts one event; why is the left_out reason when it
// can't be kept (it relates to an event outside the recording, or a
// message has no body). Every relation is kept: thread, reply, edit and
// annotation as such, any other rel_type verbatim.
func recordedEvent(e *event.Event, index map[id.EventID]int, names map[id.UserID]string) (Event, string, error) {
	dec := json.NewDecoder(bytes.NewReader(e.Content.VeryRaw))
	dec.UseNumber() // integers stay integers
	var content map[string]any
	if err := dec.Decode(&content); err != nil {
		return Event{}, "", fmt.Errorf("content is not a JSON object: %w", err)
	}
	out := Event{Sender: names[e.Sender], Timestamp: time.UnixMilli(e.Timestamp).UTC(), Type: e.Type.Type,
		Thread: -1, ReplyTo: -1, Edits: -1, ReactsTo: -1}
	if raw, has := content["m.relates_to"]; has {
		delete(content, "m.relates_to")
		b, _ := json.Marshal(raw)
		var rel event.RelatesTo
		if err := json.Unmarshal(b, &rel); err != nil {
			return out, "malformed", nil
		}
		target := func(eid id.EventID) (int, bool) { i, ok := index[eid]; return i, ok }
		var ok bool
		switch string(rel.Type) {
		case "":
		case RelThread:
			if out.Thread, ok = target(rel.EventID); !ok {
				return out, "outside_window", nil
			}
		case RelReplace:
			if out.Edits, ok = target(rel.EventID); !ok {
				return out, "outside_window", nil
			}
		case RelAnnotate:
			if out.ReactsTo, ok = target(rel.EventID); !ok {
				return out, "outside_window", nil
			}
			out.Key = rel.Key
		default:
			t, ok := target(rel.EventID)
			if !ok {
				return out, "outside_window", nil
			}
			var fields map[string]any
			d := json.NewDecoder(bytes.NewReader(b))
			d.UseNumber()
			if err := d.Decode(&fields); err != nil {
				return out, "malformed", nil
			}
			for _, k := range []string{"rel_type", "event_id", "m.in_reply_to"} {
				delete(fields, k)
			}
			out.Other = &Relation{RelType: string(rel.Type), Target: t, Fields: shortenIDs(fields, names).(map[string]any)}
		}
		// A thread's fallback m.in_reply_to only says "latest in thread"; a
		// real one says which message is answered.
		if reply := rel.GetNonFallbackReplyTo(); reply != "" && out.Edits < 0 && out.ReactsTo < 0 {
			if out.ReplyTo, ok = target(reply); !ok {
				return out, "outside_window", nil
			}
		}
	}
	out.Content = shortenIDs(content, names).(map[string]any)
	if mm, ok := out.Content["m.mentions"].(map[string]any); ok {
		if us, ok := mm["user_ids"].([]any); ok {
			for k, u := range us {
				// shortenIDs made member ids "@name"; m.mentions speaks in bare names.
				if s, ok := u.(string); ok && strings.HasPrefix(s, "@") && !strings.Contains(s, ":") {
					us[k] = s[1:]
				}
			}
		}
	}
	if len(out.Content) == 0 {
		out.Content = nil
	}
	if out.Type == TypeReaction && out.ReactsTo < 0 {
		return out, "malformed", nil
	}
	if _, hasBody := out.Content["body"].(string); out.Type == TypeMessage && !hasBody {
		return out, "no_body", nil // nothing to read back; Synapse keeps such events only after a redaction
	}
	return out, "", nil
}

// shortenIDs copies v, turning members' user ids inside strings into "@name".
func shortenIDs(v any, names map[id.UserID]string) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = shortenIDs(e, names)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for k, e := range x {
			out[k] = shortenIDs(e, names)
		}
		return out
	case string:
		if !strings.Contains(x, "@") {
			return x
		}
		// Longest ids first, so @ori:example.org.uk is not cut at @ori:example.org.
		ids := make([]string, 0, len(names))
		for u := range names {
			ids = append(ids, string(u))
		}
		slices.SortFunc(ids, func(a, b string) int { return len(b) - len(a) })
		for _, full := range ids {
			x = strings.ReplaceAll(x, full, "@"+names[id.UserID(full)])
		}
		return x
	}
	return v
}
