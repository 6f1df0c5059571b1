package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zooid-dev/zooid/fakeagent"
)

// TestStartUpCostsOnlyTheRefusedRoom is an operator who bound an agent to a new room after
// installing the registration: the homeserver refuses to let the daemon create it
// (M_EXCLUSIVE). The daemon says which registration and how to fix it, and serves the rooms
// it could join; before, the refusal stopped the start and every agent with it. Every log
// line names each attribute once (it said component=matrix twice).
func TestStartUpCostsOnlyTheRefusedRoom(t *testing.T) {
	dir := t.TempDir()
	ctl := fakeagent.NewController(t)
	ctl.Queue("agent-a", fakeagent.Turn{fakeagent.Say("still here"), fakeagent.Stop("end_turn")})
	push, pushFile := boundPort(t)
	self, _ := os.Executable()
	args, _ := json.Marshal(ctl.Args("agent-a"))
	agents := func(rooms string) string {
		return matrixYAML(push) + fmt.Sprintf(`agents:
  agent-a:
    acp: { command: %q, args: %s, env: { %s: "1" } }
    matrix:
      user_id: '@agent-a'
      rooms: %s
`, self, args, execEnv, rooms)
	}
	installed := filepath.Join(dir, "installed.yaml")
	writeFile(t, installed, agents("['#general']"))
	cfgPath := filepath.Join(dir, "zooid.yaml")
	writeFile(t, cfgPath, agents("['#general', '#ops2']"))

	s := startStackRegistered(t, "", cfgPath, installed, pushFile)
	mention := s.mention("agent-a", "t1", "are you there?")
	eventually(t, "agent-a's reply in #general", func() bool {
		for _, ev := range s.recent() {
			content, _ := ev["content"].(map[string]any)
			rel, _ := content["m.relates_to"].(map[string]any)
			if ev["sender"] == "@agent-a:localhost" && content["body"] == "still here" && rel["event_id"] == mention {
				return true
			}
		}
		return false
	})
	logs := s.logs.String()
	for _, want := range []string{
		`room #ops2:localhost does not exist and this daemon may not create it: the alias is outside the alias namespaces of the appservice registration \"zooid\"`,
		"regenerate the registration (zooid registration --config zooid.yaml)",
		// zooid run logs what zooid check warns of, before it starts.
		"start-up check: its alias namespaces do not hold #ops2:localhost",
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("the daemon's log lacks %q:\n%s", want, logs)
		}
	}
	for _, line := range strings.Split(logs, "\n") {
		if key, ok := repeatedKey(line); ok {
			t.Errorf("log line names %s twice: %s", key, line)
		}
	}
}

// repeatedKey finds an attribute named twice in a log/slog text line.
func repeatedKey(line string) (string, bool) {
	seen := map[string]bool{}
	for _, field := range textFields(line) {
		key, _, ok := strings.Cut(field, "=")
		if !ok {
			continue
		}
		if seen[key] {
			return key, true
		}
		seen[key] = true
	}
	return "", false
}

// textFields splits a slog text line at the spaces outside quoted values.
func textFields(line string) []string {
	var out []string
	var cur strings.Builder
	quoted, escaped := false, false
	for _, r := range line {
		switch {
		case escaped:
			escaped = false
		case quoted && r == '\\':
			escaped = true
		case r == '"':
			quoted = !quoted
		case r == ' ' && !quoted:
			out = append(out, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteRune(r)
	}
	return append(out, cur.String())
}
