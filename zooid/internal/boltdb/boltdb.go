// Package boltdb opens the daemon's bbolt state files the one way they are all
// opened: owner-only, with a lock timeout, their buckets created.
package boltdb

import (
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// lockTimeout turns a second daemon on the same state directory into an error
// instead of a hang on the file lock.
const lockTimeout = 5 * time.Second

// Open opens (creating it if need be) the bbolt file at path and creates the
// buckets that are missing. what names the file in errors ("opening what path:
// …", "initialising what path: …"); on an error nothing is left open.
func Open(path, what string, buckets ...[]byte) (*bolt.DB, error) {
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: lockTimeout})
	if err != nil {
		return nil, fmt.Errorf("opening %s %s: %w", what, path, err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		for _, b := range buckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return fmt.Errorf("creating bucket %s: %w", b, err)
			}
		}
		return nil
	}); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("initialising %s %s: %w", what, path, err)
	}
	return db, nil
}
