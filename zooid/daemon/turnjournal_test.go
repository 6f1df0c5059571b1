package daemon

import (
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"maunium.net/go/mautrix/id"
)

func TestTurnJournalKeepsOpenTurnsUntilDone(t *testing.T) {
	dir := t.TempDir()
	j, err := openTurnJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	key := sessionKey{agent: "agent-a", room: "!r:hs", thread: "$root"}
	rec := turnRecord{Agent: key.agent, Room: key.room, Thread: key.thread, TurnID: "$trigger", Trigger: "$trigger"}
	if fresh, err := j.open(rec); err != nil || !fresh {
		t.Fatalf("open = %v, %v; want a fresh turn", fresh, err)
	}
	if fresh, err := j.open(rec); err != nil || fresh {
		t.Fatalf("open again (a redelivered trigger) = %v, %v; want not fresh", fresh, err)
	}
	other := rec
	other.TurnID, other.Trigger = "$done", "$done"
	if _, err := j.open(other); err != nil {
		t.Fatal(err)
	}
	if err := j.done(key, "$done"); err != nil {
		t.Fatal(err)
	}
	// The transport deletes a handled trigger's inbox record up to 50 ms after
	// it was handled, and the turn can end before: killed then, the daemon
	// gets the trigger again at start.
	if fresh, err := j.open(other); err != nil || fresh {
		t.Fatalf("open of an ended turn's trigger = %v, %v; want not fresh (a redelivered trigger runs nothing)", fresh, err)
	}
	// A crash: the file is reopened by the next start.
	if err := j.close(); err != nil {
		t.Fatal(err)
	}
	if j, err = openTurnJournal(dir); err != nil {
		t.Fatal(err)
	}
	defer j.close()
	open, err := j.unfinished(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(open) != 1 || open[0].TurnID != "$trigger" {
		t.Fatalf("unfinished = %+v, want only $trigger", open)
	}

	// Recovered: no longer unfinished, yet still blocks a redelivered trigger
	// until its tombstone expires.
	r := open[0]
	r.State, r.At = turnRecovered, time.Now().UTC()
	if err := j.put(r); err != nil {
		t.Fatal(err)
	}
	if open, _ := j.unfinished(time.Now()); len(open) != 0 {
		t.Fatalf("unfinished after recovery = %+v, want none", open)
	}
	if fresh, _ := j.open(rec); fresh {
		t.Fatal("a recovered turn's trigger opened a fresh turn")
	}
	if _, err := j.unfinished(time.Now().Add(tombstoneTTL + time.Hour)); err != nil {
		t.Fatal(err)
	}
	if fresh, _ := j.open(rec); !fresh {
		t.Fatal("an expired tombstone still blocks the trigger")
	}
	if fresh, _ := j.open(other); !fresh {
		t.Fatal("an ended turn's expired tombstone still blocks its trigger")
	}
}

// TestEndedTurnsArePrunedWhileRunning: done drops tombstones older than
// tombstoneTTL at most once per pruneEvery, so a daemon that never restarts
// does not keep every turn it ran.
func TestEndedTurnsArePrunedWhileRunning(t *testing.T) {
	j, err := openTurnJournal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	key := sessionKey{agent: "agent-a", room: "!r:hs", thread: "$root"}
	old := turnRecord{Agent: key.agent, Room: key.room, Thread: key.thread, TurnID: "$old", Trigger: "$old", State: turnEnded, At: time.Now().UTC().Add(-tombstoneTTL - time.Minute)}
	if err := j.put(old); err != nil {
		t.Fatal(err)
	}
	count := func() int {
		n := 0
		_ = j.db.View(func(tx *bolt.Tx) error { n = tx.Bucket(bucketTurns).Stats().KeyN; return nil })
		return n
	}
	for i, turn := range []string{"$a", "$b"} {
		if _, err := j.open(turnRecord{Agent: key.agent, Room: key.room, Thread: key.thread, TurnID: turn, Trigger: id.EventID(turn)}); err != nil {
			t.Fatal(err)
		}
		if err := j.done(key, turn); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if n := count(); n != 1 {
				t.Fatalf("after the first done: %d records, want 1 (the expired tombstone dropped, $a kept)", n)
			}
			// Within the hour nothing is scanned again.
			if err := j.put(old); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := count(); n != 3 {
		t.Fatalf("after the second done within the hour: %d records, want 3 (no second scan)", n)
	}
}

// A turn caught while its closing words were posted is unfinished, words
// included, until recovery marks it.
func TestTurnJournalKeepsClosingWords(t *testing.T) {
	j, err := openTurnJournal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer j.close()
	rec := turnRecord{Agent: "agent-a", Room: "!r:hs", Thread: "$root", TurnID: "$t", Trigger: "$t"}
	if _, err := j.open(rec); err != nil {
		t.Fatal(err)
	}
	rec.State, rec.Closing, rec.Posted = turnClosing, "svc-a is up", 2
	if err := j.put(rec); err != nil {
		t.Fatal(err)
	}
	open, err := j.unfinished(time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(open) != 1 || open[0].State != turnClosing || open[0].Closing != "svc-a is up" || open[0].Posted != 2 {
		t.Fatalf("unfinished = %+v, want the closing turn with its words and count", open)
	}
}

// A once-only notice recorded by one start is known to the next, per agent and room, and is
// no turn: recovery does not see it.
func TestTurnJournalKeepsNoticesAcrossAStart(t *testing.T) {
	dir := t.TempDir()
	j, err := openTurnJournal(dir)
	if err != nil {
		t.Fatal(err)
	}
	key := encryptedNoticeKey("agent-a", "!enc:hs")
	if done, err := j.noticed(key); err != nil || done {
		t.Fatalf("noticed before any post = %v, %v; want false", done, err)
	}
	if err := j.markNoticed(key, "$notice"); err != nil {
		t.Fatal(err)
	}
	if err := j.close(); err != nil {
		t.Fatal(err)
	}
	if j, err = openTurnJournal(dir); err != nil {
		t.Fatal(err)
	}
	defer j.close()
	for _, c := range []struct {
		key  string
		want bool
	}{
		{key, true},
		{encryptedNoticeKey("agent-b", "!enc:hs"), false},
		{encryptedNoticeKey("agent-a", "!other:hs"), false},
	} {
		if done, err := j.noticed(c.key); err != nil || done != c.want {
			t.Errorf("noticed(%q) after a restart = %v, %v; want %v", c.key, done, err, c.want)
		}
	}
	if open, err := j.unfinished(time.Now()); err != nil || len(open) != 0 {
		t.Errorf("unfinished turns = %v, %v; want none (a notice is no turn)", open, err)
	}
}
