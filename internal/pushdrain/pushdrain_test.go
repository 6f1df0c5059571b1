package pushdrain

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"

	"maunium.net/go/mautrix/id"
)

func start(t *testing.T, token string) (*Drain, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := Start(ln, token)
	t.Cleanup(func() { _ = d.Stop() })
	return d, "http://" + ln.Addr().String()
}

func push(t *testing.T, url, query, event string) int {
	t.Helper()
	return put(t, url+"/_matrix/app/v1/transactions/1"+query, `{"events":[{"event_id":"`+event+`"}]}`).StatusCode
}

// put sends body as a transaction and returns the answer, its body read.
func put(t *testing.T, url, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func TestTokenCheckedOnlyWhenGiven(t *testing.T) {
	d, url := start(t, "hs")
	if code := push(t, url, "", "$refused"); code != http.StatusForbidden {
		t.Fatalf("push without the token: %d, want 403", code)
	}
	if code := push(t, url, "?access_token=hs", "$taken"); code != http.StatusOK {
		t.Fatalf("push with the token: %d, want 200", code)
	}
	if _, err := d.Wait(context.Background(), "$taken"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if missing, err := d.Wait(ctx, "$taken", "$refused"); missing != "$refused" || !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after a refused push: %s %v, want $refused context.Canceled", missing, err)
	}

	open, url := start(t, "")
	if code := push(t, url, "", "$any"); code != http.StatusOK {
		t.Fatalf("push to a drain without a token: %d, want 200", code)
	}
	if _, err := open.Wait(context.Background(), id.EventID("$any")); err != nil {
		t.Fatal(err)
	}
}

// TestEveryAnswerClosesItsConnection: a homeserver never keeps a connection
// to the drain, so none is left to go stale when a daemon takes the port over.
// Fails with keep-alives on (the client keeps the connection).
func TestEveryAnswerClosesItsConnection(t *testing.T) {
	_, url := start(t, "")
	for range 2 {
		resp := put(t, url+"/_matrix/app/v1/transactions/1", `{"events":[]}`)
		if resp.StatusCode != http.StatusOK || !resp.Close {
			t.Fatalf("push answered %d, Connection: %q; want 200 and the connection closed", resp.StatusCode, resp.Header.Get("Connection"))
		}
	}
}
