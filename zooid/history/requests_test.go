package history_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/zooid-dev/zooid/busyroom"

	"maunium.net/go/mautrix/event"

	"github.com/zooid-dev/zooid/fakehs"
	"github.com/zooid-dev/zooid/zooid/history"
)

// pageRequestBound is the most homeserver requests one page of a history tool
// may cost on a server with the endpoints (/messages with filters, /threads,
// /relations): membership, the page's chunk, a peek or the thread's root. It
// does not grow with the page, the room or messages arriving between pages.
const pageRequestBound = 5

type pageFunc func(ctx context.Context, h *history.Reader, r *room, limit int, before string) (next string, err error)

var historyTools = map[string]pageFunc{
	"zooid_get_history": func(ctx context.Context, h *history.Reader, r *room, limit int, before string) (string, error) {
		p, err := h.History(ctx, r.c, limit, before)
		return p.NextBefore, err
	},
	"zooid_get_recent_threads": func(ctx context.Context, h *history.Reader, r *room, limit int, before string) (string, error) {
		p, err := h.RecentThreads(ctx, r.c, limit, before)
		return p.NextBefore, err
	},
	"zooid_get_thread_history": func(ctx context.Context, h *history.Reader, r *room, limit int, before string) (string, error) {
		p, err := h.ThreadHistory(ctx, r.c, r.ids[0], limit, before)
		return p.NextBefore, err
	},
}

// mostRequestsPerPage walks pages of tool (of 10 and 20 entries in turn), with
// (if arrive) three new messages, one in the long thread, arriving before every page, and
// returns the most homeserver requests one call made. restart pages with a
// fresh Reader each time, as after a daemon restart. A walk stops early once a
// page cost more than stopAbove (when stopAbove > 0): the deeper pages of a
// scan only cost more, and under the race detector each costs seconds.
func mostRequestsPerPage(t *testing.T, r *room, tool pageFunc, pages int, arrive, restart bool, stopAbove int) int {
	t.Helper()
	ctx := context.Background()
	cli := asCli(r.hs, agent)
	h, before, most := r.h, "", 0
	for i := range pages {
		for j := range 3 * btoi(arrive) {
			content := map[string]any{"msgtype": "m.text", "body": fmt.Sprintf("arriving %d.%d", i, j)}
			if j == 2 {
				content["m.relates_to"] = map[string]any{"rel_type": "m.thread", "event_id": string(r.ids[0])}
			}
			if _, err := cli.SendMessageEvent(ctx, r.c.Room, event.EventMessage, content); err != nil {
				t.Fatal(err)
			}
		}
		if restart {
			h = r.restarted()
		}
		n0 := r.hs.Requests("", "")
		next, err := tool(ctx, h, r, []int{10, 20}[i%2], before)
		if err != nil {
			t.Fatalf("page %d: %v", i+1, err)
		}
		most = max(most, r.hs.Requests("", "")-n0)
		if stopAbove > 0 && most > stopAbove {
			return most
		}
		if next == "" {
			t.Fatalf("page %d is the last; the room should have more", i+1)
		}
		before = next
	}
	return most
}

// Issue 15.3: a page costs a constant number of requests, the same in rooms of
// 1k and 10k events, however many pages deep and whatever arrives meanwhile.
func TestPageRequestsBounded(t *testing.T) {
	rooms := map[int]*room{1_000: newRoom(t, fakehs.Profile{}, busyroom.PagedEvents(1_000)), 10_000: newRoom(t, fakehs.Profile{}, busyroom.PagedEvents(10_000))}
	for name, tool := range historyTools {
		most := map[int]int{}
		for size, r := range rooms {
			most[size] = mostRequestsPerPage(t, r, tool, 6, true, false, 0)
			if most[size] > pageRequestBound {
				t.Errorf("%s in a room of %d events: a page cost %d requests, want at most %d", name, size, most[size], pageRequestBound)
			}
		}
		if most[1_000] != most[10_000] {
			t.Errorf("%s: a page cost up to %d requests at 1k events and %d at 10k; want the same", name, most[1_000], most[10_000])
		}
		t.Logf("%s: at most %d requests per page", name, most[10_000])
	}
}

// The bound above catches a daemon that scans: where the server lacks the
// endpoints (fakehs.Degraded) zooid_get_recent_threads must scan /messages,
// and after a restart it rescans from the room's newest event down to the
// cursor, so the same measure exceeds the bound as the pages go deeper.
func TestPageRequestsBoundCatchesAScan(t *testing.T) {
	// A room of 2,000 events is deep enough: the rescan outgrows the bound
	// within a few pages, and seeding 10,000 under the race detector took
	// most of the test's 30 s.
	r := newRoom(t, fakehs.Degraded, busyroom.PagedEvents(2_000))
	most := mostRequestsPerPage(t, r, historyTools["zooid_get_recent_threads"], 40, false, true, pageRequestBound)
	if most <= pageRequestBound {
		t.Errorf("rescanning recent threads cost up to %d requests per page over 40 pages; want more than %d", most, pageRequestBound)
	}
	t.Logf("rescanning: up to %d requests per page", most)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
