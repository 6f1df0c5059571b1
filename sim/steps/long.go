package steps

import (
	"fmt"
	"strings"

	"github.com/zooid-dev/zooid/zooid/zevent"
)

// The long text the long-message steps have agents post and check.

// longProse is a deterministic text of exactly n bytes as JSON counts them (zevent.BodySize): numbered paragraphs
// of ASCII, quotes and multi-byte runes, so a cut inside a rune or an escape
// would show.
func longProse(n int) string {
	var b strings.Builder
	for i := 1; b.Len() < n; i++ {
		if i > 1 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "long report, paragraph %d: the \"svc-a\" audit found naïve retries — ", i)
		b.WriteString(strings.Repeat("every request is checked twice, ", 9))
		b.WriteString("done ✓.")
	}
	// Cut to n bytes as JSON counts them (zevent.BodySize), on a rune, then pad.
	s, size := b.String(), 0
	for i, r := range s {
		if size+zevent.BodySize(string(r)) > n {
			s = s[:i]
			break
		}
		size += zevent.BodySize(string(r))
	}
	trimmed := strings.TrimRight(s, "\n ")
	size -= zevent.BodySize(s[len(trimmed):])
	return trimmed + strings.Repeat(".", n-size)
}
