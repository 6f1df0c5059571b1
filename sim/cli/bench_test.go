package cli

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func TestIntList(t *testing.T) {
	got, err := intList(" 2, 3,,", 1, 5)
	if err != nil || !slices.Equal(got, []int{2, 3}) {
		t.Fatalf(`intList(" 2, 3,,") = %v, %v; want [2 3]`, got, err)
	}
	if got, err := intList("", 1, 5); err != nil || len(got) != 0 {
		t.Fatalf(`intList("") = %v, %v; want none`, got, err)
	}
	for _, bad := range []string{"6", "0", "two", "1,1e3"} {
		if _, err := intList(bad, 1, 5); err == nil {
			t.Errorf("intList(%q) took it, want an error", bad)
		}
	}
}

// Bad flags are refused before anything is measured.
func TestBenchRefusesBadItemsAndSizes(t *testing.T) {
	for args, want := range map[string]string{
		"--items 8":                  `--items: "8" is not a number from 1 to 7`,
		"--synapse-sizes 1000":       "--synapse-sizes: want two sizes or more",
		"--synapse-sizes 100,1000":   "--synapse-sizes: want two sizes or more, ascending, each 1000–1000000",
		"--synapse-sizes 10000,1000": "--synapse-sizes: want two sizes or more, ascending",
		"--synapse-sizes 1000,1000":  "--synapse-sizes: want two sizes or more, ascending",
		"--agents 3":                 "give --agents and --sessions together",
	} {
		var out, errb bytes.Buffer
		if code := cmdBench(strings.Fields(args), &out, &errb); code != 2 || !strings.Contains(errb.String(), want) {
			t.Errorf("zooid bench %s: exit %d, stderr %q; want 2 and %q", args, code, errb.String(), want)
		}
	}
}
