package bench

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/zooid-dev/zooid/busyroom"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/fakehs"
	"github.com/zooid-dev/zooid/zooid/history"
	"github.com/zooid-dev/zooid/zooid/tools"
)

// Room is a seeded room read through zooid/history as an agent would read
// it through the three history tools.
type Room struct {
	// HS is the fakehs the room is on; nil on Synapse.
	HS *fakehs.Server
	H  *history.Reader
	C  tools.Caller
	// Long is the root of the room's long thread: one reply in every ten
	// messages goes to it, so it grows with the room (about n/10 replies).
	Long id.EventID
	// stop stops a fakehs room's servers.
	stop func()
	// count is the homeserver requests made so far (fakehs counts them; on
	// Synapse the reading client does).
	count func() int
	// spent, when set, is the time the reading client's requests took so
	// far by endpoint (Synapse rooms).
	spent func() map[string]time.Duration
}

// Close stops the room's servers (a Synapse room's container is its
// Synapse's to stop).
func (r *Room) Close() {
	if r.stop != nil {
		r.stop()
	}
}

// SeedRoom starts fakehs with the given profile and the paged room of n
// messages (busyroom.PagedLayout): the same density of entries per page at
// every size, and a long thread that grows with the room.
func SeedRoom(n int, p fakehs.Profile) (*Room, error) {
	hs, stop, err := busyroom.Start(p)
	if err != nil {
		return nil, err
	}
	agent, human := busyroom.AgentA, busyroom.Alice
	events := busyroom.PagedEvents(n)
	room, err := hs.ImportRoom(fakehs.RoomSeed{Creator: human, Name: "big", Members: []id.UserID{agent}, Events: events})
	if err != nil {
		stop()
		return nil, fmt.Errorf("importing %d events: %w", n, err)
	}
	// One client per user, kept, as the daemon's transport keeps them.
	var mu sync.Mutex
	clients := map[id.UserID]*mautrix.Client{}
	h := history.New(history.Options{
		Client: func(u id.UserID) *mautrix.Client {
			mu.Lock()
			defer mu.Unlock()
			if cli := clients[u]; cli != nil {
				return cli
			}
			cli, _ := mautrix.NewClient(hs.URL(), u, busyroom.ASToken)
			cli.SetAppServiceUserID = true
			clients[u] = cli
			return cli
		},
	})
	return &Room{HS: hs, H: h, stop: stop, Long: room.EventIDs[0], count: func() int { return hs.Requests("", "") },
		C: tools.Caller{Agent: "agent-a", UserID: agent, Transport: "matrix", Room: room.RoomID, Rooms: []id.RoomID{room.RoomID}}}, nil
}

// Tool is one history tool's page function: limit entries before a cursor
// ("" for the newest page); it returns the next cursor.
type Tool struct {
	Name string
	Page func(ctx context.Context, r *Room, limit int, before string) (next string, n int, err error)
}

// Tools are the three history tools.
var Tools = []Tool{
	{tools.GetHistory, func(ctx context.Context, r *Room, limit int, before string) (string, int, error) {
		p, err := r.H.History(ctx, r.C, limit, before)
		return p.NextBefore, len(p.Messages), err
	}},
	{tools.GetRecentThreads, func(ctx context.Context, r *Room, limit int, before string) (string, int, error) {
		p, err := r.H.RecentThreads(ctx, r.C, limit, before)
		return p.NextBefore, len(p.Threads), err
	}},
	{tools.GetThreadHistory, func(ctx context.Context, r *Room, limit int, before string) (string, int, error) {
		p, err := r.H.ThreadHistory(ctx, r.C, r.Long, limit, before)
		return p.NextBefore, len(p.Messages), err
	}},
}

// PageLimit is the page size the page benchmarks read.
const PageLimit = 20

// BenchPage reads the second page of tool (from the first page's cursor: the
// cost of going back in time) in room, b.N times, and reports the homeserver
// requests each call made as "requests/op".
func BenchPage(b *testing.B, r *Room, tool Tool) {
	ctx := context.Background()
	next, n, err := tool.Page(ctx, r, PageLimit, "")
	// The first page of a thread also carries its root.
	if err == nil && (next == "" || n < PageLimit) {
		err = fmt.Errorf("first page: %d entries, next %q", n, next)
	}
	if err != nil {
		fatal(b, fmt.Errorf("%s: %w", tool.Name, err))
	}
	// One untimed read of the page first: a homeserver's caches (Synapse's
	// event cache) make the first read of a page many times slower than the
	// next, and the bench is about the page, not about a cold cache.
	if _, n, err := tool.Page(ctx, r, PageLimit, next); err != nil || n != PageLimit {
		fatal(b, fmt.Errorf("%s second page: %d entries, %v", tool.Name, n, err))
	}
	req0 := r.count()
	var spent0 map[string]time.Duration
	if r.spent != nil {
		spent0 = r.spent()
	}
	var each []time.Duration
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		if _, n, err := tool.Page(ctx, r, PageLimit, next); err != nil || n != PageLimit {
			fatal(b, fmt.Errorf("%s second page: %d entries, %v", tool.Name, n, err))
		}
		each = append(each, time.Since(start))
	}
	slices.Sort(each)
	b.ReportMetric(float64(each[len(each)/2]), "median-ns/op")
	b.ReportMetric(float64(r.count()-req0)/float64(b.N), "requests/op")
	if r.spent != nil {
		// Each endpoint's time a page, as the metric "ns/op:<endpoint>".
		for ep, d := range r.spent() {
			if d -= spent0[ep]; d > 0 {
				b.ReportMetric(float64(d)/float64(b.N), "ns/op:"+ep)
			}
		}
	}
}

// RoomInfoDirect is zooid_get_room_info's handler alone, in-process against
// fakehs: the homeserver's share of a tool call.
func BenchRoomInfoDirect(b *testing.B, r *Room) {
	ctx := context.Background()
	cpu0 := cpuTime()
	for b.Loop() {
		if _, err := r.H.RoomInfo(ctx, r.C); err != nil {
			fatal(b, err)
		}
	}
	reportCPU(b, cpu0)
}
