package main

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDemoAgentAnswersAndCallsTools: the demo preset needs no model and nothing installed.
// The real daemon starts `zooid demo-agent` (this binary) for a mention; it answers in the
// thread, and asked "who is here" it calls zooid_get_members through the bridge the daemon
// put in its session/new and posts the members; a bare reply "thread" in that thread reads
// the thread back with zooid_get_thread_history.
func TestDemoAgentAnswersAndCallsTools(t *testing.T) {
	dir := t.TempDir()
	push, pushFile := boundPort(t)
	cfgPath := filepath.Join(dir, "zooid.yaml")
	writeFile(t, cfgPath, matrixYAML(push)+`agents:
  demo:
    # The agent is this test binary as zooid; the daemon passes agents only an
    # allowlisted environment, so the switch is named here.
    acp: { preset: demo, env: { `+execEnv+`: "1" } }
    matrix:
      user_id: '@demo'
      display_name: Demo
      rooms: ['#general']
`)
	e2eEnv(t)
	var out, errb strings.Builder
	if code := dispatch([]string{"check", "--config", cfgPath}, &out, &errb); code != 0 || errb.Len() != 0 {
		t.Fatalf("check of a demo config: exit %d, %s%s", code, out.String(), errb.String())
	}
	s := startStack(t, "", cfgPath, pushFile)

	hello := s.mention("demo", "t1", "hello")
	s.waitNotice(t, hello, "I am Zooid's demo agent")

	who := s.mention("demo", "t2", "who is here?")
	s.waitNotice(t, who, "Asking the daemon with zooid_get_members, through the Zooid MCP server it gave me")
	members := s.waitNotice(t, who, "In this room (zooid_get_members), 2 members:")
	for _, want := range []string{"- ori (@ori:localhost)", "- Demo (@demo:localhost), agent demo"} {
		if !strings.Contains(members, want) {
			t.Errorf("the members the demo posted lack %q:\n%s", want, members)
		}
	}

	// A bare reply in the thread goes to the agent that spoke there last.
	s.send("m.room.message", "t3", fmt.Sprintf(`{"msgtype":"m.text","body":"and this thread?","m.relates_to":{"rel_type":"m.thread","event_id":%q}}`, who))
	thread := s.waitNotice(t, who, "This thread, ")
	if !strings.Contains(thread, "@ori:localhost: @demo who is here?") {
		t.Errorf("the thread the demo read back lacks the root:\n%s", thread)
	}
}

// waitNotice waits for a notice in root's thread whose body contains want and
// returns that body.
func (s *stack) waitNotice(t *testing.T, root, want string) string {
	t.Helper()
	return s.waitNoticeWithin(t, 20*time.Second, root, want)
}

// waitNoticeWithin is waitNotice waiting up to timeout.
func (s *stack) waitNoticeWithin(t *testing.T, timeout time.Duration, root, want string) string {
	t.Helper()
	var body string
	poll(t, timeout, 100*time.Millisecond, fmt.Sprintf("a notice containing %q in the thread of %s", want, root), func() bool {
		page := s.hs.do("GET", "/_matrix/client/v1/rooms/"+url.PathEscape(s.room)+"/relations/"+url.PathEscape(root)+"/m.thread?limit=50", s.token, "")
		chunk, _ := page["chunk"].([]any)
		for _, raw := range chunk {
			ev, _ := raw.(map[string]any)
			content, _ := ev["content"].(map[string]any)
			b, _ := content["body"].(string)
			if content["msgtype"] == "m.notice" && strings.Contains(b, want) {
				body = b
				return true
			}
		}
		return false
	})
	return body
}
