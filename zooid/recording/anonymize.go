package recording

import (
	"fmt"
	"hash/fnv"
	"regexp"
	"strings"
	"unicode"
)

// textKeys are the content keys whose string values are people's words;
// Anonymize rewrites those and leaves structure (msgtype, format, keys of
// reactions, ids) as it is.
var textKeys = map[string]bool{
	"body": true, "formatted_body": true, "filename": true, "reason": true,
	"m.text": true, "org.matrix.msc1767.text": true, "question": true,
}

// Anonymize replaces people and words, keeping the shape a bug depends on:
// humans become stable pseudonyms ("person-1", in order of first
// appearance), agents keep their names (they are configuration, not
// people), and text becomes same-shape text: each letter another letter of
// the same case, each digit another digit, the same word always the same
// replacement, punctuation, spacing, mentions of members, HTML tags,
// msgtypes, threads and every relation exact. Labels are made again from
// the new text, the room name is rewritten and a trace is dropped (it
// holds the original words).
func (rec *Recording) Anonymize() {
	rename := map[string]string{}
	n := 0
	see := func(m string) {
		if _, agent := rec.Agents[m]; agent {
			return
		}
		if _, done := rename[m]; !done {
			n++
			rename[m] = fmt.Sprintf("person-%d", n)
		}
	}
	for _, e := range rec.Events {
		see(e.Sender)
	}
	for _, m := range rec.Members {
		see(m)
	}
	name := func(m string) string {
		if r, ok := rename[m]; ok {
			return r
		}
		return m
	}
	isMember := map[string]bool{}
	for k, m := range rec.Members {
		isMember[m] = true
		rec.Members[k] = name(m)
	}
	for k := range rec.Events {
		e := &rec.Events[k]
		e.Sender = name(e.Sender)
		e.Label = ""
		e.Content = anonymizeValue(e.Content, "", name, isMember).(map[string]any)
		if mm, ok := e.Content["m.mentions"].(map[string]any); ok {
			if us, ok := mm["user_ids"].([]any); ok {
				for j, u := range us {
					if s, ok := u.(string); ok && isMember[s] {
						us[j] = name(s)
					}
				}
			}
		}
		if e.Other != nil {
			e.Other.Fields = anonymizeValue(e.Other.Fields, "", name, isMember).(map[string]any)
		}
	}
	rec.Name = scramble(rec.Name, false, name, isMember)
	rec.Trace = nil
	rec.LabelThreads()
}

// anonymizeValue copies v, scrambling strings under textKeys.
func anonymizeValue(v any, key string, name func(string) string, isMember map[string]bool) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = anonymizeValue(e, k, name, isMember)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for k, e := range x {
			out[k] = anonymizeValue(e, key, name, isMember)
		}
		return out
	case string:
		if textKeys[key] {
			return scramble(x, key == "formatted_body", name, isMember)
		}
	}
	return v
}

// wordRE is a run of letters and digits: the unit that keeps its replacement.
var wordRE = regexp.MustCompile(`[\p{L}\p{N}]+`)

// scramble rewrites s to same-shape text; members' "@name" become their
// new names and, in HTML, tags stay as they are.
func scramble(s string, html bool, name func(string) string, isMember map[string]bool) string {
	var b strings.Builder
	rest := s
	for rest != "" {
		if html && rest[0] == '<' {
			end := strings.IndexByte(rest, '>')
			if end < 0 {
				end = len(rest) - 1
			}
			tag := rest[:end+1]
			// A mention pill's href names the member.
			b.WriteString(mentionRE.ReplaceAllStringFunc(tag, func(m string) string { return renameMention(m, name, isMember) }))
			rest = rest[end+1:]
			continue
		}
		if loc := mentionRE.FindStringSubmatchIndex(rest); loc != nil && loc[0] == 0 && isMember[rest[loc[2]:loc[3]]] {
			b.WriteString("@" + name(rest[loc[2]:loc[3]]))
			rest = rest[loc[3]:]
			continue
		}
		if loc := wordRE.FindStringIndex(rest); loc != nil && loc[0] == 0 {
			b.WriteString(scrambleWord(rest[:loc[1]]))
			rest = rest[loc[1]:]
			continue
		}
		// One character that is neither a word nor a mention: kept.
		r := []rune(rest)[0]
		b.WriteRune(r)
		rest = rest[len(string(r)):]
	}
	return b.String()
}

func renameMention(m string, name func(string) string, isMember map[string]bool) string {
	sub := mentionRE.FindStringSubmatch(m)
	if !isMember[sub[1]] {
		return m
	}
	return "@" + name(sub[1]) + sub[2]
}

// scrambleWord maps a word to another of the same shape, the same word
// always to the same one.
func scrambleWord(w string) string {
	h := fnv.New64a()
	h.Write([]byte(w))
	seed := h.Sum64()
	next := func(n uint64) uint64 {
		seed = seed*6364136223846793005 + 1442695040888963407
		return (seed >> 33) % n
	}
	var b strings.Builder
	for _, r := range w {
		switch {
		case unicode.IsUpper(r):
			b.WriteRune(rune('A' + next(26)))
		case unicode.IsLetter(r):
			b.WriteRune(rune('a' + next(26)))
		case unicode.IsDigit(r):
			b.WriteRune(rune('0' + next(10)))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
