package steps

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimReportShowsTheRun: `zooid sim --report` writes one page with the
// traced scenario's room: the mention, the agent's reply folded in its
// thread, the routing decisions and the turn's tool call from the trace, and
// the task thread linked to the turn that started it.
func TestSimReportShowsTheRun(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run.html")
	var log bytes.Buffer
	status := Run(Options{Homeserver: "fake", Paths: []string{"features/trace.feature:16"}, Output: &log, Report: out})
	if status != 0 {
		t.Fatalf("status %d:\n%s", status, log.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	for _, want := range []string{
		"a mention, a reply, a tool call and a task are traced with their decisions (",
		`<span class="status">passed</span>`,
		"<h3>#ops</h3>",
		"please check svc-a",
		`<summary>`,
		"woke planner (mention)",
		"woke planner (addressee)",
		"woke coder (task_assignee); task root of coder",
		`tool zooid_get_recent_threads`,
		`class="caller">started by its caller`,
		`<span class="agent-badge">agent</span>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("page:\n%s", page)
	}
}
