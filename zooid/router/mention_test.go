package router

import "testing"

func TestMatcherMentionedAndStrip(t *testing.T) {
	m := newMatcher("@agent-a:example.org", "Agent A", "agent-a", "")
	cases := []struct {
		body      string
		mentioned bool
		stripped  string
	}{
		{"@agent-a:example.org please review", true, "please review"},
		{"@agent-a please review", true, "please review"},
		{"@agent-a: please review", true, "please review"},
		{"@AGENT-A, please review", true, "please review"},
		{"Agent A: please review", true, "please review"},
		{"agent a please review", true, "please review"},
		{"@Agent A please review", true, "please review"},
		{"please review, @agent-a", true, "please review,"},
		{"thanks @agent-a.", true, "thanks ."},
		{"[Agent A](https://matrix.to/#/@agent-a:example.org): please review", true, "please review"},
		{"[Agent A](https://matrix.to/#/%40agent-a%3Aexample.org) please review", true, "please review"},
		{"https://matrix.to/#/@agent-a:example.org please review", true, "please review"},
		{"ask @agent-a and @agent-b", true, "ask and @agent-b"},
		// Not mentions: glued to other id or word characters, other servers, other agents.
		{"@agent-ab please", false, "@agent-ab please"},
		{"@agent-a-bot please", false, "@agent-a-bot please"},
		{"@agent-a:other.org please", false, "@agent-a:other.org please"},
		{"Agent Alpha please", false, "Agent Alpha please"},
		{"SecretAgent A please", false, "SecretAgent A please"},
		{"email agent-a@example.org", false, "email agent-a@example.org"},
		{"x@agent-a y", false, "x@agent-a y"},
		{"agent-a without at sign", false, "agent-a without at sign"},
		{"", false, ""},
		{"  plain text  ", false, "plain text"},
	}
	for _, c := range cases {
		if got := m.mentionedIn(c.body); got != c.mentioned {
			t.Errorf("mentionedIn(%q) = %v, want %v", c.body, got, c.mentioned)
		}
		if got := m.strip(c.body); got != c.stripped {
			t.Errorf("strip(%q) = %q, want %q", c.body, got, c.stripped)
		}
	}
}

func TestMatcherWithoutDisplayName(t *testing.T) {
	m := newMatcher("@bot:example.org", "", "bot", "")
	if m.mentionedIn("hello bot") {
		t.Error("bare localpart without @ must not count as a mention")
	}
	if !m.mentionedIn("hello @bot") {
		t.Error("@localpart must count as a mention")
	}
	if got := m.strip("@bot: hi"); got != "hi" {
		t.Errorf("strip = %q, want %q", got, "hi")
	}
}

// An agent of a workstation (user @laptop.architect) is addressed as
// "@laptop.architect" and as a bare "@architect"; another workstation's
// "@ci.architect" is not it, by its name nor by its display name.
func TestMatcherWorkstationAddresses(t *testing.T) {
	m := newMatcher("@laptop.architect:example.org", "architect", "architect", "laptop")
	for body, want := range map[string]bool{
		"@laptop.architect please review":                     true,
		"@architect please review":                            true,
		"architect, please review":                            true,
		"@ci.architect please review":                         false,
		"ci.architect please review":                          false,
		"@laptop.architect-two please":                        false,
		"[ci](https://matrix.to/#/@ci.architect:example.org)": false,
	} {
		if got := m.mentionedIn(body); got != want {
			t.Errorf("mentionedIn(%q) = %v, want %v", body, got, want)
		}
	}
	if got := m.strip("@architect: please review"); got != "please review" {
		t.Errorf("strip = %q, want %q", got, "please review")
	}
}

// The addresses hold whatever the agent's user id is (a user_id written out
// in zooid.yaml); without a workstation only the user id and display name
// address an agent, as before.
func TestMatcherAddressesBesideTheUserID(t *testing.T) {
	m := newMatcher("@zs-ci.arch:example.org", "arch", "arch", "ci")
	for body, want := range map[string]bool{
		"@ci.arch please": true,
		"@arch please":    true,
		"@laptop.arch no": false,
	} {
		if got := m.mentionedIn(body); got != want {
			t.Errorf("mentionedIn(%q) = %v, want %v", body, got, want)
		}
	}
	plain := newMatcher("@bot7:example.org", "", "bot", "")
	if plain.mentionedIn("@bot please") {
		t.Error("without a workstation, @name that is not the localpart is no mention")
	}
}
