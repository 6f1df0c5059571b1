package matrix

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	bolt "go.etcd.io/bbolt"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/internal/boltdb"
)

// Bucket names. "seen" maps an event id to the sequence number it was recorded under and
// "seenOrder" is the reverse, so the oldest ids can be pruned; likewise for transactions.
var (
	bucketInbox     = []byte("inbox")
	bucketSeen      = []byte("seen")
	bucketSeenOrder = []byte("seen_order")
	bucketTxn       = []byte("txn")
	bucketTxnOrder  = []byte("txn_order")
	bucketSince     = []byte("since")
)

// defaultSeenLimit bounds the dedupe memory. A homeserver only replays recent events (a
// retried transaction, an overlapping /sync), so remembering the last N ids is enough.
const (
	defaultSeenLimit = 100_000
	defaultTxnLimit  = 10_000
)

// inboxRecord is one durably recorded event waiting to be handled.
type inboxRecord struct {
	Room  id.RoomID       `json:"room_id"`
	Event json.RawMessage `json:"event"`
}

// pending is an inbox record with its sequence number.
type pending struct {
	seq uint64
	rec inboxRecord
}

// store is the transport's bbolt state: since tokens, seen event ids, seen transaction ids
// and the inbox of recorded but not yet handled events.
type store struct {
	db        *bolt.DB
	seenLimit int
	txnLimit  int

	// handled are inbox records handled and not yet deleted (forget): the
	// next commit of the inbox deletes them, a push's record or flush. bbolt
	// has one writer: a commit of deletions of its own holds every push's
	// filing behind its sync, so they ride along with the pushes' commits.
	handledMu sync.Mutex
	handled   []uint64
}

func openStore(dir string) (*store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating state dir %s: %w", dir, err)
	}
	path := filepath.Join(dir, "matrix.db")
	db, err := boltdb.Open(path, "matrix state", bucketInbox, bucketSeen, bucketSeenOrder, bucketTxn, bucketTxnOrder, bucketSince)
	if err != nil {
		return nil, err
	}
	return &store{db: db, seenLimit: defaultSeenLimit, txnLimit: defaultTxnLimit}, nil
}

func (s *store) close() error { return s.db.Close() }

func u64(n uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, n)
	return b
}

// rawEvent is the minimal shape needed to dedupe and file an event before it is parsed.
type rawEvent struct {
	ID     id.EventID `json:"event_id"`
	RoomID id.RoomID  `json:"room_id"`
}

// batch is what one push transaction or one /sync response contributes.
type batch struct {
	txnID    string // push transaction id; "" for /sync
	sinceFor id.UserID
	since    string // next_batch to persist with the events, for /sync
	events   []inboxRecord
	// seenOnly marks the events as seen without filing them: history from a first sync,
	// which must not be handled but must not come back as new either.
	seenOnly bool
}

// record durably files a batch in one bbolt transaction: unseen events go to the inbox, the
// transaction id and since token are stored with them, so an acknowledgement or a since
// token never runs ahead of the inbox. It returns the events newly filed, in order, and
// whether the transaction id had been seen before.
func (s *store) record(b batch) (added []pending, replayed bool, err error) {
	handled := s.takeHandled()
	err = s.db.Update(func(tx *bolt.Tx) error {
		added = added[:0]
		replayed = false
		if err := deleteRecords(tx, handled); err != nil {
			return err
		}
		if b.txnID != "" {
			txns := tx.Bucket(bucketTxn)
			if txns.Get([]byte(b.txnID)) != nil {
				// Still run the events through the event-id dedupe below rather than
				// skipping: a homeserver that lost its txn counter reuses ids for new
				// events, and those must not be dropped.
				replayed = true
			} else if err := remember(txns, tx.Bucket(bucketTxnOrder), []byte(b.txnID), s.txnLimit); err != nil {
				return fmt.Errorf("recording txn %s: %w", b.txnID, err)
			}
		}
		inbox := tx.Bucket(bucketInbox)
		seen := tx.Bucket(bucketSeen)
		for _, rec := range b.events {
			var re rawEvent
			if err := json.Unmarshal(rec.Event, &re); err != nil || re.ID == "" {
				// Without an id the event can't be deduped; drop it rather than risk
				// handling it twice. Homeservers always send one.
				continue
			}
			if seen.Get([]byte(re.ID)) != nil {
				continue
			}
			if err := remember(seen, tx.Bucket(bucketSeenOrder), []byte(re.ID), s.seenLimit); err != nil {
				return fmt.Errorf("recording event %s: %w", re.ID, err)
			}
			if b.seenOnly {
				continue
			}
			if rec.Room == "" {
				rec.Room = re.RoomID
			}
			v, err := json.Marshal(rec)
			if err != nil {
				return fmt.Errorf("encoding event %s: %w", re.ID, err)
			}
			seq, err := inbox.NextSequence()
			if err != nil {
				return fmt.Errorf("inbox sequence: %w", err)
			}
			if err := inbox.Put(u64(seq), v); err != nil {
				return fmt.Errorf("filing event %s: %w", re.ID, err)
			}
			added = append(added, pending{seq: seq, rec: rec})
		}
		if b.sinceFor != "" && b.since != "" {
			if err := tx.Bucket(bucketSince).Put([]byte(b.sinceFor), []byte(b.since)); err != nil {
				return fmt.Errorf("storing since token for %s: %w", b.sinceFor, err)
			}
		}
		return nil
	})
	if err != nil {
		s.forget(handled...)
	}
	return added, replayed, err
}

// remember adds key to a bounded set, evicting the oldest entries beyond limit.
func remember(set, order *bolt.Bucket, key []byte, limit int) error {
	seq, err := order.NextSequence()
	if err != nil {
		return err
	}
	if err := set.Put(key, u64(seq)); err != nil {
		return err
	}
	if err := order.Put(u64(seq), key); err != nil {
		return err
	}
	if limit <= 0 {
		return nil
	}
	// Order keys are contiguous (only the oldest are ever deleted), so the first key
	// tells the count without scanning the bucket.
	for {
		k, v := order.Cursor().First()
		if k == nil || seq-binary.BigEndian.Uint64(k)+1 <= uint64(limit) {
			return nil
		}
		old := append([]byte(nil), v...)
		if err := order.Delete(append([]byte(nil), k...)); err != nil {
			return err
		}
		if err := set.Delete(old); err != nil {
			return err
		}
	}
}

// pendingAfter lists inbox records with a sequence number above after, in order.
func (s *store) pendingAfter(after uint64) ([]pending, error) {
	var out []pending
	err := s.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketInbox).Cursor()
		for k, v := c.Seek(u64(after + 1)); k != nil; k, v = c.Next() {
			var rec inboxRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("decoding inbox record %x: %w", k, err)
			}
			out = append(out, pending{seq: binary.BigEndian.Uint64(k), rec: rec})
		}
		return nil
	})
	return out, err
}

// forget queues handled records for deletion from the inbox: the next
// commit of the inbox deletes them (record's, or flush's). Until then a
// crash redelivers them at start, as records whose handler had just
// returned.
func (s *store) forget(seqs ...uint64) {
	if len(seqs) == 0 {
		return
	}
	s.handledMu.Lock()
	s.handled = append(s.handled, seqs...)
	s.handledMu.Unlock()
}

func (s *store) takeHandled() []uint64 {
	s.handledMu.Lock()
	defer s.handledMu.Unlock()
	h := s.handled
	s.handled = nil
	return h
}

// flush deletes the records forget queued that no push's commit has taken,
// in one transaction; n is how many. On failure they stay queued.
func (s *store) flush() (n int, err error) {
	handled := s.takeHandled()
	if len(handled) == 0 {
		return 0, nil
	}
	if err := s.db.Update(func(tx *bolt.Tx) error { return deleteRecords(tx, handled) }); err != nil {
		s.forget(handled...)
		return len(handled), fmt.Errorf("deleting %d handled records from the inbox: %w", len(handled), err)
	}
	return len(handled), nil
}

func deleteRecords(tx *bolt.Tx, seqs []uint64) error {
	b := tx.Bucket(bucketInbox)
	for _, seq := range seqs {
		if err := b.Delete(u64(seq)); err != nil {
			return fmt.Errorf("deleting inbox record %d: %w", seq, err)
		}
	}
	return nil
}

// since returns the persisted /sync token of a user, "" when none.
func (s *store) since(user id.UserID) (string, error) {
	var tok string
	err := s.db.View(func(tx *bolt.Tx) error {
		tok = string(tx.Bucket(bucketSince).Get([]byte(user)))
		return nil
	})
	return tok, err
}

// seen reports whether an event id has been recorded (handled or waiting).
func (s *store) seen(eid id.EventID) (bool, error) {
	var ok bool
	err := s.db.View(func(tx *bolt.Tx) error {
		ok = tx.Bucket(bucketSeen).Get([]byte(eid)) != nil
		return nil
	})
	return ok, err
}
