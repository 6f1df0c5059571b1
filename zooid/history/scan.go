package history

import (
	"context"
	"fmt"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// scanState is what a backward scan learns beyond the page it fills: the
// thread replies of each root (by the one rule, isReplyIn) and the edits of
// each original, met before the root or original itself since both are
// newer. It lets a page show reply counts and edited text on a homeserver
// that bundles no aggregations, without a request per entry.
type scanState struct {
	seq     int
	met     map[id.EventID]int // event → order in the scan
	replies map[id.EventID]*threadStats
	edits   map[id.EventID][]*event.Event // original → edits, newest first
	// log is every reply counted, in scan order, so what is carried to the
	// next page stops at the page's end (the peek past it is scanned again).
	log []counted
}

type counted struct {
	seq  int // 0 for what earlier pages carried
	root id.EventID
	ts   int64
	n    int
}

// threadStats is what a scan learnt about a root's replies.
type threadStats struct {
	count int
	last  int64
}

func newScanState() *scanState {
	return &scanState{met: map[id.EventID]int{}, replies: map[id.EventID]*threadStats{}, edits: map[id.EventID][]*event.Event{}}
}

// observe is the walker hook: it sees every event the scan passes.
func (s *scanState) observe(evt *event.Event) {
	s.seq++
	s.met[evt.ID] = s.seq
	rc, ok := parseContent(evt)
	if !ok || rc.RelatesTo == nil {
		return
	}
	if rc.RelatesTo.Type == event.RelReplace && rc.RelatesTo.EventID != "" {
		s.edits[rc.RelatesTo.EventID] = append(s.edits[rc.RelatesTo.EventID], evt)
		return
	}
	if root := threadOf(evt); root != "" && isHistory(evt) {
		st := s.replies[root]
		if st == nil {
			st = &threadStats{}
			s.replies[root] = st
		}
		st.count++
		st.last = max(st.last, evt.Timestamp)
		s.log = append(s.log, counted{s.seq, root, evt.Timestamp, 1})
	}
}

// edit is the newest edit of orig met that applies to it (same sender, as
// Synapse's rule for bundling), or nil.
func (s *scanState) edit(orig *event.Event) *event.Event {
	for _, e := range s.edits[orig.ID] {
		if e.Sender == orig.Sender {
			return e
		}
	}
	return nil
}

// pending says the scan met a reply (when replies) or an edit whose root or
// original it had not met by the event last (the end of the page): a later
// page shows that root or original and needs them.
func (s *scanState) pending(last id.EventID, replies bool) bool {
	end, ok := s.met[last]
	if !ok {
		end = s.seq
	}
	reached := func(target id.EventID) bool {
		n, ok := s.met[target]
		return ok && n <= end
	}
	for root := range s.replies {
		if replies && !reached(root) {
			return true
		}
	}
	for orig := range s.edits {
		if !reached(orig) {
			return true
		}
	}
	return false
}

// unreached is what a later page needs of this scan: the replies and edits
// of events it had not reached by last.
func (s *scanState) unreached(last id.EventID) *scanState {
	end, ok := s.met[last]
	if !ok {
		end = s.seq
	}
	reached := func(target id.EventID) bool {
		n, ok := s.met[target]
		return ok && n <= end
	}
	out := newScanState()
	for _, c := range s.log {
		if c.seq > end || reached(c.root) {
			continue
		}
		st := out.replies[c.root]
		if st == nil {
			st = &threadStats{}
			out.replies[c.root] = st
		}
		st.count += c.n
		st.last = max(st.last, c.ts)
	}
	for orig, es := range s.edits {
		if reached(orig) {
			continue
		}
		for _, e := range es {
			if s.met[e.ID] <= end {
				out.edits[orig] = append(out.edits[orig], e)
			}
		}
	}
	return out
}

// absorb takes in what earlier pages carried; it must come before this
// page's scan, whose edits are older.
func (s *scanState) absorb(o *scanState) {
	for root, st := range o.replies {
		s.replies[root] = &threadStats{count: st.count, last: st.last}
		s.log = append(s.log, counted{0, root, st.last, st.count})
	}
	for orig, es := range o.edits {
		s.edits[orig] = append(s.edits[orig], es...)
	}
}

// maxCarried bounds the scan states kept for the cursors a Reader issued.
const maxCarried = 64

// keepCarried remembers what the page behind cursor leaves for the next one,
// so paging on needs no rescan while the daemon runs.
func (h *Reader) keepCarried(cursor string, st *scanState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.carried == nil {
		h.carried = map[string]*scanState{}
	}
	if _, ok := h.carried[cursor]; !ok {
		h.carriedOrder = append(h.carriedOrder, cursor)
	}
	h.carried[cursor] = st
	for len(h.carriedOrder) > maxCarried {
		delete(h.carried, h.carriedOrder[0])
		h.carriedOrder = h.carriedOrder[1:]
	}
}

func (h *Reader) carriedFor(cursor string) *scanState {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.carried[cursor]
}

// scanFrom positions a /messages walker for a page: at the live end, or
// right after the cursor. When the cursor says earlier pages met replies or
// edits of events not reached yet, st takes them from carried (what this
// Reader kept for the cursor), or else the walk starts at the first page's
// top and passes the earlier pages again, so st counts them; if maxScan
// events don't reach the cursor, it resumes at the cursor and complete is
// false (counts and edits from above that bound are missing).
func scanFrom(ctx context.Context, cli *mautrix.Client, room id.RoomID, dec Decrypter, cur *cursor, carried *scanState, size int, st *scanState) (w *walker, top string, complete bool, err error) {
	ms := &messageStream{cli: cli, room: room, decrypt: dec}
	if cur == nil {
		w = &walker{fetch: ms.fetch, size: size, observe: st.observe}
		if err := w.load(ctx, ""); err != nil {
			return nil, "", false, err
		}
		return w, w.token, true, nil
	}
	complete = true
	if cur.Pending && carried != nil {
		st.absorb(carried)
	} else if cur.Pending {
		w = &walker{fetch: ms.fetch, size: maxChunk, observe: st.observe}
		found, err := w.seek(ctx, cur.Top, cur.Last)
		if err != nil {
			return nil, "", false, err
		}
		if found {
			w.scanned = 0 // the page gets its own scan bound
			return w, cur.Top, true, nil
		}
		complete = false
	}
	// Events passed to reach the cursor were seen by the page before; only
	// what follows it is this page's.
	w = &walker{fetch: ms.fetch, size: size}
	if err := w.start(ctx, cur); err != nil {
		return nil, "", false, err
	}
	w.observe = st.observe
	return w, cur.Top, complete, nil
}

// askEdit reads the newest edit of orig from /relations/{id}/m.replace: one
// request, for a message whose edit no bundle and no scan provided. A server
// without that endpoint leaves the original text.
func askEdit(ctx context.Context, cli *mautrix.Client, room id.RoomID, orig *event.Event) (*event.Event, error) {
	resp, err := cli.GetRelations(ctx, room, orig.ID, &mautrix.ReqGetRelations{
		RelationType: event.RelReplace, Dir: mautrix.DirectionBackward, Limit: 50,
	})
	if err != nil {
		if isUnsupported(err) || isRefusal(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading edits of %s: %w", orig.ID, err)
	}
	st := newScanState()
	for _, evt := range resp.Chunk { // newest first; a server may ignore the m.replace filter
		st.observe(evt)
	}
	return st.edit(orig), nil
}
