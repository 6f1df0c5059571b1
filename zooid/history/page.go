package history

import (
	"encoding/json"

	"github.com/zooid-dev/zooid/zooid/tools"
)

// pageReserve is what a page's own fields (next_before with its cursor,
// has_more, the brackets) may take of tools.MaxPageBytes beside its entries;
// a cursor is a few hundred bytes.
const pageReserve = 2 << 10

// fit is how many of entries, newest first as collected, a page holds within
// tools.MaxPageBytes after used bytes (a thread's root): the newest whose
// JSON fits, and never fewer than atLeast, so a message longer than the
// bound still has a page of its own and a walk always moves on.
func fit[T any](entries []T, used, atLeast int) int {
	left := tools.MaxPageBytes - pageReserve - used
	for i := range entries {
		left -= entryBytes(entries[i])
		if left < 0 {
			return max(i, min(atLeast, len(entries)))
		}
	}
	return len(entries)
}

// entryBytes is what entries take of a page: each one's JSON as the tool
// result encodes it, and the comma after it.
func entryBytes[T any](entries ...T) int {
	n := 0
	for _, e := range entries {
		// A record of strings, numbers and bools always encodes.
		b, _ := json.Marshal(e)
		n += len(b) + 1
	}
	return n
}
