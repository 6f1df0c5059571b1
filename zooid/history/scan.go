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

// pendingAfter says the scan met a reply or an edit whose root or original
// it had not met by the event last (the end of the page): a later page
// shows that root or original and needs them.
func (s *scanState) pendingAfter(last id.EventID) bool { return s.pending(last, true) }

// pendingEditsAfter is pendingAfter for edits only (thread history shows no counts).
func (s *scanState) pendingEditsAfter(last id.EventID) bool { return s.pending(last, false) }

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

// scanFrom positions a /messages walker for a page: at the live end, or
// right after the cursor. When the cursor says earlier pages met replies or
// edits of events not reached yet, the walk starts at the first page's top
// and passes the earlier pages again, so st counts them; if maxScan events
// don't reach the cursor, it resumes at the cursor and complete is false
// (counts and edits from above that bound are missing).
func scanFrom(ctx context.Context, cli *mautrix.Client, room id.RoomID, cur *cursor, size int, st *scanState) (w *walker, top string, complete bool, err error) {
	ms := &messageStream{cli: cli, room: room}
	if cur == nil {
		w = &walker{fetch: ms.fetch, size: size, observe: st.observe}
		if err := w.load(ctx, ""); err != nil {
			return nil, "", false, err
		}
		return w, w.token, true, nil
	}
	complete = true
	if cur.Pending {
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
	w = &walker{fetch: ms.fetch, size: size, observe: st.observe}
	if err := w.start(ctx, cur); err != nil {
		return nil, "", false, err
	}
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
