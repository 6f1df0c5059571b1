package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestReportWritesThePage(t *testing.T) {
	out := filepath.Join(t.TempDir(), "ops.html")
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"report", "--html", out, "../../scenarios/svc-a-incident.json"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	page, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`<h3>#ops</h3>`, "svc-a p99 latency alarm firing since 09:02", `<details class="thread"`, `<span class="agent-badge">agent</span>`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if code := Main([]string{"report", "../../scenarios/svc-a-incident.json"}, &stdout, &stderr); code != 2 {
		t.Errorf("without --html: exit %d, want 2", code)
	}
	stderr.Reset()
	if code := Main([]string{"report", "--html", out, "nope.json"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "nope.json") {
		t.Errorf("missing file: exit %d, want 2; %q", code, stderr.String())
	}
}

// Bad input is exit 2 as in zooid replay, and a bad trace line is named by
// its line in the file.
func TestReportBadInputExitsTwo(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "r.html")
	broken := filepath.Join(dir, "broken.json")
	os.WriteFile(broken, []byte(`{"version": 2, "members": [`), 0o600)
	data, err := os.ReadFile("../../scenarios/ops-routing-traced.json")
	if err != nil {
		t.Fatal(err)
	}
	badKind := filepath.Join(dir, "bad-kind.json")
	os.WriteFile(badKind, bytes.Replace(data, []byte(`"kind": "event"`), []byte(`"kind": "telepathy"`), 1), 0o600)
	torn := filepath.Join(dir, "trace")
	os.Mkdir(torn, 0o700)
	os.WriteFile(filepath.Join(torn, "!r:x.000001.jsonl"), []byte(`{"format":"zooid-trace","version":1,"room":"!r:x","segment":1}`+"\n"+`{"seq":1,"kind":"nope","room":"!r:x"}`+"\n"), 0o600)
	for _, tc := range []struct {
		name string
		args []string
		want *regexp.Regexp
	}{
		{"broken recording", []string{broken}, regexp.MustCompile(`broken\.json:1:`)},
		{"unknown trace kind", []string{badKind}, regexp.MustCompile(`bad-kind\.json:[0-9]+: trace line [0-9]+: unknown trace record kind "telepathy"`)},
		{"bad trace dir", []string{"--trace", torn, "../../scenarios/ops-routing-traced.json"}, regexp.MustCompile(`000001\.jsonl:2: unknown trace record kind "nope"`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := Main(append([]string{"report", "--html", out}, tc.args...), &stdout, &stderr)
			if code != 2 || !tc.want.MatchString(stderr.String()) {
				t.Fatalf("exit %d, want 2 with %s; stderr: %s", code, tc.want, stderr.String())
			}
		})
	}
}
