package randid

import (
	"regexp"
	"testing"
)

func TestHex(t *testing.T) {
	a, b := Hex(16), Hex(16)
	if !regexp.MustCompile(`^[0-9a-f]{32}$`).MatchString(a) || a == b {
		t.Fatalf("Hex(16) gave %q then %q: want 32 hex digits, different each time", a, b)
	}
	if got := Hex(0); got != "" {
		t.Fatalf("Hex(0) = %q", got)
	}
}
