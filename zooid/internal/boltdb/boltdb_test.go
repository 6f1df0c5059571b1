package boltdb

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"
)

func TestOpenCreatesBuckets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	db, err := Open(path, "test state", []byte("a"), []byte("b"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.View(func(tx *bolt.Tx) error {
		for _, b := range []string{"a", "b"} {
			if tx.Bucket([]byte(b)) == nil {
				return errors.New("bucket " + b + " missing")
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// A second open of a locked file fails after the lock timeout instead of
// hanging, and names the file.
func TestSecondOpenTimesOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.db")
	db, err := Open(path, "test state")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	_, err = Open(path, "test state")
	if !errors.Is(err, bolt.ErrTimeout) || !strings.HasPrefix(err.Error(), "opening test state "+path+": ") {
		t.Fatalf("second open: %v, want bolt.ErrTimeout prefixed with the file", err)
	}
}
