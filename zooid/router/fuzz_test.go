package router

import (
	"strings"
	"testing"

	"maunium.net/go/mautrix/id"
)

// FuzzMentions runs mention parsing over arbitrary bodies and display names:
// spans are in order, inside the body and disjoint; a deliberate mention is a
// mention; stripping never panics and leaves no more mentions than it found.
func FuzzMentions(f *testing.F) {
	for _, s := range []string{
		"@agent-a please check", "Agent A: do this", "[Agent A](https://matrix.to/#/@agent-a:hs) hi",
		"https://matrix.to/#/%40agent-a%3Ahs look", "@agent-a:hs, @agent-a:hs", "agent a", "@Agent A,  x",
		"@agent-a@agent-a", "[x](https://matrix.to/#/@agent-a:hs", "", "@", "\u00e9@agent-a\u00e9",
	} {
		f.Add(s, "Agent A")
	}
	f.Fuzz(func(t *testing.T, body, display string) {
		m := newMatcher(id.UserID("@agent-a:hs"), display, "agent-a", "")
		newMatcher(id.UserID("@"+display+":hs"), "", "", "")
		sp := m.spans(body)
		prev := 0
		for _, s := range sp {
			if s.start < prev || s.end <= s.start || s.end > len(body) {
				t.Fatalf("spans %v of %q (display %q) are not ordered, disjoint spans of the body", sp, body, display)
			}
			prev = s.end
		}
		if m.atMentionedIn(body) && !m.mentionedIn(body) {
			t.Fatalf("%q is at-mentioned but not mentioned", body)
		}
		out := m.strip(body)
		if len(out) > len(body) || out != strings.TrimSpace(out) {
			t.Fatalf("strip(%q) = %q", body, out)
		}
	})
}
