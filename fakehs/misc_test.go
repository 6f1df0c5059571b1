package fakehs

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

func TestEventFilterMatches(t *testing.T) {
	rm := newRoom("!r:localhost", "@a:localhost")
	root := &evt{ID: "$root", Room: rm, Sender: "@a:localhost", Type: "m.room.message"}
	reply := &evt{ID: "$reply", Room: rm, Sender: "@b:localhost", Type: "m.room.message", RelType: "m.thread", RelTo: "$root"}
	react := &evt{ID: "$react", Room: rm, Sender: "@b:localhost", Type: "m.reaction", RelType: "m.annotation", RelTo: "$root"}
	rm.children["$root"] = []*evt{reply, react}
	cases := []struct {
		filter string
		want   []bool // root, reply, react
	}{
		{`{}`, []bool{true, true, true}},
		{`{"types":["m.room.*"]}`, []bool{true, true, false}},
		{`{"not_types":["m.reaction"]}`, []bool{true, true, false}},
		{`{"senders":["@b:localhost"]}`, []bool{false, true, true}},
		{`{"not_senders":["@b:localhost"]}`, []bool{true, false, false}},
		{`{"org.matrix.msc3874.not_rel_types":["m.thread"]}`, []bool{true, false, true}},
		{`{"org.matrix.msc3874.rel_types":["m.annotation"]}`, []bool{false, false, true}},
		{`{"related_by_rel_types":["m.thread"]}`, []bool{true, false, false}},
		{`{"related_by_senders":["@a:localhost"]}`, []bool{false, false, false}},
	}
	for _, c := range cases {
		f, err := parseEventFilter(c.filter)
		if err != nil {
			t.Fatalf("%s: %v", c.filter, err)
		}
		for i, e := range []*evt{root, reply, react} {
			if got := f.matches(e); got != c.want[i] {
				t.Errorf("%s on %s = %v, want %v", c.filter, e.ID, got, c.want[i])
			}
		}
	}
}

func TestSyncStoredFilterAndRedaction(t *testing.T) {
	s := New(t)
	ctx := context.Background()
	alice := newClient(t, s, "alice")
	room := mustCreateRoom(t, alice, &mautrix.ReqCreateRoom{})
	fres, err := alice.CreateFilter(ctx, &mautrix.Filter{Room: &mautrix.RoomFilter{Timeline: &mautrix.FilterPart{
		Types: []event.Type{event.EventMessage}, Limit: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	ids := sendNumbered(t, alice, room, 3)
	resp := mustSync(t, alice, "", fres.FilterID)
	tl := resp.Rooms.Join[room].Timeline
	if len(tl.Events) != 2 || tl.Events[0].ID != ids[1] || tl.Events[1].ID != ids[2] || !tl.Limited {
		t.Fatalf("filtered initial sync: %+v", tl)
	}
	red, err := alice.RedactEvent(ctx, room, ids[0])
	if err != nil {
		t.Fatal(err)
	}
	ev, err := alice.GetEvent(ctx, room, ids[0])
	if err != nil || len(ev.Content.Raw) != 0 && ev.Content.Raw["body"] != nil {
		t.Fatalf("redacted content still there: %v %v", ev.Content.Raw, err)
	}
	rev, err := alice.GetEvent(ctx, room, red.EventID)
	if err != nil || rev.Redacts != ids[0] {
		t.Fatalf("redaction event %+v %v", rev, err)
	}
}

// Many clients sending and syncing at once; run with -race.
func TestConcurrentClients(t *testing.T) {
	s := New(t)
	ctx := context.Background()
	owner := newClient(t, s, "owner")
	room := mustCreateRoom(t, owner, &mautrix.ReqCreateRoom{Preset: "public_chat"})
	const clients, each = 8, 20
	var wg sync.WaitGroup
	errs := make(chan error, clients*2)
	for i := 0; i < clients; i++ {
		cli := newClient(t, s, fmt.Sprintf("c%d", i))
		mustJoin(t, cli, room)
		wg.Add(2)
		go func() {
			defer wg.Done()
			for j := 0; j < each; j++ {
				if _, err := cli.SendText(ctx, room, "x"); err != nil {
					errs <- err
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			since := ""
			for j := 0; j < 5; j++ {
				resp, err := cli.SyncRequest(ctx, 200, since, "", false, "")
				if err != nil {
					errs <- err
					return
				}
				since = resp.NextBatch
				if _, err := cli.Messages(ctx, room, "", "", mautrix.DirectionBackward, nil, 20); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	n := 0
	seen := map[id.EventID]bool{}
	for _, e := range s.Events(room) {
		if seen[e.ID] {
			t.Fatalf("duplicate event %s", e.ID)
		}
		seen[e.ID] = true
		if e.Type == event.EventMessage {
			n++
		}
	}
	if n != clients*each {
		t.Fatalf("%d messages stored, want %d", n, clients*each)
	}
}

// Close stops a pusher that is stuck retrying against a failing appservice.
func TestCloseStopsPusherAndLongPolls(t *testing.T) {
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	t.Cleanup(failing.Close)
	s, err := Start(WithAppservice(testRegistration(failing.URL)), WithPushBackoff(time.Hour, time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	alice := newClient(t, s, "alice")
	ctx := context.Background()
	if _, err := alice.CreateRoom(ctx, &mautrix.ReqCreateRoom{Invite: []id.UserID{"@agent-x:localhost"}}); err != nil {
		t.Fatal(err)
	}
	first := mustSync(t, alice, "", "")
	pollDone := make(chan struct{})
	go func() {
		defer close(pollDone)
		_, _ = alice.SyncRequest(ctx, 60000, first.NextBatch, "", false, "")
	}()
	time.Sleep(50 * time.Millisecond)
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close hung")
	}
	select {
	case <-pollDone:
	case <-time.After(5 * time.Second):
		t.Fatal("long-poll not ended by Close")
	}
	if s.Pending("zooid") == 0 {
		t.Fatal("the undelivered invite should still be queued")
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestDepartedUserReadsUpToLeave(t *testing.T) {
	s := New(t)
	ctx := context.Background()
	alice, bob := newClient(t, s, "alice"), newClient(t, s, "bob")
	room := mustCreateRoom(t, alice, &mautrix.ReqCreateRoom{Preset: "public_chat"})
	mustJoin(t, bob, room)
	before := sendText(t, alice, room, "while bob is here")
	if _, err := bob.LeaveRoom(ctx, room); err != nil {
		t.Fatal(err)
	}
	after := sendText(t, alice, room, "after bob left")
	msgs, err := bob.Messages(ctx, room, "", "", mautrix.DirectionBackward, &mautrix.FilterPart{Types: []event.Type{event.EventMessage}}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs.Chunk) != 1 || msgs.Chunk[0].ID != before {
		t.Fatalf("departed user sees %d messages", len(msgs.Chunk))
	}
	_, err = bob.GetEvent(ctx, room, after)
	if st, code := httpStatus(err); st != 404 || code != "M_NOT_FOUND" {
		t.Fatalf("event after leave: %d %s", st, code)
	}
	eve := newClient(t, s, "eve")
	_, err = eve.Messages(ctx, room, "", "", mautrix.DirectionBackward, nil, 10)
	if st, code := httpStatus(err); st != 403 || code != "M_FORBIDDEN" {
		t.Fatalf("never-joined user: %d %s", st, code)
	}
	// Synapse hides single events from non-members as not found.
	_, err = eve.GetEvent(ctx, room, before)
	if st, code := httpStatus(err); st != 404 || code != "M_NOT_FOUND" {
		t.Fatalf("never-joined user's event lookup: %d %s", st, code)
	}
}

// A long-poll whose filter excludes the new event keeps waiting until its timeout.
func TestSyncFilteredEventDoesNotEndLongPoll(t *testing.T) {
	s := New(t)
	ctx := context.Background()
	alice := newClient(t, s, "alice")
	room := mustCreateRoom(t, alice, &mautrix.ReqCreateRoom{})
	first := mustSync(t, alice, "", "")
	filter := urlQuery(`{"room":{"timeline":{"types":["m.room.message"]}}}`)
	type result struct {
		body    map[string]any
		elapsed time.Duration
	}
	res := make(chan result, 1)
	go func() {
		start := time.Now()
		req, _ := http.NewRequest(http.MethodGet, s.URL()+"/_matrix/client/v3/sync?timeout=400&since="+first.NextBatch+"&filter="+filter, nil)
		req.Header.Set("Authorization", "Bearer "+alice.AccessToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			res <- result{}
			return
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		res <- result{body, time.Since(start)}
	}()
	time.Sleep(50 * time.Millisecond)
	if _, err := alice.SendStateEvent(ctx, room, event.StateTopic, "", map[string]string{"topic": "t"}); err != nil {
		t.Fatal(err)
	}
	r := <-res
	if r.body == nil {
		t.Fatal("sync failed")
	}
	rooms, _ := r.body["rooms"].(map[string]any)
	if len(rooms) != 0 || r.elapsed < 400*time.Millisecond {
		t.Fatalf("filtered-out event ended the poll after %v: %v", r.elapsed, rooms)
	}
}
