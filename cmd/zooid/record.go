package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/scenarios"
)

func cmdRecord(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return runRecord(ctx, args, stdout, stderr)
}

// recordOptions are the flags of `zooid record`.
type recordOptions struct {
	homeserver string
	token      string
	room       string
	limit      int
	strip      []string
}

// runRecord writes a recording of a room's latest events to stdout; what it
// had to leave out is said on stderr.
func runRecord(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("zooid record", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o recordOptions
	fs.StringVar(&o.homeserver, "homeserver", "", "homeserver base URL, e.g. http://127.0.0.1:8008")
	fs.StringVar(&o.token, "token", "", "access token of a member of the room")
	fs.StringVar(&o.room, "room", "", "room alias (#ops:server) or id (!abc:server)")
	fs.IntVar(&o.limit, "limit", 500, "record at most this many of the newest events")
	var strip stringList
	fs.Var(&strip, "strip-prefix", "prefix to cut from localparts to get names, e.g. zs- (repeatable)")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: zooid record --homeserver URL --token TOKEN --room '#alias:server' [--limit N] [--strip-prefix P] > scenarios/name.json")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	o.strip = strip
	var missing []string
	for _, f := range []struct{ name, v string }{{"--homeserver", o.homeserver}, {"--token", o.token}, {"--room", o.room}} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 || fs.NArg() > 0 || o.limit < 1 {
		fmt.Fprintf(stderr, "zooid record: need %s and a --limit of at least 1\n", strings.Join(missing, ", "))
		fs.Usage()
		return 2
	}
	rec, notes, err := record(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "zooid record: %v\n", err)
		return 1
	}
	for _, n := range notes {
		fmt.Fprintf(stderr, "zooid record: %s\n", n)
	}
	if err := rec.Write(stdout); err != nil {
		fmt.Fprintf(stderr, "zooid record: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "zooid record: %d events, %d members\n", len(rec.Events), len(rec.Members))
	return 0
}

// recordPage is how many events one /messages request asks for.
const recordPage = 100

// record reads the room backwards and turns its events into a recording:
// user ids into short names, event ids into indexes, state left out except
// who the members are. notes say what had to be dropped.
func record(ctx context.Context, o recordOptions) (*scenarios.Recording, []string, error) {
	cli, err := mautrix.NewClient(o.homeserver, "", o.token)
	if err != nil {
		return nil, nil, fmt.Errorf("client for %s: %w", o.homeserver, err)
	}
	roomID := id.RoomID(o.room)
	if strings.HasPrefix(o.room, "#") {
		res, err := cli.ResolveAlias(ctx, id.RoomAlias(o.room))
		if err != nil {
			return nil, nil, fmt.Errorf("resolving %s: %w", o.room, err)
		}
		roomID = res.RoomID
	} else if !strings.HasPrefix(o.room, "!") {
		return nil, nil, fmt.Errorf("--room %q is neither an alias (#ops:server) nor a room id (!abc:server)", o.room)
	}
	var newest []*event.Event // newest first
	var notes []string
	skipped, encrypted := 0, 0
	from := ""
	for len(newest) < o.limit {
		page, err := cli.Messages(ctx, roomID, from, "", mautrix.DirectionBackward, nil, min(recordPage, o.limit-len(newest)))
		if err != nil {
			return nil, nil, fmt.Errorf("reading %s: %w", o.room, err)
		}
		for _, e := range page.Chunk {
			switch {
			case e.StateKey != nil:
				continue // members are taken from the room's membership below
			case e.Unsigned.RedactedBecause != nil || len(e.Content.VeryRaw) <= 2:
				skipped++
				continue
			case e.Type == event.EventEncrypted:
				encrypted++ // ciphertext would replay as noise
				continue
			}
			newest = append(newest, e)
			if len(newest) == o.limit {
				break
			}
		}
		if page.End == "" || len(page.Chunk) == 0 {
			break
		}
		from = page.End
	}
	if skipped > 0 {
		notes = append(notes, fmt.Sprintf("left out %d redacted events", skipped))
	}
	if encrypted > 0 {
		notes = append(notes, fmt.Sprintf("left out %d encrypted events (zooid record does not decrypt)", encrypted))
	}
	slices.Reverse(newest)
	joined, err := cli.JoinedMembers(ctx, roomID)
	if err != nil {
		return nil, nil, fmt.Errorf("listing the members of %s: %w", o.room, err)
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
	names, err := shortNames(users, o.strip)
	if err != nil {
		return nil, nil, err
	}
	rec := &scenarios.Recording{Path: o.room}
	var nameContent struct {
		Name string `json:"name"`
	}
	if err := cli.StateEvent(ctx, roomID, event.StateRoomName, "", &nameContent); err == nil {
		rec.Name = nameContent.Name
	}
	for _, u := range users {
		rec.Members = append(rec.Members, names[u])
	}
	index := map[id.EventID]int{}
	dropped := 0
	for _, e := range newest {
		re, ok, err := recordedEvent(e, index, names)
		if err != nil {
			return nil, nil, fmt.Errorf("event %s: %w", e.ID, err)
		}
		if !ok {
			dropped++
			continue
		}
		index[e.ID] = len(rec.Events)
		rec.Events = append(rec.Events, re)
	}
	if dropped > 0 {
		notes = append(notes, fmt.Sprintf("left out %d events without a body or relating to events before the first recorded one (raise --limit to keep those)", dropped))
	}
	// What the loader refuses must not be written: a maintainer would only
	// find out when replaying.
	var b bytes.Buffer
	if err := rec.Write(&b); err != nil {
		return nil, nil, err
	}
	if _, err := scenarios.Parse(&b, o.room); err != nil {
		return nil, nil, fmt.Errorf("the recording does not load back: %w", err)
	}
	return rec, notes, nil
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

// recordedEvent converts one event; ok is false when it relates to an event
// outside the recording.
func recordedEvent(e *event.Event, index map[id.EventID]int, names map[id.UserID]string) (scenarios.Event, bool, error) {
	dec := json.NewDecoder(bytes.NewReader(e.Content.VeryRaw))
	dec.UseNumber() // integers stay integers
	var content map[string]any
	if err := dec.Decode(&content); err != nil {
		return scenarios.Event{}, false, fmt.Errorf("content is not a JSON object: %w", err)
	}
	out := scenarios.Event{Sender: names[e.Sender], Timestamp: time.UnixMilli(e.Timestamp).UTC(), Type: e.Type.Type,
		Thread: -1, ReplyTo: -1, Edits: -1, ReactsTo: -1}
	if raw, has := content["m.relates_to"]; has {
		delete(content, "m.relates_to")
		b, _ := json.Marshal(raw)
		var rel event.RelatesTo
		if err := json.Unmarshal(b, &rel); err != nil {
			return out, false, fmt.Errorf("m.relates_to: %w", err)
		}
		target := func(eid id.EventID) (int, bool) { i, ok := index[eid]; return i, ok }
		var ok bool
		switch string(rel.Type) {
		case "":
		case scenarios.RelThread:
			if out.Thread, ok = target(rel.EventID); !ok {
				return out, false, nil
			}
		case scenarios.RelReplace:
			if out.Edits, ok = target(rel.EventID); !ok {
				return out, false, nil
			}
		case scenarios.RelAnnotate:
			if out.ReactsTo, ok = target(rel.EventID); !ok {
				return out, false, nil
			}
			out.Key = rel.Key
		default:
			return out, false, errors.New("relation " + string(rel.Type) + " is not one a recording keeps (m.thread, m.replace, m.annotation, m.in_reply_to)")
		}
		// A thread's fallback m.in_reply_to only says "latest in thread"; a
		// real one says which message is answered.
		if reply := rel.GetNonFallbackReplyTo(); reply != "" && out.Edits < 0 && out.ReactsTo < 0 {
			if out.ReplyTo, ok = target(reply); !ok {
				return out, false, nil
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
	if out.Type == scenarios.TypeReaction && out.ReactsTo < 0 {
		return out, false, errors.New("a reaction without an m.annotation relation")
	}
	if _, hasBody := out.Content["body"].(string); out.Type == scenarios.TypeMessage && !hasBody {
		return out, false, nil // nothing to read back; Synapse keeps such events only after a redaction
	}
	return out, true, nil
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
