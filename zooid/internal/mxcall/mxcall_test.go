package mxcall

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"maunium.net/go/mautrix"
)

// server answers GET /event with 404 for the first misses requests, then
// with status (200: the event).
func server(t *testing.T, misses int32, status int) (*mautrix.Client, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if n.Add(1) <= misses {
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"errcode":"M_NOT_FOUND","error":"not yet"}`))
			return
		}
		w.WriteHeader(status)
		if status == http.StatusOK {
			_, _ = w.Write([]byte(`{"event_id":"$e","type":"m.room.message","room_id":"!r:x","sender":"@a:x","content":{}}`))
			return
		}
		_, _ = w.Write([]byte(`{"errcode":"M_FORBIDDEN","error":"no"}`))
	}))
	t.Cleanup(srv.Close)
	cli, err := mautrix.NewClient(srv.URL, "@a:x", "token")
	if err != nil {
		t.Fatal(err)
	}
	return cli, &n
}

func TestAwaitEvent(t *testing.T) {
	ctx := context.Background()
	t.Run("readable after misses", func(t *testing.T) {
		cli, n := server(t, 3, http.StatusOK)
		asked := 0
		if err := AwaitEvent(ctx, cli, "!r:x", "$e", func() bool { asked++; return true }); err != nil {
			t.Fatalf("err %v, want nil", err)
		}
		if n.Load() != 4 || asked != 1 {
			t.Fatalf("%d requests, keepWaiting asked %d times; want 4 and once", n.Load(), asked)
		}
	})
	t.Run("gave up", func(t *testing.T) {
		cli, n := server(t, 100, http.StatusOK)
		if err := AwaitEvent(ctx, cli, "!r:x", "$e", func() bool { return false }); !errors.Is(err, ErrGaveUp) || n.Load() != 1 {
			t.Fatalf("err %v after %d requests, want ErrGaveUp after 1", err, n.Load())
		}
	})
	t.Run("another refusal", func(t *testing.T) {
		cli, _ := server(t, 1, http.StatusForbidden)
		err := AwaitEvent(ctx, cli, "!r:x", "$e", nil)
		if Status(err) != http.StatusForbidden || NotFound(err) {
			t.Fatalf("err %v (status %d), want the 403", err, Status(err))
		}
	})
	t.Run("out of time", func(t *testing.T) {
		cli, _ := server(t, 1<<30, http.StatusOK)
		tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		if err := AwaitEvent(tctx, cli, "!r:x", "$e", nil); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v, want the deadline", err)
		}
	})
}

func TestStatus(t *testing.T) {
	resp := &http.Response{StatusCode: http.StatusTooManyRequests}
	if got := Status(mautrix.HTTPError{Response: resp}); got != 429 {
		t.Errorf("value HTTPError: %d", got)
	}
	if got := Status(&mautrix.HTTPError{Response: resp}); got != 429 {
		t.Errorf("pointer HTTPError: %d", got)
	}
	if got := Status(errors.New("connection refused")); got != 0 {
		t.Errorf("no answer: %d, want 0", got)
	}
}
