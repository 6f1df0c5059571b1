package steps

import (
	"fmt"
	"regexp"
	"strings"
)

// Parsing step arguments: lists of names, quoted or bare, and counts (once,
// twice, "3 times").

// times parses once, twice, "3 times".
func times(s string) int {
	switch s {
	case "once":
		return 1
	case "twice":
		return 2
	}
	var n int
	_, _ = fmt.Sscanf(s, "%d", &n)
	return n
}

// quoted matches one "name" of a list like "ori", "mia" and "kai".
var quoted = regexp.MustCompile(`"([^"]+)"`)

// quotedList is the regex of such a list.
const quotedList = `((?:"[^"]+"(?:, | and )?)+)`

func listOf(s string) []string {
	var out []string
	for _, m := range quoted.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// bareList splits ori, mia and agent-a.
func bareList(s string) []string {
	s = strings.ReplaceAll(s, " and ", ", ")
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
