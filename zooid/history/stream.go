package history

import (
	"context"
	"fmt"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/tools"
)

// maxScan bounds the raw events one tool call may walk (resuming after the
// cursor, filling the page, peeking for one more). A page costs O(limit) in a
// dense stream; sparse matches (recent_threads in a room of long threads, the
// thread fallback scan) cost up to maxScan events — about maxScan/chunk HTTP
// requests — however large the room. When the bound is hit the page is returned
// as far as it got, with has_more true and a cursor at the scan position.
const maxScan = 20000

// chunkFetch fetches one chunk of up to size events backwards from a token
// ("" = newest). start is the token that pins "" to a fixed position when the
// server provides one; next is empty when the stream is exhausted.
type chunkFetch func(ctx context.Context, from string, size int) (chunk []*event.Event, start, next string, err error)

// walker yields a backward stream one event at a time, remembering for each
// event the (pinned) token its chunk was fetched from. From the third chunk
// on each is twice the size of the one before, up to maxChunk, so a sparse
// stream (few matches among many events) costs O(log) requests more than a
// dense one, never one request per few matches, while a dense page (one or
// two chunks) fetches no more than it did.
type walker struct {
	fetch chunkFetch
	size  int // size of the next chunk
	loads int
	// observe, when set, sees every event the walk passes, also those skipped
	// to reach a cursor's position.
	observe func(*event.Event)
	token   string // pinned token of the current chunk
	chunk   []*event.Event
	i       int
	next    string
	done    bool
	fetched bool
	scanned int
	// bound, when set, replaces maxScan: a walk that needs less than a tool
	// call's worth of the room (ThreadTail's fallback) stops sooner.
	bound int
	// exhausted is set when the scan bound was reached.
	exhausted bool
}

func (w *walker) scanBound() int {
	if w.bound > 0 {
		return w.bound
	}
	return maxScan
}

func (w *walker) load(ctx context.Context, from string) error {
	if w.size <= 0 {
		w.size = maxChunk
	}
	chunk, start, next, err := w.fetch(ctx, from, w.size)
	if err != nil {
		return err
	}
	if w.loads++; w.loads >= 2 {
		w.size = min(w.size*2, maxChunk)
	}
	w.fetched = true
	w.token = from
	if from == "" && start != "" {
		w.token = start
	}
	w.chunk, w.i = chunk, 0
	w.next = next
	if next == "" || next == from || len(chunk) == 0 && next == start {
		w.done = true
		w.next = ""
	}
	return nil
}

// next returns the next event backwards and the token of its chunk; ok is false
// at the end of the stream or when the scan bound is reached.
func (w *walker) nextEvent(ctx context.Context) (*event.Event, string, bool, error) {
	for {
		if w.i < len(w.chunk) {
			if w.scanned >= w.scanBound() {
				w.exhausted = true
				return nil, "", false, nil
			}
			evt := w.chunk[w.i]
			w.i++
			w.scanned++
			if w.observe != nil {
				w.observe(evt)
			}
			return evt, w.token, true, nil
		}
		if w.done || !w.fetched {
			return nil, "", false, nil
		}
		if w.scanned >= w.scanBound() {
			w.exhausted = true
			return nil, "", false, nil
		}
		if err := w.load(ctx, w.next); err != nil {
			return nil, "", false, err
		}
	}
}

// start positions the walker: at the newest event, or right after c.Last.
func (w *walker) start(ctx context.Context, c *cursor) error {
	if c == nil {
		return w.load(ctx, "")
	}
	found, err := w.seek(ctx, c.Token, c.Last)
	if err != nil {
		return err
	}
	if !found {
		return errCursorGone
	}
	return nil
}

var errCursorGone = tools.Errorf(tools.CodeInvalidCursor, "the position this cursor points to is no longer available; start again without before")

// seek loads from token and walks up to and including last; found is false
// when the stream or the scan bound ended first.
func (w *walker) seek(ctx context.Context, token string, last id.EventID) (found bool, err error) {
	if err := w.load(ctx, token); err != nil {
		return false, err
	}
	for {
		evt, _, ok, err := w.nextEvent(ctx)
		if err != nil || !ok {
			return false, err
		}
		if evt.ID == last {
			return true, nil
		}
	}
}

// item is one accepted event with the scan position after it.
type item struct {
	evt   *event.Event
	token string
}

// collect walks from the walker's position, keeping events accepted by keep,
// until n are kept; then it peeks for one more so has_more is exact. pos is the
// scan position right after the last kept event (or after the last scanned one
// when the bound was hit).
func collect(ctx context.Context, w *walker, n int, keep func(*event.Event) bool, stop func(*event.Event) bool) (items []item, hasMore bool, pos item, err error) {
	var last item
	for {
		evt, tok, ok, err := w.nextEvent(ctx)
		if err != nil {
			return nil, false, item{}, err
		}
		if !ok {
			if w.exhausted && last.evt != nil {
				return items, true, last, nil
			}
			return items, false, item{}, nil
		}
		if stop != nil && stop(evt) {
			if keep(evt) && len(items) < n {
				items = append(items, item{evt, tok})
			} else if keep(evt) {
				return items, true, items[len(items)-1], nil
			}
			return items, false, item{}, nil
		}
		last = item{evt, tok}
		if !keep(evt) {
			continue
		}
		if len(items) == n {
			return items, true, items[len(items)-1], nil
		}
		items = append(items, item{evt, tok})
	}
}

func wrapFetch(what string, room id.RoomID, err error) error {
	return fmt.Errorf("%s in %s: %w", what, room, err)
}
