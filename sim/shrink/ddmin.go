// Package shrink reduces a recording to a smallest one that still shows a
// failure: delta debugging (Zeller and Hildebrandt's ddmin) over its members
// and events, with what an event depends on kept valid (removing a thread
// root removes its replies; removing an event removes the agents' turns it
// triggered, with their posts and their trace records).
package shrink

import (
	"context"
	"sort"
	"strconv"
	"strings"
)

// Test says whether a candidate — the indexes of the items it keeps, in
// increasing order — still fails the way the input did.
type Test func(ctx context.Context, keep []int) (bool, error)

// Stats counts the work of a minimisation.
type Stats struct {
	// Tests is how many candidates were tested; Cached how many more were
	// answered from the cache (a candidate met twice, or one that closure
	// made equal to one already tested).
	Tests, Cached int
}

// DDMin returns a 1-minimal subset of the n items 0..n-1 for which test
// holds: removing any single item of it makes test fail. test must hold for
// all n items (it is not asked). It is ddmin: split the current set into k
// chunks, keep a chunk that still fails, else a complement that still fails,
// else split finer, until the chunks are single items.
func DDMin(ctx context.Context, n int, test Test) ([]int, Stats, error) {
	cur := make([]int, n)
	for i := range cur {
		cur[i] = i
	}
	return DDMinFrom(ctx, cur, test)
}

// DDMinFrom is DDMin starting from the items in start.
func DDMinFrom(ctx context.Context, start []int, test Test) ([]int, Stats, error) {
	var st Stats
	cache := map[string]bool{}
	try := func(keep []int) (bool, error) {
		key := keyOf(keep)
		if v, ok := cache[key]; ok {
			st.Cached++
			return v, nil
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
		st.Tests++
		v, err := test(ctx, keep)
		if err != nil {
			return false, err
		}
		cache[key] = v
		return v, nil
	}
	cur := append([]int(nil), start...)
	cache[keyOf(cur)] = true
	k := 2
	for len(cur) >= 2 {
		if k > len(cur) {
			k = len(cur)
		}
		chunks := split(cur, k)
		reduced := false
		for _, c := range chunks {
			ok, err := try(c)
			if err != nil {
				return cur, st, err
			}
			if ok {
				cur, k, reduced = c, 2, true
				break
			}
		}
		// With two chunks each complement is the other chunk, tested above.
		if !reduced && k > 2 {
			for i := range chunks {
				comp := complement(chunks, i)
				ok, err := try(comp)
				if err != nil {
					return cur, st, err
				}
				if ok {
					cur, k, reduced = comp, max(k-1, 2), true
					break
				}
			}
		}
		if reduced {
			continue
		}
		if k >= len(cur) {
			break
		}
		k = min(2*k, len(cur))
	}
	if len(cur) == 1 {
		ok, err := try(nil)
		if err != nil {
			return cur, st, err
		}
		if ok {
			cur = nil
		}
	}
	return cur, st, nil
}

func split(s []int, k int) [][]int {
	out := make([][]int, 0, k)
	start := 0
	for i := 0; i < k; i++ {
		end := start + (len(s)-start)/(k-i)
		out = append(out, s[start:end:end])
		start = end
	}
	return out
}

func complement(chunks [][]int, skip int) []int {
	var out []int
	for i, c := range chunks {
		if i != skip {
			out = append(out, c...)
		}
	}
	return out
}

func keyOf(s []int) string {
	c := append([]int(nil), s...)
	sort.Ints(c)
	var b strings.Builder
	for _, x := range c {
		b.WriteString(strconv.Itoa(x))
		b.WriteByte(',')
	}
	return b.String()
}
