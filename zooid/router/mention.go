package router

import (
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"maunium.net/go/mautrix/id"
)

// matcher finds (and strips) one agent's mentions in a plain-text body, for clients that
// don't send m.mentions: a matrix.to pill link, the full user id, "@localpart", or the
// display name (case-insensitive), each only at word boundaries.
type matcher struct {
	pill    *regexp.Regexp // [text](https://matrix.to/#/@user:server)
	link    *regexp.Regexp // https://matrix.to/#/@user:server
	full    *regexp.Regexp
	local   *regexp.Regexp
	short   []*regexp.Regexp // "@name" and "@workstation.name" where they are not the localpart
	display *regexp.Regexp   // nil without a display name
}

func newMatcher(user id.UserID, displayName, name, workstation string) *matcher {
	local, server, err := user.Parse()
	if err != nil {
		local, server = strings.TrimPrefix(string(user), "@"), ""
	}
	// regexp refuses invalid UTF-8 (MustCompile would panic); such bytes can't
	// be a deliberate mention anyway, so they are replaced.
	local, server = strings.ToValidUTF8(local, "\uFFFD"), strings.ToValidUTF8(server, "\uFFFD")
	ql, qs := regexp.QuoteMeta(local), regexp.QuoteMeta(server)
	target := `(?:@|%40)` + ql + `(?::|%3A)` + qs
	m := &matcher{
		pill:  regexp.MustCompile(`(?i)\[[^\]\n]*\]\(https?://matrix\.to/#/` + target + `[^)\s]*\)`),
		link:  regexp.MustCompile(`(?i)https?://matrix\.to/#/` + target),
		full:  regexp.MustCompile(`(?i)` + regexp.QuoteMeta(strings.ToValidUTF8(string(user), "\uFFFD"))),
		local: regexp.MustCompile(`(?i)@` + ql),
	}
	// An agent of a workstation is addressed as name and as
	// workstation.name, whatever its user id (config.SplitAddress); each
	// daemon reads a bare "@name" as its own agent's.
	for _, addr := range []string{name, workstation + "." + name} {
		if name != "" && (addr != name || workstation != "") && addr != local && !strings.HasPrefix(addr, ".") {
			m.short = append(m.short, regexp.MustCompile(`(?i)@`+regexp.QuoteMeta(addr)))
		}
	}
	if dn := strings.TrimSpace(strings.ToValidUTF8(displayName, "\uFFFD")); dn != "" {
		m.display = regexp.MustCompile(`(?i)@?` + regexp.QuoteMeta(dn))
	}
	return m
}

type span struct{ start, end int }

// spans returns the non-overlapping mention spans in body, in order.
func (m *matcher) spans(body string) []span {
	var out []span
	taken := func(s, e int) bool {
		for _, sp := range out {
			if s < sp.end && e > sp.start {
				return true
			}
		}
		return false
	}
	add := func(re *regexp.Regexp, ok func(body string, s, e int) bool) {
		if re == nil {
			return
		}
		for _, loc := range re.FindAllStringIndex(body, -1) {
			if ok(body, loc[0], loc[1]) && !taken(loc[0], loc[1]) {
				out = append(out, span{loc[0], loc[1]})
			}
		}
	}
	always := func(string, int, int) bool { return true }
	add(m.pill, always)
	add(m.link, always)
	add(m.full, idBoundary)
	add(m.local, idBoundary)
	for _, re := range m.short {
		add(re, idBoundary)
	}
	add(m.display, displayBoundary)
	// Sort by start; there are only ever a few spans.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].start < out[j-1].start; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

func (m *matcher) mentionedIn(body string) bool { return len(m.spans(body)) > 0 }

// atMentionedIn reports a deliberate mention: a pill, a link, the user id,
// "@localpart" or "@Display Name" — never the bare display name, which agents'
// prose uses as an ordinary word ("a reviewer may want to check").
func (m *matcher) atMentionedIn(body string) bool {
	for _, sp := range m.spans(body) {
		switch body[sp.start] {
		case '@', '[', 'h', 'H': // "@…", a pill "[…](…)", a link "https://matrix.to/…"
			return true
		}
	}
	return false
}

// strip removes the agent's own mentions, with a separator right after one (as in
// "Agent A: do this"), and trims the result.
func (m *matcher) strip(body string) string {
	sp := m.spans(body)
	if len(sp) == 0 {
		return strings.TrimSpace(body)
	}
	var b strings.Builder
	last := 0
	for _, s := range sp {
		b.WriteString(body[last:s.start])
		end := s.end
		atStart := strings.TrimSpace(b.String()) == "" || endsWithSpace(b.String())
		if atStart {
			// Swallow "Agent A: " / "@agent-a, " so the rest reads as a sentence.
			rest := body[end:]
			if rest != "" && strings.ContainsRune(":,", rune(rest[0])) {
				end++
			}
			for end < len(body) && (body[end] == ' ' || body[end] == '\t') {
				end++
			}
		}
		last = end
	}
	b.WriteString(body[last:])
	return strings.TrimSpace(b.String())
}

func endsWithSpace(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return unicode.IsSpace(r)
}

func isWord(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }

// isIDChar reports runes that may continue a Matrix user id.
func isIDChar(r rune) bool { return isWord(r) || strings.ContainsRune("-.=/+:", r) }

func before(body string, s int) (rune, bool) {
	if s == 0 {
		return 0, false
	}
	r, _ := utf8.DecodeLastRuneInString(body[:s])
	return r, true
}

// idBoundary accepts a user-id match not glued to more id characters. Trailing punctuation
// ("@agent-a: do", "thanks @agent-a.") ends the id when no word follows it.
func idBoundary(body string, s, e int) bool {
	if r, ok := before(body, s); ok && (isWord(r) || r == '@') {
		return false
	}
	if e == len(body) {
		return true
	}
	r, size := utf8.DecodeRuneInString(body[e:])
	if !isIDChar(r) {
		return true
	}
	if isWord(r) || !strings.ContainsRune(".:-", r) {
		return false
	}
	if e+size == len(body) {
		return true
	}
	r2, _ := utf8.DecodeRuneInString(body[e+size:])
	return !isIDChar(r2)
}

// displayBoundary is wordBoundary, also refusing a name that ends an address
// "workstation.name" ("@laptop.architect" names laptop's architect, not every
// agent whose display name is "architect").
func displayBoundary(body string, s, e int) bool {
	if r, ok := before(body, s); ok && r == '.' {
		if r2, ok := before(body, s-1); ok && isWord(r2) {
			return false
		}
	}
	return wordBoundary(body, s, e)
}

// wordBoundary accepts a display-name match with no word characters glued to either side.
func wordBoundary(body string, s, e int) bool {
	if r, ok := before(body, s); ok && isWord(r) {
		return false
	}
	if e == len(body) {
		return true
	}
	r, _ := utf8.DecodeRuneInString(body[e:])
	return !isWord(r)
}
