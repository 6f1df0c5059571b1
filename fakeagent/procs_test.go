package fakeagent

import "testing"

func TestPpidOf(t *testing.T) {
	for stat, want := range map[string]string{
		"3145 (steps.test) R 3083 3083 1921 0": "3083",
		"77 (a (b) c) S 12 77 1":               "12",
		"garbage":                              "",
	} {
		if got := ppidOf(stat); got != want {
			t.Errorf("ppidOf(%q) = %q, want %q", stat, got, want)
		}
	}
}
