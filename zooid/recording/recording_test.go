package recording

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"maunium.net/go/mautrix/id"
)

// shipped is the repository's folder of recordings.
const shipped = "../../scenarios/"

func user(n string) id.UserID { return id.NewUserID("x-"+n, "example.org") }

func TestLoadShippedRecordings(t *testing.T) {
	paths, err := filepath.Glob(shipped + "*.json")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no recordings found: %v", err)
	}
	for _, p := range paths {
		rec, err := Load(p)
		if err != nil {
			t.Fatalf("%v", err)
		}
		if len(rec.Events) == 0 || len(rec.TopLevel()) == 0 {
			t.Errorf("%s: an empty recording is no scenario", p)
		}
	}
}

func TestIncidentRecordingShape(t *testing.T) {
	rec, err := Load(shipped + "svc-a-incident.json")
	if err != nil {
		t.Fatal(err)
	}
	alarm, _ := rec.Find("svc-a-p99-latency")
	if got := rec.Replies(alarm); !reflect.DeepEqual(got, []int{1, 2, 3, 4}) {
		t.Errorf("alarm thread replies = %v", got)
	}
	status := 10
	if got := rec.Text(status); got != "status page updated: svc-a degraded 09:02–09:14, mitigated by rollback" {
		t.Errorf("edited status shows %q", got)
	}
	if rec.IsHistory(status + 1) {
		t.Error("the edit itself counts as history")
	}
	if got, want := rec.TopLevel(), []int{0, 5, 10, 12, 17}; !reflect.DeepEqual(got, want) {
		t.Errorf("top level = %v, want %v", got, want)
	}
	if !rec.Importable() {
		t.Error("the incident has no rich replies, so it should import")
	}
	if rel, target, key := rec.Relation(7); rel != RelAnnotate || key != "✅" || target != 4 {
		t.Errorf("relation of the reaction = %s %d %s", rel, target, key)
	}
	if rec.Events[7].Type != TypeReaction {
		t.Errorf("a reacts_to event defaults to %s, got %s", TypeReaction, rec.Events[7].Type)
	}
}

func TestContentMapsNamesAndBuildsRelations(t *testing.T) {
	rec, err := Load(shipped + "deploy-review.json")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Importable() {
		t.Error("a recording with reply_to can't be imported by index")
	}
	ids := make([]id.EventID, len(rec.Events))
	for i := range ids {
		ids[i] = id.EventID("$e" + string(rune('a'+i)))
	}
	// A thread reply that answers a particular reply: not falling back.
	c := rec.Content(4, user, ids)
	want := map[string]any{"rel_type": RelThread, "event_id": "$eb", "m.in_reply_to": map[string]any{"event_id": "$ed"}}
	if !reflect.DeepEqual(c["m.relates_to"], want) {
		t.Errorf("relates_to = %#v, want %#v", c["m.relates_to"], want)
	}
	// A plain thread reply falls back to the thread's latest event.
	c = rec.Content(3, user, ids)
	rel := c["m.relates_to"].(map[string]any)
	if rel["is_falling_back"] != true || rel["m.in_reply_to"].(map[string]any)["event_id"] != "$ec" {
		t.Errorf("fallback relation = %#v", rel)
	}
	c = rec.Content(1, user, ids)
	if !strings.Contains(c["body"].(string), "<@x-kai:example.org>") {
		t.Errorf("@kai was not turned into kai's id: %q", c["body"])
	}
	if _, has := rec.Content(1, user, nil)["m.relates_to"]; has {
		t.Error("without ids, relations are left to the importer")
	}
	if c := rec.Content(5, user, ids); c["m.relates_to"].(map[string]any)["key"] != "🚀" {
		t.Errorf("reaction content = %#v", c)
	}
}

func TestEditContentGetsNewContent(t *testing.T) {
	rec, err := Load(shipped + "svc-a-incident.json")
	if err != nil {
		t.Fatal(err)
	}
	c := rec.Content(0, user, nil)
	if got := c["m.mentions"].(map[string]any)["user_ids"].([]any)[0]; got != "@x-agent-a:example.org" {
		t.Errorf("m.mentions name not mapped: %v", got)
	}
	if !strings.Contains(c["body"].(string), "@x-agent-a:example.org can you") {
		t.Errorf("body mention not mapped: %q", c["body"])
	}
	if rec.Events[0].Content["m.mentions"].(map[string]any)["user_ids"].([]any)[0] != "agent-a" {
		t.Error("Content changed the recording")
	}
	c = rec.Content(11, user, []id.EventID{"$0", "$1", "$2", "$3", "$4", "$5", "$6", "$7", "$8", "$9", "$10"})
	nc, _ := c["m.new_content"].(map[string]any)
	if nc["body"] != "status page updated: svc-a degraded 09:02–09:14, mitigated by rollback" || !strings.HasPrefix(c["body"].(string), "* ") {
		t.Errorf("edit content = %#v", c)
	}
	if r := c["m.relates_to"].(map[string]any); r["rel_type"] != RelReplace || r["event_id"] != "$10" {
		t.Errorf("edit relation = %#v", r)
	}
}

func TestBadInputNamesFileAndEvent(t *testing.T) {
	ev := func(s string) string {
		return `{"members": ["ori", "agent-a"], "events": [
			{"label": "root", "sender": "ori", "ts": "2026-03-02T09:00:00Z", "content": {"msgtype": "m.text", "body": "root"}},
			{"label": "reply", "sender": "ori", "ts": "2026-03-02T09:00:01Z", "thread": "root", "content": {"msgtype": "m.text", "body": "reply"}},
			` + s + `]}`
	}
	cases := []struct{ name, file, want string }{
		{"unknown sender", ev(`{"sender": "zed", "ts": "2026-03-02T09:00:02Z", "content": {"body": "x"}}`), `event 2: sender "zed" is not a member`},
		{"later event", ev(`{"sender": "ori", "ts": "2026-03-02T09:00:02Z", "thread": 3, "content": {"body": "x"}}`), "event 2: thread 3: must be an earlier event"},
		{"itself", ev(`{"sender": "ori", "ts": "2026-03-02T09:00:02Z", "edits": 2, "content": {"body": "x"}}`), "event 2: edits 2: must be an earlier event"},
		{"unknown label", ev(`{"sender": "ori", "ts": "2026-03-02T09:00:02Z", "thread": "nope", "content": {"body": "x"}}`), `event 2: thread "nope": no earlier event has that label`},
		{"thread of a thread reply", ev(`{"sender": "ori", "ts": "2026-03-02T09:00:02Z", "thread": "reply", "content": {"body": "x"}}`), "event 2: thread 1: that event has a relation itself"},
		{"bad timestamp", ev(`{"sender": "ori", "ts": "yesterday", "content": {"body": "x"}}`), `event 2: timestamp "yesterday" is not RFC 3339`},
		{"missing timestamp", ev(`{"sender": "ori", "content": {"body": "x"}}`), `event 2: timestamp "" is not RFC 3339`},
		{"reaction without key", ev(`{"sender": "ori", "ts": "2026-03-02T09:00:02Z", "reacts_to": 0}`), "event 2: a reaction needs a key"},
		{"two relations", ev(`{"sender": "ori", "ts": "2026-03-02T09:00:02Z", "thread": 0, "edits": 0, "content": {"body": "x"}}`), "event 2: an event has one relation"},
		{"raw relates_to", ev(`{"sender": "ori", "ts": "2026-03-02T09:00:02Z", "content": {"body": "x", "m.relates_to": {}}}`), "event 2: content has m.relates_to"},
		{"no body", ev(`{"sender": "ori", "ts": "2026-03-02T09:00:02Z", "content": {"msgtype": "m.text"}}`), "event 2: a message's content needs a body"},
		{"reply outside thread", ev(`{"sender": "ori", "ts": "2026-03-02T09:00:02Z", "content": {"body": "x"}}, {"label": "r2", "sender": "ori", "ts": "2026-03-02T09:00:03Z", "content": {"body": "y"}}, {"sender": "ori", "ts": "2026-03-02T09:00:04Z", "thread": "root", "reply_to": "r2", "content": {"body": "z"}}`), "event 4: reply_to 3 is not in thread 0"},
		{"duplicate label", ev(`{"label": "root", "sender": "ori", "ts": "2026-03-02T09:00:02Z", "content": {"body": "x"}}`), `event 2: label "root" is already event 0's`},
		{"numeric label", ev(`{"label": "12", "sender": "ori", "ts": "2026-03-02T09:00:02Z", "content": {"body": "x"}}`), `event 2: label "12"`},
		{"bad member", `{"members": ["Ori"], "events": []}`, `member 0 "Ori" is not a name`},
		{"unknown field", `{"members": [], "events": [], "rooms": "#ops"}`, `unknown field "rooms"`},
		{"not json", `{"members": [`, "not a recording"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.file), "scenarios/bad.json")
			if err == nil {
				t.Fatalf("accepted; want an error containing %q", tc.want)
			}
			if !regexp.MustCompile(`^scenarios/bad\.json:\d+: `).MatchString(err.Error()) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q: want the file name, line and %q", err, tc.want)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	if _, err := Load(filepath.Join(t.TempDir(), "nope.json")); err == nil || !strings.Contains(err.Error(), "nope.json") {
		t.Errorf("want an error naming the file, got %v", err)
	}
}

func TestWriteRoundTrips(t *testing.T) {
	for _, p := range []string{shipped + "svc-a-incident.json", shipped + "deploy-review.json"} {
		rec, err := Load(p)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		if err := rec.Write(&b); err != nil {
			t.Fatal(err)
		}
		again, err := Parse(bytes.NewReader(b.Bytes()), p+" (rewritten)")
		if err != nil {
			t.Fatalf("%v\n%s", err, b.String())
		}
		again.Path, again.Version = rec.Path, rec.Version
		if !strings.Contains(b.String(), `"version": 2`) {
			t.Errorf("%s: written without the version", p)
		}
		if !reflect.DeepEqual(normal(t, rec), normal(t, again)) {
			t.Errorf("%s changed on a write and load:\n%s", p, b.String())
		}
	}
}

// normal is rec through JSON, so numbers compare alike.
func normal(t *testing.T, rec *Recording) any {
	t.Helper()
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestTextAsMapsMembersOnly(t *testing.T) {
	rec, err := Parse(strings.NewReader(`{"members": ["ori", "agent-a"], "events": [
		{"sender": "ori", "ts": "2026-03-02T09:00:00Z", "content": {"body": "@agent-a ping, cc @zed and @ori:elsewhere"}},
		{"sender": "ori", "ts": "2026-03-02T09:00:01Z", "edits": 0, "content": {"body": "@agent-a pong"}},
		{"sender": "agent-a", "ts": "2026-03-02T09:00:02Z", "edits": 0, "content": {"body": "not applied: another sender"}}]}`), "t.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := rec.TextAs(0, user); got != "@x-agent-a:example.org pong" {
		t.Errorf("TextAs = %q", got)
	}
	if got := mapIDs("@agent-a ping, cc @zed and @ori:elsewhere", user, map[string]bool{"ori": true, "agent-a": true}); got != "@x-agent-a:example.org ping, cc @zed and @ori:elsewhere" {
		t.Errorf("mapIDs = %q", got)
	}
}

// TestVersionsAndLines: a file without a version is version 1 and loads; a
// newer one, a bad one and broken JSON are refused with the line and reason.
func TestVersionsAndLines(t *testing.T) {
	cases := []struct{ name, file, want string }{
		{"newer", "{\n  \"version\": 3,\n  \"members\": [], \"events\": []}", "x.json:2: version 3 is newer than this zooid reads (up to 2)"},
		{"not a number", "{\"members\": [],\n\"version\": \"two\", \"events\": []}", "x.json:2: version \"two\": want a whole number from 1 to 2"},
		{"syntax", "{\"members\": [],\n\"events\": [\n{\"sender\": \"ori\",,}]}", "x.json:3: not a recording: invalid character ','"},
		{"wrong type in an event", "{\"version\": 2, \"members\": [\"ori\"],\n\"events\": [\n{\"sender\": \"ori\", \"ts\": \"2026-03-02T09:00:00Z\", \"content\": {\"body\": \"a\"}},\n{\"sender\": 7}]}", "x.json:4: event 1: json: cannot unmarshal number"},
		{"bad event on its line", "{\"members\": [\"ori\"],\n\"events\": [\n{\"sender\": \"ori\", \"ts\": \"2026-03-02T09:00:00Z\", \"content\": {\"body\": \"a\"}},\n\n  {\"sender\": \"zed\", \"ts\": \"2026-03-02T09:00:00Z\"}]}", "x.json:5: event 1: sender \"zed\" is not a member"},
		{"bad role", "{\"version\": 2,\n\"members\": [{\"name\": \"ori\", \"role\": \"bot\"}], \"events\": []}", "x.json:2: member \"ori\": role \"bot\", want human or agent"},
		{"bad trigger", "{\"version\": 2,\n\"members\": [{\"name\": \"a\", \"role\": \"agent\", \"trigger\": \"all\"}], \"events\": []}", "x.json:2: member \"a\": trigger \"all\", want mention or any"},
		{"trace not objects", "{\"version\": 2, \"members\": [],\n\"trace\": [1], \"events\": []}", "x.json:2: trace line 0 is not a JSON object"},
		{"relates to a later event", "{\"version\": 2, \"members\": [\"ori\"], \"events\": [\n{\"sender\": \"ori\", \"ts\": \"2026-03-02T09:00:00Z\", \"type\": \"m.poll.response\", \"relates\": {\"rel_type\": \"m.reference\", \"event_id\": 0}}]}", "x.json:2: event 0: relates m.reference 0: must be an earlier event"},
		{"relates as thread", "{\"version\": 2, \"members\": [\"ori\"], \"events\": [\n{\"sender\": \"ori\", \"ts\": \"2026-03-02T09:00:00Z\", \"content\": {\"body\": \"a\"}},\n{\"sender\": \"ori\", \"ts\": \"2026-03-02T09:00:00Z\", \"content\": {\"body\": \"a\"}, \"relates\": {\"rel_type\": \"m.thread\", \"event_id\": 0}}]}", "x.json:3: event 1: relates: write m.thread as thread"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(strings.NewReader(tc.file), "x.json")
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("error %v, want it to start %q", err, tc.want)
			}
		})
	}
	v1, err := Load(shipped + "deploy-review.json")
	if err != nil {
		t.Fatal(err)
	}
	if v1.Version != 1 || len(v1.Agents) != 0 {
		t.Errorf("a file without a version loads as version %d with agents %v; want 1 and none", v1.Version, v1.Agents)
	}
}

// TestVersion2KeepsRolesRelationsAndTrace: what version 2 adds survives a
// write and load, and other relations reach the homeserver verbatim.
func TestVersion2KeepsRolesRelationsAndTrace(t *testing.T) {
	src := `{"version": 2, "name": "r", "room": "#ops",
	  "members": [{"name": "ori", "role": "human"}, "mia", {"name": "agent-a", "role": "agent", "rooms": ["#ops", "#dev"], "trigger": "any"}],
	  "left_out": {"encrypted": 2},
	  "events": [
	    {"label": "poll", "sender": "ori", "ts": "2026-03-02T09:00:00Z", "type": "org.matrix.msc3381.poll.start", "content": {"org.matrix.msc3381.poll.start": {"question": {"body": "lunch?"}}}},
	    {"sender": "mia", "ts": "2026-03-02T09:00:01Z", "type": "org.matrix.msc3381.poll.response", "relates": {"rel_type": "m.reference", "event_id": "poll"}, "content": {"org.matrix.msc3381.poll.response": {"answers": ["a"]}}},
	    {"sender": "mia", "ts": "2026-03-02T09:00:02Z", "relates": {"rel_type": "com.example.custom", "event_id": 0, "extra": [1, "two"]}, "content": {"msgtype": "m.text", "body": "x"}}
	  ],
	  "trace": [{"kind": "inbound", "event": 0}]}`
	rec, err := Parse(strings.NewReader(src), "v2.json")
	if err != nil {
		t.Fatal(err)
	}
	if a := rec.Agents["agent-a"]; !reflect.DeepEqual(a.Rooms, []string{"#ops", "#dev"}) || a.Trigger != "any" || len(rec.Agents) != 1 {
		t.Errorf("agents %+v", rec.Agents)
	}
	if rec.Room != "#ops" || rec.LeftOut["encrypted"] != 2 || len(rec.Trace) != 1 {
		t.Errorf("room %q, left out %v, trace %d lines", rec.Room, rec.LeftOut, len(rec.Trace))
	}
	ids := []id.EventID{"$0", "$1", "$2"}
	if got := rec.Content(1, user, ids)["m.relates_to"]; !reflect.DeepEqual(got, map[string]any{"rel_type": "m.reference", "event_id": "$0"}) {
		t.Errorf("reference relation %#v", got)
	}
	if got := rec.Content(2, user, ids)["m.relates_to"]; !reflect.DeepEqual(got, map[string]any{"rel_type": "com.example.custom", "event_id": "$0", "extra": []any{1.0, "two"}}) {
		t.Errorf("unknown relation %#v", got)
	}
	if rec.Importable() {
		t.Error("a relation with extra fields can't go through an importer by index")
	}
	var b bytes.Buffer
	if err := rec.Write(&b); err != nil {
		t.Fatal(err)
	}
	again, err := Parse(bytes.NewReader(b.Bytes()), "v2.json")
	if err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if !reflect.DeepEqual(normal(t, rec), normal(t, again)) {
		t.Errorf("changed on a write and load:\n%s", b.String())
	}
}
