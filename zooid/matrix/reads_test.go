package matrix

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/zooid-dev/zooid/fakehs"
)

func readVersions(t *testing.T, hs *fakehs.Server, rt *retryReads) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, hs.URL()+"/_matrix/client/versions", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if resp != nil {
		t.Cleanup(func() { resp.Body.Close() })
	}
	return resp, err
}

// A rate-limited read waits what the homeserver asked, each time, then lands.
func TestReadRetryHonoursRetryAfterMS(t *testing.T) {
	hs := fakehs.New(t)
	const asked = 300 * time.Millisecond
	h := hs.InjectFault(fakehs.Fault{Method: "GET", PathPattern: "/_matrix/client/versions", Status: 429, RetryAfter: asked, Count: 2})
	rt := &retryReads{next: http.DefaultTransport, attempts: readAttempts, base: 10 * time.Millisecond, maxWait: maxReadWait}
	resp, err := readVersions(t, hs, rt)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("read after two 429s: %v %v", resp, err)
	}
	log := h.Log()
	if len(log) != 2 {
		t.Fatalf("fault fired %d times, want 2", len(log))
	}
	for i, hit := range log {
		if waited := hit.RetriedAt.Sub(hit.At); hit.RetriedAt.IsZero() || waited < asked {
			t.Errorf("retry %d came %v after the 429, want at least %v", i+1, waited, asked)
		}
	}
}

// A homeserver that keeps failing gets a bounded number of tries, and the
// caller its last answer.
func TestReadRetryGivesUp(t *testing.T) {
	hs := fakehs.New(t)
	h := hs.InjectFault(fakehs.Fault{Method: "GET", PathPattern: "/_matrix/client/versions", Status: 502})
	rt := &retryReads{next: http.DefaultTransport, attempts: readAttempts, base: 10 * time.Millisecond, maxWait: maxReadWait}
	resp, err := readVersions(t, hs, rt)
	if err != nil || resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("got %v %v, want the 502", resp, err)
	}
	if n := h.Hits(); n != readAttempts {
		t.Fatalf("asked %d times, want %d", n, readAttempts)
	}
	hs.ClearFaults()
	d := hs.InjectFault(fakehs.Fault{Method: "GET", PathPattern: "/_matrix/client/versions", Drop: true})
	if _, err := readVersions(t, hs, rt); err == nil {
		t.Fatal("a read of a homeserver that drops every connection succeeded")
	}
	if n := d.Hits(); n != readAttempts {
		t.Fatalf("dropped %d times, want %d", n, readAttempts)
	}
}

// Writes are not retried here: Send owns their txn ids.
func TestReadRetryLeavesWritesAlone(t *testing.T) {
	hs := fakehs.New(t)
	h := hs.InjectFault(fakehs.Fault{Method: "POST", PathPattern: "/_matrix/client/v3/login", Status: 502})
	req, err := http.NewRequest(http.MethodPost, hs.URL()+"/_matrix/client/v3/login", nil)
	if err != nil {
		t.Fatal(err)
	}
	rt := &retryReads{next: http.DefaultTransport, attempts: readAttempts, base: 10 * time.Millisecond, maxWait: maxReadWait}
	resp, err := (&http.Client{Transport: rt}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || h.Hits() != 1 {
		t.Fatalf("POST got %d after %d tries, want the 502 after 1", resp.StatusCode, h.Hits())
	}
}

// A request whose context has no deadline of its own is cut at the
// transport's bound, a read and a write alike, while waiting for the answer
// and while reading its body; one whose context ends sooner keeps its own.
func TestRequestsAreBoundedWithoutClientTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/body" {
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write([]byte(`{"partial":`))
			w.(http.Flusher).Flush()
		}
		select { // headers (or the rest of the body) never come
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) })
	const bound = 200 * time.Millisecond
	rt := &retryReads{next: http.DefaultTransport, attempts: 1, base: 10 * time.Millisecond, maxWait: maxReadWait, timeout: bound}
	cli := &http.Client{Transport: rt}
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		start := time.Now()
		req, err := http.NewRequest(method, srv.URL+"/headers", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := cli.Do(req)
		if resp != nil {
			resp.Body.Close()
		}
		if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took < bound || took > 10*bound {
			t.Fatalf("%s with no answer: %v after %v, want context.DeadlineExceeded after %v", method, err, took, bound)
		}
	}
	start := time.Now()
	resp, err := cli.Get(srv.URL + "/body")
	if err != nil {
		t.Fatalf("headers of a stalled body: %v", err)
	}
	_, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took < bound || took > 10*bound {
		t.Fatalf("reading a stalled body: %v after %v, want context.DeadlineExceeded after %v", err, took, bound)
	}
	// A sooner deadline of the caller's is the one that cuts.
	ctx, cancel := context.WithTimeoutCause(context.Background(), bound/4, errCallerDeadline)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/headers", nil)
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	resp, err = cli.Do(req)
	if resp != nil {
		resp.Body.Close()
	}
	if took := time.Since(start); err == nil || took >= bound || context.Cause(ctx) != errCallerDeadline {
		t.Fatalf("with the caller's deadline of %v: %v after %v", bound/4, err, took)
	}
}

var errCallerDeadline = errors.New("the caller's deadline")

// The daemon's Matrix clients carry no http.Client.Timeout (net/http would
// spend a goroutine and a timer on each request to enforce it through
// retryReads): the bound is retryReads', in the request's context.
func TestClientsBoundRequestsInTheirContext(t *testing.T) {
	e := newEnv(t, false)
	tr, err := New(e.opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	cli := tr.Client(userA)
	rt, ok := cli.Client.Transport.(*retryReads)
	if cli.Client.Timeout != 0 || !ok || rt.timeout != requestTimeout {
		t.Fatalf("client: Timeout %v, transport %T %+v; want no Client.Timeout and retryReads bounding at %v", cli.Client.Timeout, cli.Client.Transport, rt, requestTimeout)
	}
}

// BenchmarkReadBound: one GET through retryReads, bounded as the daemon's
// clients were (http.Client.Timeout, which net/http enforces through an
// unknown transport with a goroutine and a timer per request) and as they are
// (the bound in the request's context). Allocations a request tell them apart
// on any machine; the time is the machine's.
func BenchmarkReadBound(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`{"versions":["v1.11"]}`))
	}))
	b.Cleanup(srv.Close)
	for _, c := range []struct {
		name string
		cli  *http.Client
	}{
		{"client_timeout", &http.Client{Timeout: requestTimeout, Transport: &retryReads{next: http.DefaultTransport, attempts: readAttempts, base: time.Millisecond, maxWait: maxReadWait}}},
		{"context_deadline", &http.Client{Transport: &retryReads{next: http.DefaultTransport, attempts: readAttempts, base: time.Millisecond, maxWait: maxReadWait, timeout: requestTimeout}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, err := c.cli.Get(srv.URL + "/_matrix/client/versions")
				if err != nil {
					b.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
}
