package bench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/zooid-dev/zooid/docker/synapse"
)

// The Synapse bench rooms are sent once into a chain of snapshots, one room
// a link, and a second run reuses every link: the same rooms, sent at the
// same time, with their long threads where the labels say.
func TestSnapshotRoomsSendsOnceAndReuses(t *testing.T) {
	synapse.RequireEngine(t)
	ctx := context.Background()
	repo := fmt.Sprintf("zooid-test-bench-snapshot-%d", time.Now().UnixNano())
	synapse.RemoveImagesOnCleanup(t, repo)
	sizes := []int{30, 60}
	open := func() []SnapshotRoom {
		t.Helper()
		s, rooms, have, err := snapshotRooms(ctx, repo, sizes, t.Logf)
		if err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := s.Close(); err != nil {
				t.Error(err)
			}
		}()
		for _, n := range sizes {
			// Replies i%10 == 5 go to the long thread: 3 in 30, 6 in 60.
			p, err := rooms[n].H.ThreadHistory(ctx, rooms[n].C, rooms[n].Long, 100, "")
			if err != nil {
				t.Fatalf("room of %d: %v", n, err)
			}
			if want := 1 + n/10; len(p.Messages) != want || p.Messages[0].Text != "message 0" {
				t.Fatalf("room of %d: long thread has %d messages, first %+v; want %d from message 0", n, len(p.Messages), p.Messages[0], want)
			}
		}
		return have
	}
	first := open()
	if len(first) != 2 || first[0].Events != 30 || first[1].Events != 60 || !strings.HasPrefix(first[1].Image, repo+":") {
		t.Fatalf("first run's rooms: %+v", first)
	}
	again := open()
	for i := range first {
		if !again[i].Built.Equal(first[i].Built) || again[i].Room != first[i].Room {
			t.Fatalf("second run's room %d is %+v, want the first run's %+v (reused)", i, again[i], first[i])
		}
	}
}
