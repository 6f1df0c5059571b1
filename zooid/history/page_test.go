package history_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/zooid-dev/zooid/fakehs"
	"github.com/zooid-dev/zooid/zooid/tools"
)

// longRoom is a room of long messages: a thread root, then 40 messages of
// about 6 KB (every fourth top-level, the others replies to the root), then
// one of 60 KiB, the newest. A page of 200 would be some 300 KB.
func longRoom() (events []fakehs.SeedEvent, history, threads, replies []string) {
	pad := func(s string, n int) string { return s + " " + strings.Repeat("x", n) }
	root := pad("the root", 3000)
	events = append(events, text(root))
	history, threads = append(history, root), append(threads, root)
	for i := range 40 {
		body := pad(fmt.Sprintf("message %d", i), 6000)
		if i%4 == 0 {
			events = append(events, text(body))
			threads = append(threads, body)
		} else {
			events = append(events, reply(body, 0))
			replies = append(replies, body)
		}
		history = append(history, body)
	}
	big := pad("the long one", 60<<10)
	events = append(events, text(big))
	history, threads = append(history, big), append(threads, big)
	return events, history, threads, replies
}

// walkAll pages a tool from its newest page until has_more is false (at most
// 20 pages), as an agent would.
func walkAll[P any](t *testing.T, what string, page func(before string) (P, error), next func(P) (more bool, before string)) []P {
	t.Helper()
	var pages []P
	for before := ""; ; {
		p, err := page(before)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, p)
		more, nb := next(p)
		if !more {
			return pages
		}
		if len(pages) == 20 {
			t.Fatalf("%s: still has_more after %d pages", what, len(pages))
		}
		before = nb
	}
}

func messagePageNext(p tools.MessagePage) (bool, string) { return p.HasMore, p.NextBefore }

// checkPageBytes fails unless page (as the tool result encodes it) is
// within tools.MaxPageBytes, or holds one entry alone (a message longer than
// the bound still gets a page), and unless it is full: the entry the next
// page opens with would not have fitted beside it.
func checkPageBytes(t *testing.T, what string, page any, entries int, next any) {
	t.Helper()
	raw, err := json.Marshal(page)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) > tools.MaxPageBytes && entries > 1 {
		t.Fatalf("%s: %d entries in %d bytes of JSON, over the %d of a page", what, entries, len(raw), tools.MaxPageBytes)
	}
	if next == nil {
		return
	}
	n, err := json.Marshal(next)
	if err != nil {
		t.Fatal(err)
	}
	// 2 KiB: what a page keeps for its own fields beside its entries.
	if len(raw)+len(n)+1 <= tools.MaxPageBytes-2<<10 {
		t.Fatalf("%s: %d entries in %d bytes ended before an entry of %d bytes that fitted", what, entries, len(raw), len(n))
	}
}

// TestLongMessagesComeInPagesWithinTheBound pages each history tool with
// limit 200 through a room of long messages: every page stays within
// tools.MaxPageBytes (so Claude Code, which cuts a tool result past 100,000
// characters, never cuts off a page's next_before), holds as many entries as
// fit, and the walk still returns every message once, in order, with an
// exact has_more. Fails with pages cut by limit alone: the first pages are
// some 250 KB.
func TestLongMessagesComeInPagesWithinTheBound(t *testing.T) {
	events, history, threads, replies := longRoom()
	for name, p := range map[string]fakehs.Profile{"synapse": {}, "degraded": fakehs.Degraded} {
		t.Run(name, func(t *testing.T) {
			r := newRoom(t, p, slices.Clone(events))
			ctx := context.Background()

			pages := walkAll(t, "history", func(before string) (tools.MessagePage, error) { return r.h.History(ctx, r.c, 200, before) }, messagePageNext)
			var got []string
			for i := len(pages) - 1; i >= 0; i-- {
				got = append(got, bodies(pages[i].Messages, msgText)...)
			}
			if !slices.Equal(got, history) {
				t.Fatalf("history: %d messages in %d pages, want each of %d once in order", len(got), len(pages), len(history))
			}
			if len(pages[0].Messages) != 1 || pages[0].Messages[0].Text != history[len(history)-1] {
				t.Fatalf("history: the first page holds %d messages, want the 60 KiB one alone", len(pages[0].Messages))
			}
			for i, page := range pages {
				var next any
				if i+1 < len(pages) {
					// Chronological within a page: the newest of the next is its last.
					next = pages[i+1].Messages[len(pages[i+1].Messages)-1]
				}
				checkPageBytes(t, fmt.Sprintf("history page %d", i+1), page, len(page.Messages), next)
			}

			tpages := walkAll(t, "recent threads", func(before string) (tools.ThreadPage, error) { return r.h.RecentThreads(ctx, r.c, 200, before) },
				func(p tools.ThreadPage) (bool, string) { return p.HasMore, p.NextBefore })
			var gotThreads []string
			for i, page := range tpages {
				gotThreads = append(gotThreads, bodies(page.Threads, entryText)...)
				var next any
				if i+1 < len(tpages) {
					next = tpages[i+1].Threads[0]
				}
				checkPageBytes(t, fmt.Sprintf("recent threads page %d", i+1), page, len(page.Threads), next)
			}
			slices.Reverse(gotThreads)
			if !slices.Equal(gotThreads, threads) {
				t.Fatalf("recent threads: %d entries in %d pages, want each of %d once", len(gotThreads), len(tpages), len(threads))
			}
			last := tpages[len(tpages)-1].Threads
			if root := last[len(last)-1]; root.ReplyCount != len(replies) {
				t.Fatalf("recent threads: the root counts %d replies across the pages, want %d", root.ReplyCount, len(replies))
			}

			rpages := walkAll(t, "thread history", func(before string) (tools.MessagePage, error) {
				return r.h.ThreadHistory(ctx, r.c, r.ids[0], 200, before)
			}, messagePageNext)
			if rpages[0].Messages[0].Text != history[0] {
				t.Fatalf("thread history: the first page does not open with the root")
			}
			var gotReplies []string
			for i := len(rpages) - 1; i >= 0; i-- {
				ms := rpages[i].Messages
				if i == 0 {
					ms = ms[1:]
				}
				gotReplies = append(gotReplies, bodies(ms, msgText)...)
			}
			if !slices.Equal(gotReplies, replies) {
				t.Fatalf("thread history: %d replies in %d pages, want each of %d once in order", len(gotReplies), len(rpages), len(replies))
			}
			for i, page := range rpages {
				var next any
				if i+1 < len(rpages) {
					next = rpages[i+1].Messages[len(rpages[i+1].Messages)-1]
				}
				checkPageBytes(t, fmt.Sprintf("thread history page %d", i+1), page, len(page.Messages), next)
			}
		})
	}
}

// TestALongRootHasTheFirstPageToItself: a thread whose root leaves no room
// for its newest reply opens with the root alone and has_more, and the next
// page holds the replies. Fails with the root not counted against the bound
// (the first page then holds the root and both replies, over 64 KiB).
func TestALongRootHasTheFirstPageToItself(t *testing.T) {
	root := "the root " + strings.Repeat("x", 60<<10)
	events := []fakehs.SeedEvent{text(root), reply("reply 0 "+strings.Repeat("y", 6000), 0), reply("reply 1 "+strings.Repeat("z", 6000), 0)}
	for name, p := range map[string]fakehs.Profile{"synapse": {}, "degraded": fakehs.Degraded} {
		t.Run(name, func(t *testing.T) {
			r := newRoom(t, p, slices.Clone(events))
			ctx := context.Background()
			first, err := r.h.ThreadHistory(ctx, r.c, r.ids[0], 200, "")
			if err != nil {
				t.Fatal(err)
			}
			if got := bodies(first.Messages, msgText); len(got) != 1 || got[0] != root || !first.HasMore {
				t.Fatalf("first page: %d messages, has_more %v; want the root alone and has_more", len(got), first.HasMore)
			}
			second, err := r.h.ThreadHistory(ctx, r.c, r.ids[0], 200, first.NextBefore)
			if err != nil {
				t.Fatal(err)
			}
			want := []string{events[1].Content["body"].(string), events[2].Content["body"].(string)}
			if got := bodies(second.Messages, msgText); !slices.Equal(got, want) || second.HasMore {
				t.Fatalf("second page: %d messages, has_more %v; want both replies in order and no more", len(got), second.HasMore)
			}
		})
	}
}
