package fakehs

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
)

func TestFaultsCountUserAndRateLimit(t *testing.T) {
	s := New(t)
	alice, bob := newClient(t, s, "alice"), newClient(t, s, "bob")
	room := mustCreateRoom(t, alice, &mautrix.ReqCreateRoom{Preset: "public_chat"})
	mustJoin(t, bob, room)
	h := s.InjectFault(Fault{Method: "PUT", PathPattern: "/_matrix/client/v3/rooms/*/send/*/*", User: alice.UserID,
		Status: 429, RetryAfter: 1500 * time.Millisecond, Count: 2})
	path := "/_matrix/client/v3/rooms/" + string(room) + "/send/m.room.message/"
	for i, txn := range []string{"f1", "f2"} {
		resp := rawDo(t, s, "PUT", alice.AccessToken, path+txn, `{"msgtype":"m.text","body":"x"}`)
		var body struct {
			Errcode    string `json:"errcode"`
			RetryAfter int64  `json:"retry_after_ms"`
		}
		decode(t, resp, 429, &body)
		if body.Errcode != "M_LIMIT_EXCEEDED" || body.RetryAfter != 1500 {
			t.Fatalf("attempt %d: %+v", i, body)
		}
	}
	// bob is not targeted; the third alice request passes.
	decode(t, rawDo(t, s, "PUT", bob.AccessToken, path+"b1", `{"msgtype":"m.text","body":"x"}`), 200, nil)
	decode(t, rawDo(t, s, "PUT", alice.AccessToken, path+"f3", `{"msgtype":"m.text","body":"x"}`), 200, nil)
	if n := h.Hits(); n != 2 {
		t.Fatalf("the fault counted %d hits, want 2 (bob's request and the third are not hits)", n)
	}

	s.InjectFault(Fault{PathPattern: "/_matrix/client/v3/account/whoami", Status: 502, Errcode: "M_UNKNOWN", Count: 1})
	wantError(t, rawGet(t, s, alice.AccessToken, "/_matrix/client/v3/account/whoami"), 502, "M_UNKNOWN")
	decode(t, rawGet(t, s, alice.AccessToken, "/_matrix/client/v3/account/whoami"), 200, nil)
}

func TestFaultDropAndLatency(t *testing.T) {
	s := New(t)
	s.InjectFault(Fault{PathPattern: "/_matrix/client/versions", Drop: true, Count: 1})
	if resp, err := http.Get(s.URL() + "/_matrix/client/versions"); err == nil {
		resp.Body.Close()
		t.Fatal("dropped request got a response")
	}
	s.InjectFault(Fault{PathPattern: "/_matrix/client/versions", Latency: 150 * time.Millisecond, Count: 1})
	start := time.Now()
	resp, err := http.Get(s.URL() + "/_matrix/client/versions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || time.Since(start) < 150*time.Millisecond {
		t.Fatalf("latency fault: %d after %v", resp.StatusCode, time.Since(start))
	}
}

// The fraction is deterministic: the same seed fails the same requests.
func TestFaultFractionIsDeterministic(t *testing.T) {
	pattern := func() []int {
		s := New(t)
		s.InjectFault(Fault{PathPattern: "/_matrix/client/versions", Status: 503, Fraction: 0.5, Seed: 42})
		var out []int
		for i := 0; i < 20; i++ {
			resp, err := http.Get(s.URL() + "/_matrix/client/versions")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			out = append(out, resp.StatusCode)
		}
		s.ClearFaults()
		resp, err := http.Get(s.URL() + "/_matrix/client/versions")
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("after ClearFaults: %v", err)
		}
		resp.Body.Close()
		return out
	}
	a, b := pattern(), pattern()
	failed := 0
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("run differs at %d: %v vs %v", i, a, b)
		}
		if a[i] == 503 {
			failed++
		}
	}
	if failed == 0 || failed == len(a) {
		t.Fatalf("fraction 0.5 failed %d of %d", failed, len(a))
	}
}

func TestFaultWithoutCountOrFractionAppliesUntilCleared(t *testing.T) {
	s := New(t)
	s.InjectFault(Fault{Method: "GET", PathPattern: "/_matrix/client/versions", Status: 500})
	for i := 0; i < 3; i++ {
		wantError(t, rawGet(t, s, "", "/_matrix/client/versions"), 500, "M_UNKNOWN")
	}
	// Another method does not match.
	wantError(t, rawDo(t, s, "POST", "", "/_matrix/client/versions", ""), 405, "M_UNRECOGNIZED")
	s.ClearFaults()
	decode(t, rawGet(t, s, "", "/_matrix/client/versions"), 200, nil)
}

// DropResponse makes the change and loses the answer: the retry with the same
// txn id finds the event already sent.
func TestFaultDropResponseKeepsTheChange(t *testing.T) {
	s := New(t)
	alice := newClient(t, s, "alice")
	room := mustCreateRoom(t, alice, &mautrix.ReqCreateRoom{Preset: "public_chat"})
	path := "/_matrix/client/v3/rooms/" + string(room) + "/send/m.room.message/d1"
	h := s.InjectFault(Fault{Method: "PUT", PathPattern: "/_matrix/client/v3/rooms/*/send/*/*", DropResponse: true, Count: 1})
	req, err := http.NewRequest("PUT", s.URL()+path, strings.NewReader(`{"msgtype":"m.text","body":"once"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+alice.AccessToken)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatal("a dropped response arrived")
	}
	var first, again struct {
		EventID string `json:"event_id"`
	}
	decode(t, rawDo(t, s, "PUT", alice.AccessToken, path, `{"msgtype":"m.text","body":"once"}`), 200, &first)
	decode(t, rawDo(t, s, "PUT", alice.AccessToken, path, `{"msgtype":"m.text","body":"once"}`), 200, &again)
	if first.EventID == "" || first.EventID != again.EventID {
		t.Fatalf("the retries got %q and %q, want the event the dropped request made", first.EventID, again.EventID)
	}
	log := h.Log()
	if len(log) != 1 || log[0].Path != path || log[0].RetriedAt.Before(log[0].At) || log[0].RetriedAt.IsZero() {
		t.Fatalf("fault log %+v, want one hit on %s, retried", log, path)
	}
}

// The log pairs each hit with the next request for the same path, not with
// other paths asked in between.
func TestFaultLogPairsRetries(t *testing.T) {
	s := New(t)
	h := s.InjectFault(Fault{PathPattern: "/_matrix/client/versions", Status: 429, RetryAfter: time.Millisecond, Count: 1})
	wantError(t, rawGet(t, s, "", "/_matrix/client/versions"), 429, "M_LIMIT_EXCEEDED")
	decode(t, rawDo(t, s, "POST", "", "/_matrix/client/v3/login", `{}`), 400, nil)
	if log := h.Log(); len(log) != 1 || !log[0].RetriedAt.IsZero() {
		t.Fatalf("after another path: %+v, want not retried", log)
	}
	decode(t, rawGet(t, s, "", "/_matrix/client/versions"), 200, nil)
	if log := h.Log(); len(log) != 1 || log[0].RetriedAt.IsZero() {
		t.Fatalf("after the retry: %+v, want retried", log)
	}
}

// A held request is never answered: the client gives up by its own deadline,
// and with HoldResponse the change was made all the same.
func TestFaultHoldNeverAnswers(t *testing.T) {
	s := New(t)
	alice := newClient(t, s, "alice")
	room := mustCreateRoom(t, alice, &mautrix.ReqCreateRoom{Preset: "public_chat"})
	path := "/_matrix/client/v3/rooms/" + string(room) + "/send/m.room.message/h1"
	held := s.InjectFault(Fault{Method: "GET", PathPattern: "/_matrix/client/versions", Hold: true, Count: 1})
	heldResp := s.InjectFault(Fault{Method: "PUT", PathPattern: "/_matrix/client/v3/rooms/*/send/*/*", HoldResponse: true, Count: 1})
	do := func(method, p, body string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, method, s.URL()+p, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+alice.AccessToken)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			return fmt.Errorf("%s %s answered %d", method, p, resp.StatusCode)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("%s %s: %v, want the client's deadline", method, p, err)
		}
		return nil
	}
	if err := do("GET", "/_matrix/client/versions", ""); err != nil {
		t.Fatal(err)
	}
	if err := do("PUT", path, `{"msgtype":"m.text","body":"once"}`); err != nil {
		t.Fatal(err)
	}
	if held.Hits() != 1 || heldResp.Hits() != 1 {
		t.Fatalf("hits %d and %d, want 1 each", held.Hits(), heldResp.Hits())
	}
	decode(t, rawGet(t, s, "", "/_matrix/client/versions"), 200, nil)
	var first, again struct {
		EventID string `json:"event_id"`
	}
	decode(t, rawDo(t, s, "PUT", alice.AccessToken, path, `{"msgtype":"m.text","body":"once"}`), 200, &first)
	decode(t, rawDo(t, s, "PUT", alice.AccessToken, "/_matrix/client/v3/rooms/"+string(room)+"/send/m.room.message/h2", `{"msgtype":"m.text","body":"twice"}`), 200, &again)
	if first.EventID == "" || first.EventID == again.EventID {
		t.Fatalf("the retry got %q (another txn %q)", first.EventID, again.EventID)
	}
	msgs, err := alice.Messages(context.Background(), room, "", "", mautrix.DirectionBackward, nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, ev := range msgs.Chunk {
		if ev.ID.String() == first.EventID {
			n++
		}
		if b, _ := ev.Content.Raw["body"].(string); b == "once" && ev.ID.String() != first.EventID {
			t.Fatalf("a second %q event %s", b, ev.ID)
		}
	}
	if n != 1 {
		t.Fatalf("the held request's event is in the room %d times, want once", n)
	}
}

// Closing the server ends a request it holds.
func TestFaultHoldEndsAtClose(t *testing.T) {
	s := New(t)
	h := s.InjectFault(Fault{PathPattern: "/_matrix/client/versions", Hold: true})
	errc := make(chan error, 1)
	go func() {
		resp, err := http.Get(s.URL() + "/_matrix/client/versions")
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	for h.Hits() == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err == nil {
		t.Fatal("a held request was answered")
	}
}
