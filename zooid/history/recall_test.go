package history_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/fakehs"
	"github.com/zooid-dev/zooid/zooid/history"
)

// tailRoom is a thread (root 0, three replies) among other messages, a second
// thread and reactions, so a reader that takes anything but the thread's own
// replies shows it.
func tailRoom() []fakehs.SeedEvent {
	return []fakehs.SeedEvent{
		text("@agent-a is svc-a up?"), // 0
		text("unrelated"),             // 1
		reply("r1", 0),                // 2
		reply("other thread", 1),      // 3
		reaction(2),                   // 4
		reply("r2", 0),                // 5
		text("more chatter"),          // 6
		reply("r3", 0),                // 7
		reaction(7),                   // 8
	}
}

func eventBody(e *event.Event) string {
	if err := e.Content.ParseRaw(e.Type); err != nil && !errors.Is(err, event.ErrContentAlreadyParsed) {
		return "(unparsed: " + err.Error() + ")"
	}
	return e.Content.AsMessage().Body
}

func tailBodies(t *testing.T, root *event.Event, replies []*event.Event) string {
	t.Helper()
	if root == nil {
		t.Fatal("ThreadTail returned no root")
	}
	return fmt.Sprint(eventBody(root), " ", bodies(replies, eventBody))
}

// The daemon recalls a thread's routing memory from its root and newest
// replies: two requests on a server with /relations, however large the room.
func TestThreadTailReadsTheRootAndNewestReplies(t *testing.T) {
	r := newRoom(t, fakehs.Profile{}, tailRoom())
	ctx := context.Background()
	root, replies, err := history.ThreadTail(ctx, asCli(r.hs, agent), r.c.Room, r.ids[0], 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tailBodies(t, root, replies), "@agent-a is svc-a up? [r3 r2 r1]"; got != want {
		t.Fatalf("ThreadTail = %q, want %q", got, want)
	}
	if ev, rel, msgs := r.hs.Requests("GET", "/_matrix/client/v3/rooms/*/event/*"),
		r.hs.Requests("GET", "/_matrix/client/v1/rooms/*/relations/*/*"),
		r.hs.Requests("GET", "/_matrix/client/v3/rooms/*/messages"); ev != 1 || rel != 1 || msgs != 0 {
		t.Fatalf("requests: %d /event, %d /relations, %d /messages; want 1, 1, 0", ev, rel, msgs)
	}
	_, replies, err = history.ThreadTail(ctx, asCli(r.hs, agent), r.c.Room, r.ids[0], 2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(bodies(replies, eventBody)); got != "[r3 r2]" {
		t.Fatalf("ThreadTail with n=2: %s, want [r3 r2]", got)
	}
}

// On a server that ignores relation filters (/relations answers reactions and
// every other relation too) only the thread's replies come back.
func TestThreadTailWhereRelationFiltersAreIgnored(t *testing.T) {
	r := newRoom(t, fakehs.Degraded, tailRoom())
	root, replies, err := history.ThreadTail(context.Background(), asCli(r.hs, agent), r.c.Room, r.ids[0], 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tailBodies(t, root, replies), "@agent-a is svc-a up? [r3 r2 r1]"; got != want {
		t.Fatalf("ThreadTail = %q, want %q", got, want)
	}
}

// Without /relations the room is scanned back to the root, at most
// TailScanBound events: a thread whose replies are all further back than
// that reads as a root without replies, not as an error.
func TestThreadTailWithoutRelations(t *testing.T) {
	events := tailRoom()
	for i := range history.TailScanBound {
		events = append(events, text(fmt.Sprint("filler ", i)))
	}
	events = append(events, text("@agent-a late question"), reply("late answer", len(events)))
	r := newRoom(t, fakehs.Profile{}, events)
	fault := r.hs.InjectFault(fakehs.Fault{Method: "GET", PathPattern: "/_matrix/client/v1/rooms/*/relations/*/*", Status: http.StatusNotFound, Errcode: "M_UNRECOGNIZED"})
	ctx := context.Background()
	late := r.ids[len(r.ids)-2]
	root, replies, err := history.ThreadTail(ctx, asCli(r.hs, agent), r.c.Room, late, 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tailBodies(t, root, replies), "@agent-a late question [late answer]"; got != want {
		t.Fatalf("ThreadTail of the late thread = %q, want %q", got, want)
	}
	root, replies, err = history.ThreadTail(ctx, asCli(r.hs, agent), r.c.Room, r.ids[0], 10, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tailBodies(t, root, replies), "@agent-a is svc-a up? []"; got != want {
		t.Fatalf("ThreadTail of the thread behind the bound = %q, want %q", got, want)
	}
	if fault.Hits() != 2 {
		t.Fatalf("the /relations fault fired %d times, want 2", fault.Hits())
	}
}

// A root the server refuses (gone, or unreadable to this reader) has no
// thread to recall: nothing, and no error to log on every reply.
func TestThreadTailOfAnUnknownRoot(t *testing.T) {
	r := newRoom(t, fakehs.Profile{}, tailRoom())
	root, replies, err := history.ThreadTail(context.Background(), asCli(r.hs, agent), r.c.Room, id.EventID("$nope"), 10, nil)
	if err != nil || root != nil || len(replies) != 0 {
		t.Fatalf("ThreadTail of an unknown root = %v, %d replies, %v; want nothing", root, len(replies), err)
	}
	if n := r.hs.Requests("GET", "/_matrix/client/v3/rooms/*/event/*"); n != 1 {
		t.Fatalf("the root was asked for %d times, want once", n)
	}
}
