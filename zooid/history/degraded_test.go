package history_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/busyroom"
	"github.com/zooid-dev/zooid/fakehs"
	"github.com/zooid-dev/zooid/zooid/history"
	"github.com/zooid-dev/zooid/zooid/tools"
)

var (
	human = id.UserID("@alice:localhost")
	agent = id.UserID("@agent-a:localhost")
	base  = time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
)

// room is a fakehs room read through a Reader as agent-a.
type room struct {
	hs  *fakehs.Server
	h   *history.Reader
	c   tools.Caller
	ids []id.EventID
}

// newRoom imports events into a room of alice and agent-a on a server with
// the profile; events get one second each from base.
func newRoom(t *testing.T, p fakehs.Profile, events []fakehs.SeedEvent) *room {
	t.Helper()
	hs := busyroom.Server(t, p)
	for i := range events {
		if events[i].Timestamp.IsZero() {
			events[i].Timestamp = base.Add(time.Duration(i) * time.Second)
		}
	}
	imp, err := hs.ImportRoom(fakehs.RoomSeed{Creator: human, Name: "ops", Members: []id.UserID{agent}, Events: events})
	if err != nil {
		t.Fatal(err)
	}
	h := history.New(history.Options{Client: func(u id.UserID) *mautrix.Client { return asCli(hs, u) }, CursorKey: cursorKey})
	return &room{hs: hs, h: h, c: tools.Caller{Agent: "agent-a", UserID: agent, Transport: "matrix", Room: imp.RoomID, Rooms: []id.RoomID{imp.RoomID}}, ids: imp.EventIDs}
}

var cursorKey = []byte("a key shared by the Histories of a test")

// restarted is a fresh Reader over the same server and cursor key: what a
// daemon restart between two pages leaves.
func (r *room) restarted() *history.Reader {
	return history.New(history.Options{Client: func(u id.UserID) *mautrix.Client { return asCli(r.hs, u) }, CursorKey: cursorKey})
}

func asCli(hs *fakehs.Server, u id.UserID) *mautrix.Client {
	cli, _ := mautrix.NewClient(hs.URL(), u, busyroom.ASToken)
	cli.SetAppServiceUserID = true
	return cli
}

func text(body string) fakehs.SeedEvent {
	return fakehs.SeedEvent{Sender: human, Content: map[string]any{"msgtype": "m.text", "body": body}, ThreadRoot: -1}
}

func reply(body string, root int) fakehs.SeedEvent {
	e := text(body)
	e.ThreadRoot = root
	return e
}

func reaction(target int) fakehs.SeedEvent {
	return fakehs.SeedEvent{Sender: human, Type: "m.reaction", Content: map[string]any{}, ThreadRoot: -1,
		Relation: &fakehs.SeedRelation{RelType: "m.annotation", Target: target, Key: "👍"}}
}

func edit(body string, target int) fakehs.SeedEvent {
	return fakehs.SeedEvent{Sender: human, Content: map[string]any{"msgtype": "m.text", "body": "* " + body,
		"m.new_content": map[string]any{"msgtype": "m.text", "body": body}}, ThreadRoot: -1,
		Relation: &fakehs.SeedRelation{RelType: "m.replace", Target: target}}
}

func bodies[M any](ms []M, get func(M) string) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = get(m)
	}
	return out
}

func msgText(m tools.Message) string          { return m.Text }
func entryText(m tools.ThreadOverview) string { return m.Text }

// Issue 16.1: a server that filters after the limit answers a page of only
// reactions with an empty chunk and no end; that is not the start of the room.
func TestHistoryBehindAPageOfReactions(t *testing.T) {
	var events []fakehs.SeedEvent
	for i := range 5 {
		events = append(events, text(fmt.Sprint("message ", i)))
	}
	for range 520 {
		events = append(events, reaction(4))
	}
	r := newRoom(t, fakehs.Degraded, events)
	ctx := context.Background()
	page, err := r.h.History(ctx, r.c, 50, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(bodies(page.Messages, msgText)); got != "[message 0 message 1 message 2 message 3 message 4]" || page.HasMore {
		t.Fatalf("history: %s, has_more %v; want the 5 messages and no more", got, page.HasMore)
	}
	threads, err := r.h.RecentThreads(ctx, r.c, 50, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(bodies(threads.Threads, entryText)); got != "[message 4 message 3 message 2 message 1 message 0]" || threads.HasMore {
		t.Fatalf("recent threads: %s, has_more %v", got, threads.HasMore)
	}
	// What the daemon reads at start-up to adopt a task root.
	recent, err := history.RecentMessages(ctx, asCli(r.hs, agent), r.c.Room, 500, 4, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(recent) != 5 {
		t.Fatalf("RecentMessages found %d messages, want 5", len(recent))
	}
}

// Issue 16.2: without bundled m.replace, the newest edit met in the scan (or
// asked for) gives the text, also on a later page than the edit's.
func TestEditsWithoutBundles(t *testing.T) {
	events := []fakehs.SeedEvent{
		text("root v1"),      // 0
		reply("reply v1", 0), // 1
		text("old v1"),       // 2
		edit("root v2", 0),   // 3
		edit("reply v2", 1),  // 4
		edit("root v3", 0),   // 5
	}
	for i := range 30 {
		events = append(events, text(fmt.Sprint("filler ", i)))
	}
	events = append(events, edit("old v2", 2))
	r := newRoom(t, fakehs.Degraded, events)
	ctx := context.Background()

	th, err := r.h.ThreadHistory(ctx, r.c, r.ids[0], 50, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(bodies(th.Messages, msgText)); got != "[root v3 reply v2]" {
		t.Fatalf("thread history: %s, want [root v3 reply v2]", got)
	}
	// Page by 10: "old v1" is on the last page, its edit on the first.
	var all []string
	before := ""
	for {
		p, err := r.h.History(ctx, r.c, 10, before)
		if err != nil {
			t.Fatal(err)
		}
		all = append(bodies(p.Messages, msgText), all...)
		if !p.HasMore {
			break
		}
		before = p.NextBefore
	}
	if len(all) != 33 || all[0] != "root v3" || all[1] != "reply v2" || all[2] != "old v2" {
		t.Fatalf("history pages begin %q (%d messages), want the edited texts [root v3 reply v2 old v2] of 33", all[:3], len(all))
	}
	var entries []string
	before = ""
	for {
		p, err := r.h.RecentThreads(ctx, r.c, 10, before)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, bodies(p.Threads, entryText)...)
		if !p.HasMore {
			break
		}
		before = p.NextBefore
	}
	if n := len(entries); n != 32 || entries[n-1] != "root v3" || entries[n-2] != "old v2" {
		t.Fatalf("recent threads end %q (%d entries), want [... old v2 root v3] of 32", entries[max(0, n-2):], n)
	}
}

// Issue 16.3: without aggregations, reply counts come from the scan; the
// requests a page costs do not grow with the page size.
func TestReplyCountsCostNoRequestPerEntry(t *testing.T) {
	var events []fakehs.SeedEvent
	for i := range 600 {
		events = append(events, text(fmt.Sprint("entry ", i)))
		if i%50 == 0 {
			root := len(events) - 1
			for j := range 3 {
				events = append(events, reply(fmt.Sprint("reply ", j), root))
			}
		}
	}
	// A late reply to the oldest thread: seen on the first page, counted on the last.
	events = append(events, reply("late", 0))
	ctx := context.Background()
	for _, restart := range []bool{false, true} {
		for _, limit := range []int{50, 200} {
			r := newRoom(t, fakehs.Degraded, events)
			before, pages := "", 0
			counts := map[string]int{}
			maxReqs := 0
			h := r.h
			for {
				if restart {
					h = r.restarted() // nothing kept: the page rescans from the top
				}
				n0 := r.hs.Requests("", "")
				p, err := h.RecentThreads(ctx, r.c, limit, before)
				if err != nil {
					t.Fatal(err)
				}
				maxReqs = max(maxReqs, r.hs.Requests("", "")-n0)
				for _, e := range p.Threads {
					counts[e.Text] = e.ReplyCount
				}
				pages++
				if !p.HasMore {
					break
				}
				before = p.NextBefore
			}
			if rel := r.hs.Requests("GET", "/_matrix/client/v1/rooms/*/relations/*/*"); rel != 0 {
				t.Errorf("limit %d: %d /relations requests", limit, rel)
			}
			// Membership, then /messages: a chunk or two for the page and the
			// peek, one more at the room's start and one without the filter
			// there; after a restart the rescan from the top replaces carrying.
			const bound = 5
			if maxReqs > bound {
				t.Errorf("limit %d, restart %v: a page cost up to %d requests, want at most %d", limit, restart, maxReqs, bound)
			}
			if counts["entry 0"] != 4 || counts["entry 50"] != 3 || counts["entry 1"] != 0 || len(counts) != 600 {
				t.Errorf("limit %d, restart %v: counts entry 0 %d (want 4), entry 50 %d (want 3), entry 1 %d; %d entries", limit, restart, counts["entry 0"], counts["entry 50"], counts["entry 1"], len(counts))
			}
			t.Logf("limit %d, restart %v: %d pages, at most %d requests per page", limit, restart, pages, maxReqs)
		}
	}
}

// What a page leaves for the next one is kept while the daemon runs, so
// paging on does not rescan from the top; after a restart it does, with the
// same counts.
func TestScanStateKeptBetweenPages(t *testing.T) {
	var events []fakehs.SeedEvent
	for i := range 2500 {
		events = append(events, text(fmt.Sprint("entry ", i)))
	}
	events = append(events, reply("late", 0))
	ctx := context.Background()
	scanned := map[bool]int{}
	for _, restart := range []bool{false, true} {
		r := newRoom(t, fakehs.Degraded, events)
		h, before, count := r.h, "", -1
		for {
			if restart {
				h = r.restarted()
			}
			p, err := h.RecentThreads(ctx, r.c, 100, before)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range p.Threads {
				if e.Text == "entry 0" {
					count = e.ReplyCount
				}
			}
			if !p.HasMore {
				break
			}
			before = p.NextBefore
		}
		if count != 1 {
			t.Errorf("restart %v: entry 0 has reply_count %d, want 1", restart, count)
		}
		scanned[restart] = r.hs.Requests("GET", "/_matrix/client/v3/rooms/*/messages")
	}
	if scanned[false] >= scanned[true] {
		t.Errorf("/messages requests paging by 100: %d with kept scan state, %d rescanning after each restart; want fewer kept", scanned[false], scanned[true])
	}
	t.Logf("/messages requests: %d kept, %d rescanning", scanned[false], scanned[true])
}

// Issue 12: reply_count counts exactly the replies thread history returns; a
// cancelled task thread (root and a dev.zooid.thread_result) has none.
func TestReplyCountIsThreadHistory(t *testing.T) {
	for name, p := range map[string]fakehs.Profile{"synapse": {}, "degraded": fakehs.Degraded} {
		t.Run(name, func(t *testing.T) {
			events := []fakehs.SeedEvent{
				text("audit svc-a"),
				{Sender: human, Type: "dev.zooid.thread_result", ThreadRoot: 0, Content: map[string]any{
					"dev.zooid.thread_result": map[string]any{"status": "cancelled"}}},
				{Sender: human, Type: "dev.zooid.error", ThreadRoot: 0, Content: map[string]any{"code": "agent_crashed"}},
				{Sender: human, Type: "m.reaction", Content: map[string]any{}, ThreadRoot: -1,
					Relation: &fakehs.SeedRelation{RelType: "m.annotation", Target: 0, Key: "👍"}},
			}
			r := newRoom(t, p, events)
			ctx := context.Background()
			th, err := r.h.ThreadHistory(ctx, r.c, r.ids[0], 50, "")
			if err != nil {
				t.Fatal(err)
			}
			rt, err := r.h.RecentThreads(ctx, r.c, 50, "")
			if err != nil {
				t.Fatal(err)
			}
			if len(th.Messages) != 1 || len(rt.Threads) != 1 || rt.Threads[0].ReplyCount != 0 || rt.Threads[0].LastActivityAt != th.Messages[0].Timestamp {
				t.Fatalf("thread history has %d messages; recent threads %+v: want the root alone, reply_count 0, last activity the root's", len(th.Messages), rt.Threads)
			}
		})
	}
}

// On a server that serves history to non-members, the daemon's own check
// refuses a non-member agent.
func TestNonMemberRefusedWhereTheServerServes(t *testing.T) {
	r := newRoom(t, fakehs.Degraded, []fakehs.SeedEvent{text("secret")})
	outsider, _, err := r.hs.RegisterUser("agent-b", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := asCli(r.hs, outsider).Messages(ctx, r.c.Room, "", "", mautrix.DirectionBackward, nil, 10); err != nil {
		t.Fatalf("the degraded server refused the outsider itself (%v): the test would prove nothing", err)
	}
	c := r.c
	c.Agent, c.UserID = "agent-b", outsider
	_, err = r.h.History(ctx, c, 10, "")
	var te *tools.Error
	if !errors.As(err, &te) || te.Code != tools.CodeForbidden {
		t.Fatalf("outsider read: %v, want %s", err, tools.CodeForbidden)
	}
}

// Issue 16.4: an agent that posts and reads its thread at once finds its post,
// on a server that shows events a moment after the send returns.
func TestReadsSeeOwnPosts(t *testing.T) {
	p := fakehs.Profile{VisibilityDelay: 400 * time.Millisecond}
	r := newRoom(t, p, []fakehs.SeedEvent{text("root")})
	ctx := context.Background()
	sent, err := r.h.Send(ctx, r.c, string(r.c.Room), r.ids[0], "on it")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	th, err := r.h.ThreadHistory(ctx, r.c, r.ids[0], 10, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(th.Messages) != 2 || th.Messages[1].ID != sent.EventID {
		t.Fatalf("thread history right after the post: %v; want the root and the post", bodies(th.Messages, msgText))
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("the read waited %v", time.Since(start))
	}
	// Once seen, reads don't wait again: the post is visible.
	n := r.hs.Requests("GET", "/_matrix/client/v3/rooms/*/event/*")
	if _, err := r.h.History(ctx, r.c, 10, ""); err != nil {
		t.Fatal(err)
	}
	if got := r.hs.Requests("GET", "/_matrix/client/v3/rooms/*/event/*") - n; got != 0 {
		t.Fatalf("a later read asked /event %d times", got)
	}
}

// TestThreadPagesHoldAtMostLimit: a page of zooid_get_thread_history never
// holds more than limit entries (the contract, §3): the first page is the
// root, then the newest limit-1 replies; with limit 1 it is the root alone,
// and the replies start on the next page. Paging to the end meets every
// reply once, in order, on both profiles (relations and the scan).
func TestThreadPagesHoldAtMostLimit(t *testing.T) {
	events := []fakehs.SeedEvent{text("the root")}
	for i := range 5 {
		events = append(events, reply(fmt.Sprint("reply ", i), 0))
	}
	for name, p := range map[string]fakehs.Profile{"synapse": {}, "degraded": fakehs.Degraded} {
		for _, limit := range []int{1, 2, 3, 6, 7} {
			t.Run(fmt.Sprintf("%s/limit %d", name, limit), func(t *testing.T) {
				r := newRoom(t, p, slices.Clone(events))
				ctx := context.Background()
				var pages [][]string
				before := ""
				for range 10 {
					page, err := r.h.ThreadHistory(ctx, r.c, r.ids[0], limit, before)
					if err != nil {
						t.Fatal(err)
					}
					got := bodies(page.Messages, msgText)
					if len(got) > limit {
						t.Fatalf("page %d holds %d entries %q, more than limit %d", len(pages)+1, len(got), got, limit)
					}
					pages = append(pages, got)
					if !page.HasMore {
						break
					}
					before = page.NextBefore
				}
				if pages[0][0] != "the root" {
					t.Fatalf("the first page %q does not open with the root", pages[0])
				}
				// Pages run newest first; within a page, oldest first.
				var replies []string
				for i := len(pages) - 1; i >= 0; i-- {
					for _, b := range pages[i] {
						if b != "the root" {
							replies = append(replies, b)
						}
					}
				}
				want := []string{"reply 0", "reply 1", "reply 2", "reply 3", "reply 4"}
				if !slices.Equal(replies, want) {
					t.Fatalf("pages %q: replies %q, want each once in order %q", pages, replies, want)
				}
			})
		}
	}
}

// TestTimestampsKeepMilliseconds pins the exact shape of every timestamp a
// tool returns: RFC 3339 in UTC with milliseconds always written (three
// digits, Matrix keeps origin_server_ts in milliseconds), e.g.
// 2026-01-01T09:00:01.500Z; a whole second is .000Z.
func TestTimestampsKeepMilliseconds(t *testing.T) {
	events := []fakehs.SeedEvent{text("the root"), reply("a reply", 0)}
	events[0].Timestamp = base
	events[1].Timestamp = base.Add(1500 * time.Millisecond)
	r := newRoom(t, fakehs.Profile{}, events)
	ctx := context.Background()
	th, err := r.h.ThreadHistory(ctx, r.c, r.ids[0], 10, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{th.Messages[0].Timestamp, th.Messages[1].Timestamp}; !slices.Equal(got, []string{"2026-01-01T09:00:00.000Z", "2026-01-01T09:00:01.500Z"}) {
		t.Fatalf("timestamps %q", got)
	}
	rt, err := r.h.RecentThreads(ctx, r.c, 10, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(rt.Threads) == 0 || rt.Threads[0].Timestamp != "2026-01-01T09:00:00.000Z" || rt.Threads[0].LastActivityAt != "2026-01-01T09:00:01.500Z" {
		t.Fatalf("recent threads %+v: want the root at 09:00:00.000Z, last activity 09:00:01.500Z", rt.Threads)
	}
}
