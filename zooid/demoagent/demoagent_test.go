package demoagent

import (
	"testing"

	"github.com/zooid-dev/zooid/zooid/tools"
)

// TestCommandFor: the words a message uses pick the tool, "rooms" before "room" and
// "threads" before "thread"; anything else gets the introduction.
func TestCommandFor(t *testing.T) {
	for msg, want := range map[string]string{
		"who is here?":             tools.GetMembers,
		"list the Members please":  tools.GetMembers,
		"recent threads":           tools.GetRecentThreads,
		"what's in this thread":    tools.GetThreadHistory,
		"show me the history":      tools.GetHistory,
		"which rooms are you in?":  tools.GetRooms,
		"what room is this":        tools.GetRoomInfo,
		"hello":                    "",
		"threading the needle now": "",
	} {
		c, ok := commandFor(msg)
		if got := map[bool]string{true: c.tool}[ok]; got != want {
			t.Errorf("commandFor(%q) = %q, want %q", msg, got, want)
		}
	}
}

// TestReadHeader: the daemon's session header is taken off the first prompt, its thread and
// speaker remembered; a later prompt has none.
func TestReadHeader(t *testing.T) {
	s := &session{}
	msg := s.readHeader("[zooid] room: #general:hs (!r:hs) · thread: $root · from: Ori Operator (@ori:hs)\n" +
		"[zooid] Read more of this thread with zooid_get_thread_history {\"thread_id\": \"$root\"}.\n\nwho is here?")
	if msg != "who is here?" || s.thread != "$root" || s.from != "Ori Operator" {
		t.Fatalf("message %q, thread %q, from %q", msg, s.thread, s.from)
	}
	if msg := s.readHeader("and now?"); msg != "and now?" || s.thread != "$root" {
		t.Fatalf("a prompt without a header: %q, thread %q", msg, s.thread)
	}
}
