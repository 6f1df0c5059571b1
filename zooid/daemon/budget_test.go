package daemon

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// A flood is cut to a prefix of at most MaxTurnProse bytes, on a rune, and the
// rest is counted, however it is chunked.
func TestProseBudgetKeepsAPrefix(t *testing.T) {
	text := strings.Repeat("naïve ✓ flood ", 200_000) // ~3.4 MB, multi-byte runes
	for _, chunk := range []int{1 << 10, 64 << 10, 1<<20 + 1} {
		b := newProseBudget()
		var kept strings.Builder
		// ACP chunks are JSON strings: whole runes each.
		for i := 0; i < len(text); {
			end := min(i+chunk, len(text))
			for end < len(text) && !utf8.RuneStart(text[end]) {
				end--
			}
			kept.WriteString(b.take(text[i:end]))
			i = end
		}
		got := kept.String()
		if len(got) > MaxTurnProse || len(got) < MaxTurnProse-utf8.UTFMax || !strings.HasPrefix(text, got) || !utf8.ValidString(got) {
			t.Fatalf("chunks of %d: kept %d bytes (prefix %v, valid %v), want a valid prefix of about %d", chunk, len(got), strings.HasPrefix(text, got), utf8.ValidString(got), MaxTurnProse)
		}
		if int64(len(got))+b.dropped != int64(len(text)) {
			t.Fatalf("chunks of %d: kept %d + dropped %d != %d", chunk, len(got), b.dropped, len(text))
		}
		if b.notice("agent-a") == "" {
			t.Fatal("no notice after a flood")
		}
	}
	if n := newProseBudget().notice("agent-a"); n != "" {
		t.Fatalf("notice without a flood: %q", n)
	}
}
