package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckCommand(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	const base = `transports:
  matrix:
    homeserver: http://127.0.0.1:8008
    server_name: example.org
    as_token: as-0123456789abcdef
    hs_token: hs-0123456789abcdef
agents:
  agent-a:
    acp: { preset: claude }
    matrix:
      user_id: '@agent-a'
      rooms: ['#general']
`
	if err := os.WriteFile(good, []byte(base+"      trigger: mention\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(base+"      trigger: all\n  Bad: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb strings.Builder
	if code := dispatch([]string{"check", "--config", good}, &out, &errb); code != 0 {
		t.Fatalf("good config: exit %d, stderr %s", code, errb.String())
	}
	if out.String() != "ok: 1 agents, 1 transports\n" {
		t.Fatalf("stdout %q", out.String())
	}
	out.Reset()
	errb.Reset()
	if code := dispatch([]string{"check", "--config", bad}, &out, &errb); code != 1 {
		t.Fatalf("bad config: exit %d", code)
	}
	want := bad + `:13: agents.agent-a.matrix.trigger: must be "mention" or "any", got "all"`
	if !strings.Contains(errb.String(), want) || !strings.Contains(errb.String(), bad+":14: agents.Bad:") || out.Len() != 0 {
		t.Fatalf("stderr %q, want it to contain %q and the agents.Bad errors", errb.String(), want)
	}
}
