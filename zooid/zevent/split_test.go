package zevent

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestBodySizeIsTheJSONStringLength(t *testing.T) {
	for _, s := range []string{"plain", "tab\tnew\nline \"q\" back\\slash", "ünïcødé ✓ 🐝", "\x01\x1f", ""} {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		// Go escapes <, >, & and nothing else differently from canonical JSON for these.
		if got, want := BodySize(s), len(b)-2; got != want {
			t.Errorf("BodySize(%q) = %d, want %d (%s)", s, got, want, b)
		}
	}
}

func TestSplitBodyKeepsTextWhole(t *testing.T) {
	if got := SplitBody("short", 100); len(got) != 1 || got[0] != "short" {
		t.Fatalf("SplitBody of a short text = %q", got)
	}
}

func TestSplitBodyCutsAtTheBestBreak(t *testing.T) {
	para := strings.Repeat("word ", 10) + "end." // 54 bytes
	text := para + "\n\n" + para + "\n\n" + para
	got := SplitBody(text, 120)
	want := []string{para + "\n\n" + para, para}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("paragraphs: got %q, want %q", got, want)
	}
	lines := "line one is here\nline two is here\nline three here"
	if got := SplitBody(lines, 40); len(got) != 2 || got[0] != "line one is here\nline two is here" || got[1] != "line three here" {
		t.Fatalf("lines: got %q", got)
	}
	words := "alpha beta gamma delta epsilon"
	if got := SplitBody(words, 20); len(got) != 2 || got[0] != "alpha beta gamma" || got[1] != "delta epsilon" {
		t.Fatalf("words: got %q", got)
	}
}

func TestSplitBodyNeverCutsARune(t *testing.T) {
	text := strings.Repeat("🐝", 1000) // 4 bytes each, no breaks at all
	parts := SplitBody(text, 1001)
	if strings.Join(parts, "") != text {
		t.Fatal("parts do not join back to the text")
	}
	for i, p := range parts {
		if !utf8.ValidString(p) || BodySize(p) > 1001 || p == "" {
			t.Fatalf("part %d: valid=%v size=%d", i, utf8.ValidString(p), BodySize(p))
		}
	}
	if len(parts) != 4 {
		t.Fatalf("4000 bytes in parts of at most 1001 (1000 of whole runes): %d parts", len(parts))
	}
}

func TestSplitBodyLongProseFitsAndKeepsOrder(t *testing.T) {
	var b strings.Builder
	for i := 0; b.Len() < 150_000; i++ {
		b.WriteString("Paragraph ")
		b.WriteString(strings.Repeat("lorem ipsum \"dolor\" sit ämet ", 7))
		b.WriteString("\n\n")
	}
	text := strings.TrimSpace(b.String())
	parts := SplitBody(text, MaxBodyBytes)
	if len(parts) < 3 {
		t.Fatalf("%d bytes in %d parts", len(text), len(parts))
	}
	for i, p := range parts {
		if BodySize(p) > MaxBodyBytes || !utf8.ValidString(p) {
			t.Fatalf("part %d is %d bytes", i, BodySize(p))
		}
		if !strings.HasPrefix(p, "Paragraph ") {
			t.Fatalf("part %d does not start at a paragraph: %q", i, p[:20])
		}
	}
	if strings.Join(parts, "\n\n") != text {
		t.Fatal("parts joined by the dropped paragraph breaks are not the text")
	}
}
