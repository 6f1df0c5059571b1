package matrix

import (
	"net/http"
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
