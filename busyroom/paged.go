package busyroom

import (
	"fmt"
	"time"

	"github.com/zooid-dev/zooid/fakehs"
)

// PagedLayout is the shape of the paged room, which the history paging tests
// and `zooid bench` read at any size with the same density of entries per
// page: message 0 roots the long thread, which grows with the room; after it,
// every message i with i%10 == 0 is top-level and opens a thread, i%10 == 5
// replies in the long thread, and the others reply in one of the latest 20
// open threads (i modulo their count), or are top-level while none is open.
// A thread opened in a wave of wave messages takes replies from the next
// wave on, as when a wave is sent at once (zooid bench on Synapse); wave 1 is
// a room sent one message at a time. PagedLayout returns each message's
// thread root by index, -1 for a top-level message.
func PagedLayout(n, wave int) []int {
	wave = max(wave, 1)
	roots := make([]int, n)
	var open []int
	// Message 0 is a wave of its own: the long thread must exist before
	// anything replies in it.
	for lo, hi := 0, min(1, n); lo < n; lo, hi = hi, min(hi+wave, n) {
		for i := lo; i < hi; i++ {
			switch {
			case i == 0 || i%10 == 0:
				roots[i] = -1
			case i%10 == 5:
				roots[i] = 0
			case len(open) > 0:
				roots[i] = open[i%len(open)]
			default:
				roots[i] = -1
			}
		}
		for i := lo; i < hi; i++ {
			if i != 0 && i%10 == 0 {
				open = append(open, i)
			}
		}
		if len(open) > 20 {
			open = open[len(open)-20:]
		}
	}
	return roots
}

// PagedEvents is the paged room of n messages from Alice ("message <i>", a
// second apart) for fakehs.Server.ImportRoom.
func PagedEvents(n int) []fakehs.SeedEvent {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	events := make([]fakehs.SeedEvent, n)
	for i, root := range PagedLayout(n, 1) {
		events[i] = fakehs.SeedEvent{Sender: Alice, Content: map[string]any{"msgtype": "m.text", "body": fmt.Sprintf("message %d", i)},
			Timestamp: base.Add(time.Duration(i) * time.Second), ThreadRoot: root}
	}
	return events
}
