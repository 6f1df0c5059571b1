package recording

import (
	"fmt"
	"strings"
	"unicode"
)

// labelWords is how many of a root's first words make its label.
const labelWords = 3

// LabelThreads gives every thread root without a label one made from the
// first words of its text, mentions left out ("svc-a p99 latency alarm" → "svc-a-p99-latency"),
// made unique within the recording by a number ("-2", "-3"). The same
// recording always gets the same labels, so steps can name recorded threads.
func (rec *Recording) LabelThreads() {
	taken := map[string]bool{}
	for _, e := range rec.Events {
		if e.Label != "" {
			taken[e.Label] = true
		}
	}
	for i := range rec.Events {
		if rec.Events[i].Label != "" || len(rec.Replies(i)) == 0 && !rec.hasThreadReply(i) {
			continue
		}
		// Mentions say whom a root asked, not what about.
		base := slug(mentionRE.ReplaceAllString(rec.Text(i), "$2"))
		l := base
		for n := 2; taken[l]; n++ {
			l = fmt.Sprintf("%s-%d", base, n)
		}
		taken[l] = true
		rec.Events[i].Label = l
	}
}

// hasThreadReply says whether any event (a message or not) is in thread i.
func (rec *Recording) hasThreadReply(i int) bool {
	for _, e := range rec.Events {
		if e.Thread == i {
			return true
		}
	}
	return false
}

// slug is a label from the first words of text: ASCII letters and digits
// lowercased, words joined by '-', never starting with a digit.
func slug(text string) string {
	var words []string
	for _, f := range strings.FieldsFunc(text, func(r rune) bool { return !(r < 128 && (unicode.IsLetter(r) || unicode.IsDigit(r)) || r == '-') }) {
		f = strings.Trim(strings.ToLower(f), "-")
		if f == "" {
			continue
		}
		words = append(words, f)
		if len(words) == labelWords {
			break
		}
	}
	s := strings.Join(words, "-")
	if len(s) > 40 {
		s = strings.TrimRight(s[:40], "-")
	}
	if s == "" || s[0] >= '0' && s[0] <= '9' || s[0] == '-' {
		s = "thread-" + s
		s = strings.TrimRight(s, "-")
	}
	return s
}
