package e2ee

import (
	"fmt"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"
)

// A late key is reported once, for the first event given up on in its
// session, and past lateKeysKept sessions the oldest is forgotten.
func TestLateKeysAreReportedOnceAndBounded(t *testing.T) {
	var l lateKeys
	room := id.RoomID("!r:test")
	session := func(i int) id.SessionID { return id.SessionID(fmt.Sprintf("s%d", i)) }
	began := time.Now()
	for i := range lateKeysKept + 1 {
		l.gaveUp(room, session(i), id.EventID(fmt.Sprintf("$e%d", i)), began)
	}
	if l.gaveUp(room, session(1), "$later", began.Add(time.Second)) {
		t.Fatal("a session given up on twice was noted anew; want its first event kept")
	}
	if _, ok := l.arrived(room, session(0)); ok {
		t.Fatalf("the oldest of %d sessions is still remembered; want it forgotten past the bound", lateKeysKept+1)
	}
	if g, ok := l.givenUpOn(room, session(1)); !ok || g.event != "$e1" {
		t.Fatalf("session 1 given up on: %+v, %t; want its first event $e1", g, ok)
	}
	g, ok := l.arrived(room, session(1))
	if !ok || g.event != "$e1" || !g.waiting.Equal(began) {
		t.Fatalf("session 1: %+v, %t; want its first event $e1, waiting since %v", g, ok, began)
	}
	if _, ok := l.arrived(room, session(1)); ok {
		t.Fatal("session 1 reported twice; want once")
	}
	if _, ok := l.givenUpOn(room, session(1)); ok {
		t.Fatal("session 1 is still given up on after its key came; want its later events waited for as usual")
	}
	if _, ok := l.arrived(room, session(lateKeysKept)); !ok {
		t.Fatal("the newest session was forgotten")
	}
	if len(l.by) != len(l.order) || len(l.by) != lateKeysKept-2 {
		t.Fatalf("%d remembered, %d in order; want %d each", len(l.by), len(l.order), lateKeysKept-2)
	}
}
