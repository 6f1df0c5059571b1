package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/appservice"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/fakehs"
	"github.com/zooid-dev/zooid/zooid/history"
	"github.com/zooid-dev/zooid/zooid/tools"
)

const asToken = "as-token-for-bench"

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
	push *httptest.Server
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
	if r.HS != nil {
		_ = r.HS.Close()
	}
	if r.push != nil {
		r.push.Close()
	}
}

// SeedRoom starts fakehs with the given profile and a room of n messages:
// one in ten is top-level, one in ten replies to the long thread, the rest
// reply to the latest of 20 open threads; so every size has the same density
// of entries per page, and the long thread grows with the room.
func SeedRoom(n int, p fakehs.Profile) (*Room, error) {
	push := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("{}")) }))
	reg := &appservice.Registration{ID: "zooid", URL: push.URL, AppToken: asToken, ServerToken: "hs", SenderLocalpart: "zooid",
		Namespaces: appservice.Namespaces{UserIDs: appservice.NamespaceList{{Regex: "@agent-.*:" + regexp.QuoteMeta("localhost"), Exclusive: true}}}}
	hs, err := fakehs.Start(fakehs.WithAppservice(reg), fakehs.WithProfile(p))
	if err != nil {
		push.Close()
		return nil, fmt.Errorf("starting fakehs: %w", err)
	}
	agent := id.UserID("@agent-a:localhost")
	human := id.UserID("@alice:localhost")
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	events := make([]fakehs.SeedEvent, n)
	var roots []int
	for i := range events {
		e := fakehs.SeedEvent{Sender: human, Content: map[string]any{"msgtype": "m.text", "body": fmt.Sprintf("message %d", i)}, Timestamp: base.Add(time.Duration(i) * time.Second), ThreadRoot: -1}
		switch {
		case i == 0:
		case i%10 == 5:
			e.ThreadRoot = 0
		case i%10 != 0 && len(roots) > 0:
			e.ThreadRoot = roots[i%len(roots)]
		default:
			roots = append(roots, i)
			if len(roots) > 20 {
				roots = roots[1:]
			}
		}
		events[i] = e
	}
	room, err := hs.ImportRoom(fakehs.RoomSeed{Creator: human, Name: "big", Members: []id.UserID{agent}, Events: events})
	if err != nil {
		_ = hs.Close()
		push.Close()
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
			cli, _ := mautrix.NewClient(hs.URL(), u, asToken)
			cli.SetAppServiceUserID = true
			clients[u] = cli
			return cli
		},
	})
	return &Room{HS: hs, H: h, push: push, Long: room.EventIDs[0], count: func() int { return hs.Requests("", "") },
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
