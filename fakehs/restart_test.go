package fakehs

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"
)

// Stopped, the server reads each request and closes it unanswered, on the
// same address; restarted, it serves there again with all its state.
func TestStopRestartKeepsStateAndAddress(t *testing.T) {
	s := New(t)
	alice := newClient(t, s, "alice")
	room := mustCreateRoom(t, alice, &mautrix.ReqCreateRoom{Preset: "public_chat"})
	url := s.URL()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err == nil {
		t.Fatal("a second Stop succeeded")
	}
	req, _ := http.NewRequest("GET", url+"/_matrix/client/v3/account/whoami", nil)
	req.Header.Set("Authorization", "Bearer "+alice.AccessToken)
	// A new connection: one kept alive from before the stop would be closed
	// under the request before the stopped server saw it.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	if resp, err := client.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("a stopped server answered %s", resp.Status)
	}
	got := s.TurnedAwayRequests()
	if len(got) != 1 || got[0].Method != "GET" || got[0].Path != "/_matrix/client/v3/account/whoami" || got[0].User != alice.UserID {
		t.Fatalf("turned away %+v, want alice's one GET whoami", got)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err == nil {
		t.Fatal("Restart of a serving server succeeded")
	}
	if s.URL() != url {
		t.Fatalf("restarted on %s, want %s", s.URL(), url)
	}
	// A connection alice's client kept alive from before the stop (mautrix's
	// client shares http.DefaultTransport with rawDo) was closed by it: a PUT
	// is not retried on a reused connection that fails, so it must not get one.
	http.DefaultClient.CloseIdleConnections()
	// The token, the room and the txn ids seen are all still there.
	path := "/_matrix/client/v3/rooms/" + string(room) + "/send/m.room.message/r1"
	var first, again struct {
		EventID id.EventID `json:"event_id"`
	}
	decode(t, rawDo(t, s, "PUT", alice.AccessToken, path, `{"msgtype":"m.text","body":"after"}`), 200, &first)
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	// A client's connection kept alive from before the stop is closed; a
	// fresh one is served.
	http.DefaultClient.CloseIdleConnections()
	decode(t, rawDo(t, s, "PUT", alice.AccessToken, path, `{"msgtype":"m.text","body":"after"}`), 200, &again)
	if first.EventID == "" || again.EventID != first.EventID {
		t.Fatalf("the same txn after a restart made %s, want %s", again.EventID, first.EventID)
	}
	if n := len(s.TurnedAwayRequests()); n != 1 {
		t.Fatalf("turned away %d requests in all, want 1", n)
	}
}

// StopUntil turns away exactly n matching requests, then serves again by
// itself: the client retrying the same send gets through on its next try.
func TestStopUntilTurnsAwayExactlyN(t *testing.T) {
	s := New(t)
	alice := newClient(t, s, "alice")
	bob := newClient(t, s, "bob")
	room := mustCreateRoom(t, alice, &mautrix.ReqCreateRoom{Preset: "public_chat"})
	if err := s.StopUntil(Fault{Method: "PUT", PathPattern: "/_matrix/client/v3/rooms/*/send/*/*", User: alice.UserID}, 2); err != nil {
		t.Fatal(err)
	}
	path := "/_matrix/client/v3/rooms/" + string(room) + "/send/m.room.message/t1"
	// A new connection each try: one kept alive from before the stop would
	// be closed under the request before the stopped server saw it.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	try := func(token string) (*http.Response, error) {
		req, _ := http.NewRequest("PUT", s.URL()+path, strings.NewReader(`{"msgtype":"m.text","body":"x"}`))
		req.Header.Set("Authorization", "Bearer "+token)
		return client.Do(req)
	}
	// bob's send does not count toward alice's two.
	if resp, err := try(bob.AccessToken); err == nil {
		resp.Body.Close()
		t.Fatal("a stopped server answered bob")
	}
	for i := range 2 {
		if resp, err := try(alice.AccessToken); err == nil {
			resp.Body.Close()
			t.Fatalf("try %d answered %s while stopped", i+1, resp.Status)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.AwaitRestart(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err := try(alice.AccessToken)
	if err != nil {
		t.Fatalf("after the outage: %v", err)
	}
	decode(t, resp, 200, nil)
	var users []id.UserID
	for _, r := range s.TurnedAwayRequests() {
		if r.Path != path || r.Method != "PUT" {
			t.Fatalf("turned away %+v, want only PUT %s", r, path)
		}
		users = append(users, r.User)
	}
	if want := []id.UserID{bob.UserID, alice.UserID, alice.UserID}; !slices.Equal(users, want) {
		t.Fatalf("turned away requests of %v, want %v: %+v", users, want, s.TurnedAwayRequests())
	}
}

// Closing a stopped server ends its outage and returns; so does closing one
// whose connections are left open unused.
func TestCloseWhileStopped(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	done := make(chan error, 1)
	go func() { done <- s.Close() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close of a stopped server with an idle connection did not return")
	}
	if err := s.Restart(); err == nil {
		t.Fatal("a closed server restarted")
	}
	if err := s.AwaitRestart(context.Background()); err != nil {
		t.Fatalf("AwaitRestart of a closed server: %v", err)
	}
}

// Repush sends delivered transactions again with their own txn ids, from the
// one carrying the event named on, before anything new; pushes wait while the
// server is stopped.
func TestRepushResendsWithTheirTxnIDs(t *testing.T) {
	log := &txnLog{}
	mux := http.NewServeMux()
	mux.Handle("PUT /_matrix/app/v1/transactions/{txn}", log.handler(t))
	as := httptest.NewServer(mux)
	t.Cleanup(as.Close)
	s := New(t, WithAppservice(testRegistration(as.URL)), WithPushBackoff(10*time.Millisecond, 50*time.Millisecond))
	alice := newClient(t, s, "alice")
	room := mustCreateRoom(t, alice, &mautrix.ReqCreateRoom{Preset: "public_chat"})
	bot := asClient(t, s, "@agent-ci:localhost")
	if _, _, err := bot.Register(context.Background(), &mautrix.ReqRegister[any]{Username: "agent-ci", Type: mautrix.AuthTypeAppservice, InhibitLogin: true}); err != nil {
		t.Fatal(err)
	}
	mustJoin(t, bot, room)
	waitPushed := func(n int) []txnAttempt {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			got := log.snapshot()
			if len(got) >= n && s.Pending("zooid") == 0 {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("pushed %+v, want %d transactions", got, n)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitPushed(1)
	e1 := sendText(t, alice, room, "one")
	before := waitPushed(2)
	e2 := sendText(t, alice, room, "two")
	pushed := waitPushed(3)
	if !slices.Equal(pushed[1].Events, []id.EventID{e1}) || !slices.Equal(pushed[2].Events, []id.EventID{e2}) {
		t.Fatalf("pushed %+v, want %s then %s alone", pushed, e1, e2)
	}
	if _, err := s.Repush("zooid", "$nope"); err == nil {
		t.Fatal("Repush from an event never pushed succeeded")
	}
	if _, err := s.Repush("nope", e1); err == nil {
		t.Fatal("Repush of an unknown appservice succeeded")
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	n, err := s.Repush("zooid", e1)
	if err != nil || n != 2 {
		t.Fatalf("Repush = %d, %v; want the 2 transactions from %s", n, err, e1)
	}
	if got := s.Pending("zooid"); got != 2 {
		t.Fatalf("pending %d events while stopped, want the 2 re-pushed", got)
	}
	// The barrier: the pusher, woken by Repush, has looked and held back.
	deadline := time.Now().Add(5 * time.Second)
	for s.appservice("zooid").heldBackCount() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the pusher never looked at the re-push while stopped")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := len(log.snapshot()); got != 3 || s.Repushed("zooid") != 0 {
		t.Fatalf("a stopped server pushed: %d transactions, %d re-pushed", got, s.Repushed("zooid"))
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	e3 := sendText(t, alice, room, "three")
	all := waitPushed(6)
	again := all[3:5]
	if again[0].TxnID != pushed[1].TxnID || again[1].TxnID != pushed[2].TxnID ||
		!slices.Equal(again[0].Events, pushed[1].Events) || !slices.Equal(again[1].Events, pushed[2].Events) {
		t.Fatalf("re-pushed %+v, want %+v", again, pushed[1:3])
	}
	if all[5].TxnID == before[1].TxnID || all[5].TxnID == pushed[2].TxnID || !slices.Equal(all[5].Events, []id.EventID{e3}) {
		t.Fatalf("after the re-push %+v, want %s alone in a new transaction", all[5], e3)
	}
	if got := s.Repushed("zooid"); got != 2 {
		t.Fatalf("Repushed = %d, want 2", got)
	}
}
