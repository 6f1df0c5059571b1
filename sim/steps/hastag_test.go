package steps

import (
	"os"
	"path/filepath"
	"testing"
)

// TestHasTagFindsOnlyTagLines: a run asks for the real agents' packages or
// Landlock only when a feature it runs carries their tag, on a tag line; a
// word in a step or a longer tag does not count, and a path that can't be
// read counts as carrying them.
func TestHasTagFindsOnlyTagLines(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	plain := write("plain.feature", "Feature: x\n  Scenario: y\n    When ori says \"@pi is a word here\"\n  @pirate\n  Scenario: z\n")
	real := write("real.feature", "Feature: x\n  @fake-only @real-agents\n  Scenario: y\n")
	for _, c := range []struct {
		paths []string
		want  bool
	}{
		{[]string{plain}, false},
		{[]string{real}, true},
		{[]string{dir}, true},
		{[]string{filepath.Join(dir, "missing.feature")}, true},
	} {
		if got := hasTag(c.paths, "@pi", "@real-agents"); got != c.want {
			t.Errorf("hasTag(%v) = %v, want %v", c.paths, got, c.want)
		}
	}
}
