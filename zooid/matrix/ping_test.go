package matrix

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"

	"github.com/zooid-dev/zooid/fakehs"
)

// startErr runs Start on opts against whatever homeserver opts names and returns its error,
// failing the test if the transport got ready instead.
func startErr(t *testing.T, opts Options) error {
	t.Helper()
	tr, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- tr.Start(ctx, func(context.Context, *event.Event) {}) }()
	select {
	case err := <-errc:
		return err
	case <-tr.Ready():
		t.Fatal("the transport got ready with a registration that does not match")
	}
	return nil
}

// TestStartChecksTheRegistration: in push mode Start pings the appservice through the
// homeserver, and a registration that does not lead back to this daemon fails the start with
// what to fix; nothing is registered or joined before that.
func TestStartChecksTheRegistration(t *testing.T) {
	t.Run("wrong id", func(t *testing.T) {
		e := newEnv(t, true)
		opts := e.opts
		opts.ID = "not-zooid"
		err := startErr(t, opts)
		if err == nil || !strings.Contains(err.Error(), `registration for this as_token is not "not-zooid"`) || !strings.Contains(err.Error(), "M_FORBIDDEN") {
			t.Fatalf("start with the wrong appservice id: %v", err)
		}
		if n := e.hs.Requests(http.MethodPost, "/_matrix/client/v3/register"); n != 0 {
			t.Fatalf("%d registrations before the failed check", n)
		}
	})

	t.Run("url leads elsewhere", func(t *testing.T) {
		// The homeserver reaches some other appservice that answers every ping: the check
		// notices its ping never arrived here.
		other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("{}")) }))
		t.Cleanup(other.Close)
		opts := pingEnv(t, other.URL, fakehs.Profile{})
		err := startErr(t, opts)
		if err == nil || !strings.Contains(err.Error(), "ping went to another listener") {
			t.Fatalf("start with a registration url to another listener: %v", err)
		}
	})

	t.Run("url leads nowhere", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		closed := "http://" + ln.Addr().String()
		ln.Close()
		opts := pingEnv(t, closed, fakehs.Profile{})
		err = startErr(t, opts)
		if err == nil || !strings.Contains(err.Error(), "could not reach this daemon") || !strings.Contains(err.Error(), "M_CONNECTION_FAILED") {
			t.Fatalf("start with a registration url to nothing: %v", err)
		}
	})

	// Synapse answers a ping it sent over a kept-alive connection the peer had closed with
	// 502 M_CONNECTION_FAILED or, when the close came after the request, 504
	// M_CONNECTION_TIMEOUT at once; neither is the registration's fault, so the start pings
	// again and goes on.
	for _, dropped := range []struct {
		status  int
		errcode string
	}{{http.StatusBadGateway, "M_CONNECTION_FAILED"}, {http.StatusGatewayTimeout, "M_CONNECTION_TIMEOUT"}} {
		t.Run("connection dropped: "+dropped.errcode, func(t *testing.T) {
			e := newEnv(t, true)
			fault := e.hs.InjectFault(fakehs.Fault{Method: http.MethodPost, PathPattern: "/_matrix/client/v1/appservice/*/ping",
				Status: dropped.status, Errcode: dropped.errcode, Count: 1})
			start(t, e.opts, newRecorder().handle)
			if n := fault.Hits(); n != 1 {
				t.Fatalf("the dropped ping fired %d times, want 1", n)
			}
			if n := e.hs.Requests(http.MethodPost, "/_matrix/client/v1/appservice/zooid/ping"); n != 2 {
				t.Fatalf("%d pings, want 2: the dropped one and its retry", n)
			}
		})
	}

	t.Run("homeserver without the ping", func(t *testing.T) {
		// Matrix before 1.7: nothing to check with, so the start goes on.
		opts := pingEnv(t, "", fakehs.Profile{NoPing: true})
		start(t, opts, newRecorder().handle)
	})
}

// pingEnv starts fakehs with the agents' registration pushing to url (the push listener's own
// address when url is empty) and returns push-mode options with id "zooid".
func pingEnv(t *testing.T, url string, p fakehs.Profile) Options {
	t.Helper()
	opts := Options{ServerName: "localhost", ASToken: testAS, HSToken: testHS, ID: "zooid", StateDir: t.TempDir(), Logger: testLogger(t),
		Listen: freeAddr(t), Agents: []Agent{{Name: "agent-a", UserID: userA}}}
	if url == "" {
		url = "http://" + opts.Listen
	}
	hs := fakehs.New(t, fakehs.WithServerName("localhost"), fakehs.WithAppservice(Registration(opts, url)), fakehs.WithProfile(p), fakehs.WithLogger(opts.Logger))
	opts.Homeserver = hs.URL()
	return opts
}

// TestDroppedPing: only a connection that failed, or timed out at once, is worth another
// ping; a timeout that took its time is a slow appservice, and a wrong registration stays wrong.
func TestDroppedPing(t *testing.T) {
	for _, c := range []struct {
		err  error
		took time.Duration
		want bool
	}{
		{mautrix.MConnectionFailed, time.Millisecond, true},
		{mautrix.MConnectionTimeout, 100 * time.Millisecond, true},
		{mautrix.MConnectionTimeout, quickTimeout, false},
		{mautrix.MForbidden, time.Millisecond, false},
		{mautrix.MBadStatus, time.Millisecond, false},
		{nil, time.Millisecond, false},
	} {
		if got := droppedPing(c.err, c.took); got != c.want {
			t.Errorf("droppedPing(%v, %v) = %v, want %v", c.err, c.took, got, c.want)
		}
	}
}
