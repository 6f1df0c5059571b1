package main

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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

// TestAnEncryptedRoomIsToldAndWarnedOf is a room turned end-to-end encrypted under a running
// `zooid run`, which cannot read it: the agent bound to it says so in the room once, the
// daemon logs the room once however many encrypted events follow, and the next start warns
// of the room before anyone writes there (zooid check does not talk to the homeserver, so
// this warning is the start's), and posts no second notice.
func TestAnEncryptedRoomIsToldAndWarnedOf(t *testing.T) {
	dir := t.TempDir()
	ctl := fakeagent.NewController(t)
	ctl.Queue("agent-a", fakeagent.Turn{fakeagent.Say("still here"), fakeagent.Stop("end_turn")})
	ctl.Queue("agent-a", fakeagent.Turn{fakeagent.Say("back again"), fakeagent.Stop("end_turn")})
	push, pushFile := boundPort(t)
	self, _ := os.Executable()
	args, _ := json.Marshal(ctl.Args("agent-a"))
	cfgPath := filepath.Join(dir, "zooid.yaml")
	writeFile(t, cfgPath, matrixYAML(push)+fmt.Sprintf(`agents:
  agent-a:
    acp: { command: %q, args: %s, env: { %s: "1" } }
    matrix:
      user_id: '@agent-a'
      rooms: ['#general']
`, self, args, execEnv))
	s := startStack(t, "", cfgPath, pushFile)

	// agent-a created #general, so only it may turn encryption on there (as Element's
	// switch does: the m.room.encryption state event).
	s.hs.do("PUT", "/_matrix/client/v3/rooms/"+url.PathEscape(s.room)+"/state/m.room.encryption/?user_id="+url.QueryEscape("@agent-a:localhost"),
		e2eASToken, `{"algorithm":"m.megolm.v1.aes-sha2"}`)
	encrypted := `{"algorithm":"m.megolm.v1.aes-sha2","ciphertext":"AwgAEnQ0cGFxdWU","session_id":"s","sender_key":"k","device_id":"D"}`
	s.send("m.room.encrypted", "e1", encrypted)
	s.send("m.room.encrypted", "e2", encrypted)
	// The room's events are handled in order: once the plain mention after them is answered,
	// every notice they could cause has been posted.
	mention := s.mention("agent-a", "t1", "are you there?")
	s.waitReply(t, "agent-a", mention, "still here")
	const notice = "This room is end-to-end encrypted and this Zooid daemon is not set to read encrypted rooms: agent-a sees no message sent here. Ask the operator to turn on encryption: true in zooid.yaml, or use agent-a in a room without encryption."
	if n := s.notices("agent-a", notice); n != 1 {
		t.Errorf("agent-a posted the encrypted-room notice %d times, want 1", n)
	}
	const logged = "room is end-to-end encrypted and this daemon is not set to read encrypted rooms: its encrypted events wake nobody"
	if n := strings.Count(s.logs.String(), logged); n != 1 {
		t.Errorf("the daemon logged the encrypted room %d times, want once:\n%s", n, s.logs.String())
	}

	if err := s.daemon.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = s.daemon.Wait()
	s.run(t)
	const warned = "start-up check: room is end-to-end encrypted and this daemon is not set to read encrypted rooms: its agents will not see messages there; set encryption: true in zooid.yaml, or bind them to a room without encryption"
	eventually(t, "the restarted daemon to warn of the encrypted room", func() bool { return strings.Contains(s.logs.String(), warned) })
	if !strings.Contains(s.logs.String(), "room="+s.room) {
		t.Errorf("the warning does not name the room %s:\n%s", s.room, s.logs.String())
	}
	s.send("m.room.encrypted", "e3", encrypted)
	mention = s.mention("agent-a", "t2", "back?")
	s.waitReply(t, "agent-a", mention, "back again")
	if n := s.notices("agent-a", notice); n != 1 {
		t.Errorf("after a restart agent-a has posted the encrypted-room notice %d times, want still 1", n)
	}
}

// waitReply waits for agent's reply with body in the thread of root.
func (s *stack) waitReply(t *testing.T, agent, root, body string) {
	t.Helper()
	eventually(t, agent+"'s reply "+body, func() bool {
		for _, ev := range s.recent() {
			content, _ := ev["content"].(map[string]any)
			rel, _ := content["m.relates_to"].(map[string]any)
			if ev["sender"] == "@"+agent+":localhost" && content["body"] == body && rel["event_id"] == root {
				return true
			}
		}
		return false
	})
}

// notices counts agent's messages in the room whose body is body.
func (s *stack) notices(agent, body string) int {
	n := 0
	for _, ev := range s.recent() {
		content, _ := ev["content"].(map[string]any)
		if ev["sender"] == "@"+agent+":localhost" && content["body"] == body && content["msgtype"] == "m.notice" {
			n++
		}
	}
	return n
}
