package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/internal/boltdb"
)

// turnJournal is the durable record of every turn a Matrix event woke, from the
// moment the event is routed until the turn has ended and its posts are sent.
// The transport deletes its inbox record once the turn is queued, so without
// this a daemon killed mid-turn would lose the human's request without a trace.
// A turn that ended stays as a tombstone (turnEnded) for tombstoneTTL: the
// transport deletes a handled inbox record with the inbox's next commit, up to
// 50 ms later (zooid/matrix ackLinger), and a turn can end inside that window;
// a daemon killed then has the trigger redelivered at start, and only the
// tombstone keeps the turn from running again.
//
// bbolt fsyncs each Update before it returns (see zooid/tasks/journal.go), so a
// record written here survives SIGKILL.
type turnJournal struct {
	db *bolt.DB
	// pruned is when done last dropped expired tombstones: a daemon that runs
	// for weeks must not keep every turn it ran.
	mu     sync.Mutex
	pruned time.Time
}

var bucketTurns = []byte("turns")

// bucketNotices holds the once-only notices the daemon has posted (the
// encrypted-room notice of encrypted.go), keyed by what they were about, so
// a restart does not post one again.
var bucketNotices = []byte("notices")

// turnJournalFile is the bbolt file in the state directory.
const turnJournalFile = "turns.db"

// tombstoneTTL is how long a recovered turn's record is kept: the transport
// redelivers an inbox event only at the next start, so a day covers any
// redelivery while bounding the file.
const tombstoneTTL = 24 * time.Hour

// Turn states in the journal.
const (
	turnOpen      = "open"      // queued or running
	turnClosing   = "closing"   // the agent has ended its turn; its closing words are being posted
	turnRecovered = "recovered" // answered with the interrupted notice (or its closing words) after a crash
	turnEnded     = "ended"     // ended with its posts sent (or dropped): a tombstone
)

// pruneEvery is how often done drops the tombstones older than tombstoneTTL.
const pruneEvery = time.Hour

// turnRecord is one journaled turn.
type turnRecord struct {
	Agent   string     `json:"agent"`
	Room    id.RoomID  `json:"room"`
	Thread  id.EventID `json:"thread"`
	TurnID  string     `json:"turn_id"`
	Trigger id.EventID `json:"trigger"`
	State   string     `json:"state"`
	// Attempts counts recoveries begun: it is written before the notice is
	// posted, so a crash during recovery is seen by the next start.
	Attempts int       `json:"attempts,omitempty"`
	At       time.Time `json:"at"`
	// Closing is what the agent said last, journaled before it is posted, and
	// Posted how many messages the turn had posted before it: a start that finds
	// the turn closing posts the words again with the same txn ids (the
	// homeserver returns the event it already has) instead of calling a turn
	// that ended interrupted.
	Closing string `json:"closing,omitempty"`
	Posted  int    `json:"posted,omitempty"`
}

func (r turnRecord) key() []byte {
	return []byte(sessionKey{agent: r.Agent, room: r.Room, thread: r.Thread}.String() + "\x00" + r.TurnID)
}

func openTurnJournal(stateDir string) (*turnJournal, error) {
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating state dir: %w", err)
	}
	path := filepath.Join(stateDir, turnJournalFile)
	db, err := boltdb.Open(path, "turn journal", bucketTurns, bucketNotices)
	if err != nil {
		return nil, err
	}
	return &turnJournal{db: db}, nil
}

// open journals a turn as open unless a record for it exists (an inbox event
// redelivered after a crash): it says whether the turn is new and should run.
func (j *turnJournal) open(r turnRecord) (bool, error) {
	r.State, r.At = turnOpen, time.Now().UTC()
	v, err := json.Marshal(r)
	if err != nil {
		return false, fmt.Errorf("encoding turn %s: %w", r.TurnID, err)
	}
	fresh := false
	err = j.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketTurns)
		if b.Get(r.key()) != nil {
			return nil
		}
		fresh = true
		return b.Put(r.key(), v)
	})
	if err != nil {
		return false, fmt.Errorf("journaling turn %s: %w", r.TurnID, err)
	}
	return fresh, nil
}

// put overwrites a record.
func (j *turnJournal) put(r turnRecord) error {
	v, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encoding turn %s: %w", r.TurnID, err)
	}
	if err := j.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketTurns).Put(r.key(), v) }); err != nil {
		return fmt.Errorf("journaling turn %s: %w", r.TurnID, err)
	}
	return nil
}

// done marks a turn that ended with its posts sent (or that a cleared session
// dropped) as ended, keeping it as a tombstone so that its trigger, should the
// transport redeliver it, opens no turn. It is called twice for most turns
// (when the turn ends, and by the session loop after it), so a turn already
// ended costs a read, not a write and its fsync. Once an hour it also sweeps the
// journal of tombstones older than tombstoneTTL.
func (j *turnJournal) done(key sessionKey, turnID string) error {
	k := []byte(key.String() + "\x00" + turnID)
	var r turnRecord
	var present bool
	if err := j.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketTurns).Get(k)
		if v == nil {
			return nil
		}
		present = true
		return json.Unmarshal(v, &r)
	}); err != nil {
		return fmt.Errorf("acknowledging turn %s: %w", turnID, err)
	}
	if !present || r.State == turnEnded {
		return nil
	}
	now := time.Now().UTC()
	r.State, r.At, r.Closing = turnEnded, now, ""
	v, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("acknowledging turn %s: %w", turnID, err)
	}
	j.mu.Lock()
	prune := now.Sub(j.pruned) >= pruneEvery
	if prune {
		j.pruned = now
	}
	j.mu.Unlock()
	var bad []error
	if err := j.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketTurns)
		if prune {
			var err error
			if _, bad, err = sweep(b, now); err != nil {
				return err
			}
		}
		return b.Put(k, v)
	}); err != nil {
		return fmt.Errorf("acknowledging turn %s: %w", turnID, err)
	}
	if len(bad) > 0 {
		return fmt.Errorf("turn %s acknowledged; dropped undecodable turn records: %v", turnID, bad)
	}
	return nil
}

// sweep deletes from b the tombstones (ended and recovered turns) older than
// tombstoneTTL and the records that do not decode, saying why each of those
// did not, and returns the open and closing turns.
func sweep(b *bolt.Bucket, now time.Time) (unfinished []turnRecord, bad []error, err error) {
	var drop [][]byte
	err = b.ForEach(func(k, v []byte) error {
		var r turnRecord
		if err := json.Unmarshal(v, &r); err != nil {
			bad = append(bad, fmt.Errorf("turn record %q: %w", k, err))
			drop = append(drop, append([]byte(nil), k...))
			return nil
		}
		switch {
		case r.State == turnOpen || r.State == turnClosing:
			unfinished = append(unfinished, r)
		case now.Sub(r.At) > tombstoneTTL:
			drop = append(drop, append([]byte(nil), k...))
		}
		return nil
	})
	if err != nil {
		return nil, bad, err
	}
	for _, k := range drop {
		if err := b.Delete(k); err != nil {
			return nil, bad, err
		}
	}
	return unfinished, bad, nil
}

// unfinished lists open and closing turns a previous run left behind, and
// drops the tombstones older than tombstoneTTL (sweep). A record that does
// not decode is dropped with an error returned alongside: it can't be
// answered, and must not stop the daemon from starting.
func (j *turnJournal) unfinished(now time.Time) ([]turnRecord, error) {
	var out []turnRecord
	var bad []error
	err := j.db.Update(func(tx *bolt.Tx) error {
		var err error
		out, bad, err = sweep(tx.Bucket(bucketTurns), now)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading turn journal: %w", err)
	}
	if len(bad) > 0 {
		return out, fmt.Errorf("dropped undecodable turn records: %v", bad)
	}
	return out, nil
}

// noticed says whether the once-only notice key was posted, by this run or an
// earlier one.
func (j *turnJournal) noticed(key string) (bool, error) {
	var present bool
	if err := j.db.View(func(tx *bolt.Tx) error {
		present = tx.Bucket(bucketNotices).Get([]byte(key)) != nil
		return nil
	}); err != nil {
		return false, fmt.Errorf("reading notice %q: %w", key, err)
	}
	return present, nil
}

// markNoticed records that the once-only notice key was posted, as evID.
func (j *turnJournal) markNoticed(key string, evID id.EventID) error {
	v, err := json.Marshal(struct {
		Event id.EventID `json:"event"`
		At    time.Time  `json:"at"`
	}{evID, time.Now().UTC()})
	if err != nil {
		return fmt.Errorf("encoding notice %q: %w", key, err)
	}
	if err := j.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketNotices).Put([]byte(key), v) }); err != nil {
		return fmt.Errorf("journaling notice %q: %w", key, err)
	}
	return nil
}

func (j *turnJournal) close() error { return j.db.Close() }
