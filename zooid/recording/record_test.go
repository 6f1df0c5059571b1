package recording

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"maunium.net/go/mautrix/id"
)

func TestRecordShortNamesAndPrefixes(t *testing.T) {
	users := []id.UserID{"@zs-agent-a:localhost", "@Ori:example.org", "@1bot:example.org"}
	got, err := shortNames(users, []string{"zs-"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[id.UserID]string{"@zs-agent-a:localhost": "agent-a", "@Ori:example.org": "ori", "@1bot:example.org": "u-1bot"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("names %v, want %v", got, want)
	}
	if _, err := shortNames([]id.UserID{"@ori:a.org", "@ori:b.org"}, nil); err == nil || !strings.Contains(err.Error(), `would both be called "ori"`) {
		t.Errorf("want a collision error, got %v", err)
	}
}

func TestLabelThreadsStableAndUnique(t *testing.T) {
	rec, err := Parse(strings.NewReader(`{"members": ["ori", "agent-a"], "events": [
		{"sender": "ori", "ts": "2026-03-02T09:00:00Z", "content": {"body": "@agent-a 42 things broke!"}},
		{"sender": "agent-a", "ts": "2026-03-02T09:00:01Z", "thread": 0, "content": {"body": "looking"}},
		{"sender": "ori", "ts": "2026-03-02T09:00:02Z", "content": {"body": "42 things, broke"}},
		{"sender": "agent-a", "ts": "2026-03-02T09:00:03Z", "thread": 2, "content": {"body": "again"}},
		{"label": "kept", "sender": "ori", "ts": "2026-03-02T09:00:04Z", "content": {"body": "already labelled"}},
		{"sender": "ori", "ts": "2026-03-02T09:00:05Z", "thread": 4, "content": {"body": "x"}},
		{"sender": "ori", "ts": "2026-03-02T09:00:06Z", "content": {"body": "🔥🔥"}},
		{"sender": "ori", "ts": "2026-03-02T09:00:07Z", "thread": 6, "content": {"body": "y"}},
		{"sender": "ori", "ts": "2026-03-02T09:00:08Z", "content": {"body": "no replies, no label"}}]}`), "l.json")
	if err != nil {
		t.Fatal(err)
	}
	rec.LabelThreads()
	var got []string
	for _, e := range rec.Events {
		got = append(got, e.Label)
	}
	want := []string{"thread-42-things-broke", "", "thread-42-things-broke-2", "", "kept", "", "thread", "", ""}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("labels %q, want %q", got, want)
	}
	var b strings.Builder
	if err := rec.Write(&b); err != nil {
		t.Fatal(err)
	}
	if _, err := Parse(strings.NewReader(b.String()), "l.json"); err != nil {
		t.Errorf("labelled recording does not load: %v", err)
	}
}

func TestAnonymizeKeepsHTMLAndMentionPills(t *testing.T) {
	rec, err := Parse(strings.NewReader(`{"version": 2, "members": ["ori", {"name": "agent-a", "role": "agent"}], "events": [
		{"sender": "ori", "ts": "2026-03-02T09:00:00Z", "content": {"msgtype": "m.text", "body": "Hi @agent-a, see @ori",
		 "format": "org.matrix.custom.html", "formatted_body": "Hi <a href=\"https://matrix.to/#/@agent-a\">Agent</a>, see <b>@ori</b>"}}]}`), "a.json")
	if err != nil {
		t.Fatal(err)
	}
	rec.Anonymize()
	c := rec.Events[0].Content
	fb, _ := c["formatted_body"].(string)
	if !regexp.MustCompile(`^[A-Z][a-z] <a href="https://matrix.to/#/@agent-a">[A-Z][a-z]{4}</a>, [a-z]{3} <b>@person-1</b>$`).MatchString(fb) {
		t.Errorf("formatted_body %q: want the tags and mentions kept, the words replaced", fb)
	}
	if b, _ := c["body"].(string); !regexp.MustCompile(`^[A-Z][a-z] @agent-a, [a-z]{3} @person-1$`).MatchString(b) {
		t.Errorf("body %q", b)
	}
	if c["format"] != "org.matrix.custom.html" || c["msgtype"] != "m.text" {
		t.Errorf("structure changed: %v", c)
	}
}

// A live trace is read while the daemon writes it: a last line without its
// newline is a record still being written and is left out, while a line that
// ended broken is refused with its place.
func TestReadTraceLeavesAnUnfinishedLastLine(t *testing.T) {
	dir := t.TempDir()
	const room = "!r:localhost"
	head := `{"format":"zooid-trace","version":1,"room":"` + room + `","segment":1}` + "\n" + `{"seq":1,"kind":"start","room":"` + room + `"}` + "\n"
	path := filepath.Join(dir, "r.000001.jsonl")
	if err := os.WriteFile(path, []byte(head+`{"seq":2,"kind":"ev`), 0o600); err != nil {
		t.Fatal(err)
	}
	lines, err := readTrace(dir, room)
	if err != nil {
		t.Fatalf("reading a trace whose last line is being written: %v", err)
	}
	if len(lines) != 2 {
		t.Fatalf("read %d lines, want 2 (header, start): %s", len(lines), lines)
	}
	if err := os.WriteFile(path, []byte(head+`{"seq":2,"kind":"ev`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readTrace(dir, room); err == nil || !strings.Contains(err.Error(), "r.000001.jsonl:3: a trace line is one JSON object") {
		t.Fatalf("reading a trace with a broken line 3: %v, want the line named", err)
	}
}
