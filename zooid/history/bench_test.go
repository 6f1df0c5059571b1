package history_test

import (
	"context"
	"fmt"
	"testing"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/busyroom"
	"github.com/zooid-dev/zooid/fakehs"
	"github.com/zooid-dev/zooid/zooid/history"
	"github.com/zooid-dev/zooid/zooid/tools"
)

// seeded starts fakehs with the paged room of n messages
// (busyroom.PagedLayout), so every size has the same density of entries per
// page.
func seeded(b *testing.B, n int) (*history.Reader, tools.Caller) {
	b.Helper()
	hs := busyroom.Server(b, fakehs.Profile{})
	agent, human := busyroom.AgentA, busyroom.Alice
	events := busyroom.PagedEvents(n)
	room, err := hs.ImportRoom(fakehs.RoomSeed{Creator: human, Name: "big", Members: []id.UserID{agent}, Events: events})
	if err != nil {
		b.Fatal(err)
	}
	h := history.New(history.Options{
		Client: func(u id.UserID) *mautrix.Client { return busyroom.Client(b, hs.URL(), u) },
	})
	return h, tools.Caller{Agent: "agent-a", UserID: agent, Transport: "matrix", Room: room.RoomID, Rooms: []id.RoomID{room.RoomID}}
}

func benchPages(b *testing.B, n int, page func(h *history.Reader, c tools.Caller, before string) (string, error)) {
	h, c := seeded(b, n)
	// The second page, from a cursor: the cost of going back in time.
	next, err := page(h, c, "")
	if err != nil || next == "" {
		b.Fatalf("first page: %q %v", next, err)
	}
	b.Run("first", func(b *testing.B) {
		for b.Loop() {
			if _, err := page(h, c, ""); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("second", func(b *testing.B) {
		for b.Loop() {
			if _, err := page(h, c, next); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func recentPage(h *history.Reader, c tools.Caller, before string) (string, error) {
	p, err := h.RecentThreads(context.Background(), c, 50, before)
	if err == nil && len(p.Threads) != 50 {
		err = fmt.Errorf("page of %d", len(p.Threads))
	}
	return p.NextBefore, err
}

func historyPage(h *history.Reader, c tools.Caller, before string) (string, error) {
	p, err := h.History(context.Background(), c, 50, before)
	if err == nil && len(p.Messages) != 50 {
		err = fmt.Errorf("page of %d", len(p.Messages))
	}
	return p.NextBefore, err
}

// BenchmarkRecentThreads: a 50-entry page must cost the same in rooms of 1k and 100k events.
func BenchmarkRecentThreads(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) { benchPages(b, n, recentPage) })
	}
}

// BenchmarkHistory: a 50-message page must cost the same in rooms of 1k and 100k events.
func BenchmarkHistory(b *testing.B) {
	for _, n := range []int{1000, 100000} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) { benchPages(b, n, historyPage) })
	}
}
