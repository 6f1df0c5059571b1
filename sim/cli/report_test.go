package cli

import (
	"bytes"
	"os"
	"path/filepath"
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
	if code := Main([]string{"report", "--html", out, "nope.json"}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "nope.json") {
		t.Errorf("missing file: exit %d, %q", code, stderr.String())
	}
}
