package matrix

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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

	// Synapse holding this appservice's transactions for a retry has the start's ping force
	// it, and pings sent beside that retry can fail on its side several times in a row.
	t.Run("connection dropped four times", func(t *testing.T) {
		e := newEnv(t, true)
		fault := e.hs.InjectFault(fakehs.Fault{Method: http.MethodPost, PathPattern: "/_matrix/client/v1/appservice/*/ping",
			Status: http.StatusBadGateway, Errcode: "M_CONNECTION_FAILED", Count: 4})
		start(t, e.opts, newRecorder().handle)
		if n := fault.Hits(); n != 4 {
			t.Fatalf("the dropped ping fired %d times, want 4", n)
		}
		if n := e.hs.Requests(http.MethodPost, "/_matrix/client/v1/appservice/zooid/ping"); n != 5 {
			t.Fatalf("%d pings, want 5: four dropped and the one that reached the daemon", n)
		}
	})

	t.Run("hs_token refused", func(t *testing.T) {
		// The registration the homeserver holds carries another hs_token: the ping reaches
		// this daemon, which refuses it, and the homeserver answers 502 M_BAD_STATUS with
		// status 403 inside (as Synapse does: fakehs/conformance testPing). That is the
		// daemon's refusal, not an unreachable url.
		logs := &logBuffer{}
		opts := Options{ServerName: "localhost", ASToken: testAS, HSToken: testHS, HSTokenFrom: "hs_token_file /etc/zooid/hs_token",
			ID: "zooid", StateDir: t.TempDir(), Logger: logs.logger(), Listen: freeAddr(t), Agents: []Agent{{Name: "agent-a", UserID: userA}}}
		reg := Registration(opts, "http://"+opts.Listen)
		reg.ServerToken = "hs-token-of-another-install"
		hs := fakehs.New(t, fakehs.WithServerName("localhost"), fakehs.WithAppservice(reg))
		opts.Homeserver = hs.URL()
		err := startErr(t, opts)
		if err == nil || !strings.Contains(err.Error(), "this daemon refused the homeserver's token") ||
			!strings.Contains(err.Error(), "hs_token_file /etc/zooid/hs_token") || strings.Contains(err.Error(), "could not reach") {
			t.Fatalf("start with a registration holding another hs_token: %v", err)
		}
		if n := logs.count("push listener refused a request with a wrong homeserver token"); n != 1 {
			t.Fatalf("%d warnings of the refused token, want 1:\n%s", n, logs)
		}
		if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "daemon_token=\"hs_token_file /etc/zooid/hs_token\"") ||
			strings.Contains(logs.String(), reg.ServerToken) {
			t.Fatalf("the warning names the level, the daemon's token file and never the token:\n%s", logs)
		}
	})

	t.Run("url leads to another server that refuses", func(t *testing.T) {
		// Another appservice at the url refuses the homeserver's token: 403 again, but
		// this daemon refused nothing, so the url is what to fix.
		other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"errcode":"M_FORBIDDEN"}`))
		}))
		t.Cleanup(other.Close)
		err := startErr(t, pingEnv(t, other.URL, fakehs.Profile{}))
		if err == nil || !strings.Contains(err.Error(), "reached something else at the registration's url, which answered HTTP 403") {
			t.Fatalf("start with a registration url to a server that refuses: %v", err)
		}
	})

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

// logBuffer collects a transport's log lines (text handler, debug and up) for
// tests that check what it said.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// count is how many lines contain s.
func (b *logBuffer) count(s string) int {
	n := 0
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// TestRefusedTokensAreLoggedOncePerCause: the homeserver retries a refused transaction for
// as long as its token is wrong; the operator gets one warning per cause (no token, each
// distinct wrong token), never the token.
func TestRefusedTokensAreLoggedOncePerCause(t *testing.T) {
	e := newEnv(t, true)
	logs := &logBuffer{}
	e.opts.Logger = logs.logger()
	tr := start(t, e.opts, newRecorder().handle)
	general, _ := tr.RoomID("#general:localhost")
	body := txnBody(general, "$refused")
	for i, auth := range []string{"Bearer wrong-token-one", "Bearer wrong-token-one", "", "Bearer wrong-token-two", "", "Bearer wrong-token-two"} {
		resp := putTxn(t, tr.PushURL(), fmt.Sprintf("/_matrix/app/v1/transactions/r%d", i), auth, body)
		_ = resp.Body.Close()
	}
	if n := logs.count("refused a request with a wrong homeserver token"); n != 2 {
		t.Errorf("%d warnings of wrong tokens for two distinct ones, want 2:\n%s", n, logs)
	}
	if n := logs.count("refused a request with no homeserver token"); n != 1 {
		t.Errorf("%d warnings of a missing token, want 1:\n%s", n, logs)
	}
	if strings.Contains(logs.String(), "wrong-token-one") || strings.Contains(logs.String(), testHS) {
		t.Errorf("a token reached the log:\n%s", logs)
	}
	if n := tr.refusals.count(); n != 6 {
		t.Errorf("%d refusals counted, want 6", n)
	}
}
