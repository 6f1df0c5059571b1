package tasks

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	bolt "go.etcd.io/bbolt"

	"github.com/zooid-dev/zooid/zooid/internal/boltdb"
)

// journal is the durable record of tasks, one JSON value per attempt id.
//
// Why bbolt: every write is one transaction that bbolt fsyncs before Update returns
// (NoSync stays false), and a transaction is all-or-nothing across a crash because
// bbolt writes new pages then flips the meta page. So once put returns, the record
// survives kill -9 and power loss, and a crash mid-write leaves the previous version.
// That is the property the task life needs: reserve before posting (capacity counts
// uncertain attempts), record the thread id after, record the close before reporting,
// and mark each delivery step after it is done.
type journal struct {
	db *bolt.DB
}

var (
	bucketTasks = []byte("tasks")
	// bucketHandoffs holds zooid_handoff records (ThreadHandoff) beside the
	// tasks: one file, one fsync'ed transaction per step, the same life.
	bucketHandoffs = []byte("handoffs")
)

// journalFile is the bbolt file inside Options.StateDir.
const journalFile = "tasks.db"

func openJournal(dir string) (*journal, error) {
	if dir == "" {
		return nil, fmt.Errorf("opening task journal: state directory is empty")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating task state directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, journalFile)
	db, err := boltdb.Open(path, "task journal", bucketTasks, bucketHandoffs)
	if err != nil {
		return nil, err
	}
	return &journal{db: db}, nil
}

// put writes the tasks in one durable transaction: all or none.
func (j *journal) put(ts ...*Task) error {
	if len(ts) == 0 {
		return nil
	}
	return j.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketTasks)
		for _, t := range ts {
			v, err := json.Marshal(t)
			if err != nil {
				return fmt.Errorf("encoding task %s: %w", t.AttemptID, err)
			}
			if err := b.Put([]byte(t.AttemptID), v); err != nil {
				return fmt.Errorf("writing task %s: %w", t.AttemptID, err)
			}
		}
		return nil
	})
}

// load reads every journaled task. A record that does not decode is an error: the
// journal is never silently misread.
func (j *journal) load() ([]*Task, error) {
	var out []*Task
	err := j.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketTasks).ForEach(func(k, v []byte) error {
			t := new(Task)
			if err := json.Unmarshal(v, t); err != nil {
				return fmt.Errorf("decoding task %q: %w", k, err)
			}
			if t.AttemptID != string(k) {
				return fmt.Errorf("task record %q holds attempt %q", k, t.AttemptID)
			}
			out = append(out, t)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("loading task journal: %w", err)
	}
	return out, nil
}

// putHandoff writes one handoff record in one durable transaction.
func (j *journal) putHandoff(h *ThreadHandoff) error {
	v, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("encoding handoff %s: %w", h.ID, err)
	}
	return j.db.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketHandoffs).Put([]byte(h.ID), v); err != nil {
			return fmt.Errorf("writing handoff %s: %w", h.ID, err)
		}
		return nil
	})
}

// loadHandoffs reads every journaled handoff; like load, a record that does not
// decode is an error.
func (j *journal) loadHandoffs() ([]*ThreadHandoff, error) {
	var out []*ThreadHandoff
	err := j.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketHandoffs).ForEach(func(k, v []byte) error {
			h := new(ThreadHandoff)
			if err := json.Unmarshal(v, h); err != nil {
				return fmt.Errorf("decoding handoff %q: %w", k, err)
			}
			if h.ID != string(k) {
				return fmt.Errorf("handoff record %q holds id %q", k, h.ID)
			}
			out = append(out, h)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("loading handoffs from the task journal: %w", err)
	}
	return out, nil
}

func (j *journal) close() error {
	if err := j.db.Close(); err != nil {
		return fmt.Errorf("closing task journal: %w", err)
	}
	return nil
}
