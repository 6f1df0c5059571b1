package matrix

import (
	"encoding/json"
	"fmt"
	"testing"

	"maunium.net/go/mautrix/id"
)

func rawEv(eid string) inboxRecord {
	return inboxRecord{Event: json.RawMessage(fmt.Sprintf(`{"event_id":%q,"room_id":"!r:x","type":"m.room.message","sender":"@h:x","content":{"body":"b"}}`, eid))}
}

func openTestStore(t *testing.T, dir string) *store {
	t.Helper()
	s, err := openStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.close() })
	return s
}

func TestStoreDedupesEventsAndTxns(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	n, replayed, err := s.record(batch{txnID: "t1", events: []inboxRecord{rawEv("$1"), rawEv("$2"), rawEv("$1")}})
	if err != nil || len(n) != 2 || replayed {
		t.Fatalf("record = %d, %v, %v; want 2 new", len(n), replayed, err)
	}
	// Same txn id again with the same events: recognised, nothing recorded.
	if n, replayed, err := s.record(batch{txnID: "t1", events: []inboxRecord{rawEv("$1"), rawEv("$2")}}); err != nil || len(n) != 0 || !replayed {
		t.Fatalf("replayed txn = %d, %v, %v; want 0 new, replayed", len(n), replayed, err)
	}
	// A different txn carrying an old event: only the new one is recorded.
	if n, _, err := s.record(batch{txnID: "t2", events: []inboxRecord{rawEv("$2"), rawEv("$4")}}); err != nil || len(n) != 1 {
		t.Fatalf("overlapping txn = %d, %v; want 1", len(n), err)
	}
	// An event without an id can't be deduped and is dropped.
	if n, _, err := s.record(batch{events: []inboxRecord{{Event: json.RawMessage(`{"type":"m.room.message"}`)}}}); err != nil || len(n) != 0 {
		t.Fatalf("id-less event = %d, %v; want 0", len(n), err)
	}
	ps, err := s.pendingAfter(0)
	if err != nil {
		t.Fatal(err)
	}
	var ids []id.EventID
	for _, p := range ps {
		var re rawEvent
		_ = json.Unmarshal(p.rec.Event, &re)
		ids = append(ids, re.ID)
		if p.rec.Room != "!r:x" {
			t.Errorf("record room = %q", p.rec.Room)
		}
	}
	if fmt.Sprint(ids) != "[$1 $2 $4]" {
		t.Fatalf("inbox = %v, want [$1 $2 $4]", ids)
	}
	if err := s.done(ps[0].seq); err != nil {
		t.Fatal(err)
	}
	if rest, _ := s.pendingAfter(0); len(rest) != 2 {
		t.Fatalf("after done: %d pending, want 2", len(rest))
	}
	if rest, _ := s.pendingAfter(ps[1].seq); len(rest) != 1 {
		t.Fatalf("pendingAfter(second) = %d, want 1", len(rest))
	}
}

func TestStoreSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	s, err := openStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.record(batch{sinceFor: "@a:x", since: "s42", events: []inboxRecord{rawEv("$1")}}); err != nil {
		t.Fatal(err)
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	s = openTestStore(t, dir)
	if tok, err := s.since("@a:x"); err != nil || tok != "s42" {
		t.Fatalf("since = %q, %v", tok, err)
	}
	if ps, _ := s.pendingAfter(0); len(ps) != 1 {
		t.Fatalf("pending after reopen = %d, want 1", len(ps))
	}
	if n, _, _ := s.record(batch{events: []inboxRecord{rawEv("$1")}}); len(n) != 0 {
		t.Fatal("event seen before reopen was recorded again")
	}
}

func TestStoreSeenIsBounded(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	s.seenLimit = 3
	for i := range 5 {
		if n, _, err := s.record(batch{events: []inboxRecord{rawEv(fmt.Sprintf("$%d", i))}}); err != nil || len(n) != 1 {
			t.Fatalf("record %d = %d, %v", i, len(n), err)
		}
	}
	// $0 and $1 were forgotten, $2..$4 are still deduped.
	if n, _, _ := s.record(batch{events: []inboxRecord{rawEv("$4"), rawEv("$2")}}); len(n) != 0 {
		t.Fatalf("recent ids recorded again: %d", len(n))
	}
	if n, _, _ := s.record(batch{events: []inboxRecord{rawEv("$0")}}); len(n) != 1 {
		t.Fatalf("evicted id not recorded: %d", len(n))
	}
}

func BenchmarkStoreRecord(b *testing.B) {
	s, err := openStore(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	defer s.close()
	i := 0
	for b.Loop() {
		i++
		if _, _, err := s.record(batch{txnID: fmt.Sprint(i), events: []inboxRecord{rawEv(fmt.Sprintf("$%d", i))}}); err != nil {
			b.Fatal(err)
		}
	}
}

// Handled records ride along with the next push's commit (bbolt has one
// writer: a commit of deletions of its own held the next push's filing
// behind its sync); flush deletes what no push took, and commits nothing
// when nothing waits.
func TestHandledRecordsLeaveWithTheNextCommit(t *testing.T) {
	s := openTestStore(t, t.TempDir())
	first, _, err := s.record(batch{txnID: "t1", events: []inboxRecord{rawEv("$1"), rawEv("$2")}})
	if err != nil || len(first) != 2 {
		t.Fatalf("record = %d, %v; want 2 new", len(first), err)
	}
	s.forget(first[0].seq, first[1].seq)
	if rest, _ := s.pendingAfter(0); len(rest) != 2 {
		t.Fatalf("forgotten but not yet committed: %d pending, want 2 (a crash now redelivers them)", len(rest))
	}
	next, _, err := s.record(batch{txnID: "t2", events: []inboxRecord{rawEv("$3")}})
	if err != nil || len(next) != 1 {
		t.Fatalf("record = %d, %v; want 1 new", len(next), err)
	}
	rest, _ := s.pendingAfter(0)
	if len(rest) != 1 || rest[0].seq != next[0].seq {
		t.Fatalf("after the next push's commit: %+v pending, want only $3", rest)
	}
	stats := s.db.Stats()
	writes := stats.TxStats.GetWrite()
	if n, err := s.flush(); n != 0 || err != nil {
		t.Fatalf("flush with nothing queued = %d, %v; want 0, nil", n, err)
	}
	after := s.db.Stats()
	if w := after.TxStats.GetWrite(); w != writes {
		t.Fatalf("flush with nothing queued wrote %d pages, want 0", w-writes)
	}
	s.forget(next[0].seq)
	if n, err := s.flush(); n != 1 || err != nil {
		t.Fatalf("flush = %d, %v; want 1, nil", n, err)
	}
	if rest, _ := s.pendingAfter(0); len(rest) != 0 {
		t.Fatalf("after flush: %d pending, want 0", len(rest))
	}
}

// done removes handled records from the inbox at once, as the acknowledger
// does at stop: forget, then flush.
func (s *store) done(seqs ...uint64) error {
	s.forget(seqs...)
	_, err := s.flush()
	return err
}
