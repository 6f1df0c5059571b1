package busyroom

import (
	"slices"
	"testing"
)

func TestPagedLayout(t *testing.T) {
	// Messages 1-9 come before any thread but the long one is open; 10 opens
	// one, 11-14 and 16-19 reply in it, 15 in the long thread; 20 opens a
	// second, and 21 replies in open[21%2], the second.
	want := []int{-1, -1, -1, -1, -1, 0, -1, -1, -1, -1, -1, 10, 10, 10, 10, 0, 10, 10, 10, 10, -1, 20, 10}
	if got := PagedLayout(len(want), 1); !slices.Equal(got, want) {
		t.Fatalf("PagedLayout(%d, 1):\n got %v\nwant %v", len(want), got, want)
	}
	// In waves of 100, message 10's thread takes replies only from message
	// 101 on: 11-99 are top-level, but for the long thread's; 101 replies
	// in open[101%10], message 20's thread.
	waved := PagedLayout(130, 100)
	if waved[11] != -1 || waved[15] != 0 || waved[101] != 20 {
		t.Fatalf("PagedLayout(130, 100): 11→%d, 15→%d, 101→%d; want -1, 0, 20", waved[11], waved[15], waved[101])
	}
	// At most the latest 20 threads stay open.
	for i, r := range PagedLayout(1000, 1) {
		if r > 0 && r < i-10*20-10 {
			t.Fatalf("message %d replies in thread %d, which is older than the latest 20", i, r)
		}
	}
}
