package zevent

import (
	"strings"
	"unicode/utf8"
)

// MaxBodyBytes is the most a message body Zooid posts may hold, counted as it
// is written in JSON (BodySize). Homeservers refuse an event whose whole PDU
// is over 64 KiB (Synapse: 413 M_TOO_LARGE); the rest of that room holds the
// relation, mentions and the homeserver's own fields with a wide margin.
const MaxBodyBytes = 48 << 10

// BodySize is how many bytes text takes as a JSON string's contents in
// canonical JSON (what the homeserver measures): UTF-8 as is, `"` and `\`
// and the short control escapes two bytes, other control characters six.
func BodySize(text string) int {
	n := 0
	for _, r := range text {
		n += runeSize(r)
	}
	return n
}

func runeSize(r rune) int {
	switch {
	case r == '"' || r == '\\' || r == '\n' || r == '\r' || r == '\t' || r == '\b' || r == '\f':
		return 2
	case r < 0x20:
		return 6
	case r == utf8.RuneError:
		return 3 // invalid bytes are sent as U+FFFD
	default:
		return utf8.RuneLen(r)
	}
}

// SplitBody cuts text into parts of at most limit BodySize each, in order, for
// posting as consecutive messages. A part ends at the last paragraph break
// (blank line) that keeps it within limit, else the last line break, else the
// last space, else the last whole rune; a break is only used in the second
// half of the window, so no part is tiny. The break itself is dropped; text
// that fits is returned whole. Parts are never empty.
func SplitBody(text string, limit int) []string {
	limit = max(limit, 8) // room for the widest rune
	var parts []string
	for BodySize(text) > limit {
		window := fitPrefix(text, limit)
		part, rest := cutAt(text, window)
		if strings.TrimSpace(part) != "" {
			parts = append(parts, part)
		}
		text = rest
	}
	if strings.TrimSpace(text) != "" || len(parts) == 0 {
		parts = append(parts, text)
	}
	return parts
}

// fitPrefix is the length in bytes of the longest prefix of text, ending on a
// rune boundary, whose BodySize is at most limit.
func fitPrefix(text string, limit int) int {
	size := 0
	for i, r := range text {
		size += runeSize(r)
		if size > limit {
			return i
		}
	}
	return len(text)
}

// cutAt splits text within its first window bytes at the best break.
func cutAt(text string, window int) (part, rest string) {
	w := text[:window]
	half := window / 2
	if i := strings.LastIndex(w, "\n\n"); i > half {
		return text[:i], strings.TrimLeft(text[i+2:], "\n")
	}
	if i := strings.LastIndexByte(w, '\n'); i > half {
		return text[:i], text[i+1:]
	}
	if i := strings.LastIndexByte(w, ' '); i > half {
		return text[:i], text[i+1:]
	}
	return w, text[window:]
}
