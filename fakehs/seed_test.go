package fakehs

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"
)

func TestImportIsNotPushedAndIsSyncHistory(t *testing.T) {
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(failing.Close)
	s := New(t, WithAppservice(testRegistration(failing.URL)), WithPushBackoff(time.Hour, time.Hour))
	ctx := context.Background()
	alice := newClient(t, s, "alice")
	first := mustSync(t, alice, "", "")
	agent := id.UserID("@agent-1:localhost")
	imp, err := s.ImportRoom(RoomSeed{Creator: alice.UserID, Members: []id.UserID{agent}, Events: []SeedEvent{
		{Sender: agent, Content: map[string]any{"msgtype": "m.text", "body": "old"}, ThreadRoot: -1},
		{Sender: alice.UserID, Content: map[string]any{"msgtype": "m.text", "body": "older reply"}, ThreadRoot: 0},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if n := s.Pending("zooid"); n != 0 {
		t.Fatalf("import queued %d events for the appservice", n)
	}
	resp := mustSync(t, alice, first.NextBatch, "")
	jr := resp.Rooms.Join[imp.RoomID]
	if jr == nil || len(jr.Timeline.Events) == 0 || jr.Timeline.Events[len(jr.Timeline.Events)-1].ID != imp.EventIDs[1] {
		t.Fatalf("imported room not in sync as history: %+v", resp.Rooms.Join)
	}
	if _, err := alice.SendText(ctx, imp.RoomID, "live"); err != nil {
		t.Fatal(err)
	}
	if n := s.Pending("zooid"); n != 1 {
		t.Fatalf("live event queued %d, want 1", n)
	}
	if _, err := s.ImportRoom(RoomSeed{Creator: alice.UserID, Events: []SeedEvent{{Sender: alice.UserID, ThreadRoot: 0}}}); err == nil {
		t.Fatal("self-referencing thread root accepted")
	}
}
