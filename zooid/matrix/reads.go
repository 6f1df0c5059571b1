package matrix

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/zooid-dev/zooid/zooid/internal/mxcall"
)

// retryReads is the HTTP transport of the daemon's Matrix clients. It retries
// reads (GET) the homeserver failed for a reason that passes: a 429 after the
// retry_after_ms the homeserver asked for (or its Retry-After header), a 5xx or
// a connection that broke after a backoff. A read changes nothing, so asking
// again is always safe. Writes are not retried here: Send owns their policy and
// their txn ids. The last failure is returned as the homeserver gave it, so a
// tool call ends with a clear "unavailable, try again" rather than waiting on.
//
// It also bounds every request, reads and writes, to timeout (retries and the
// body's reading included) unless its context ends sooner: see requestTimeout.
type retryReads struct {
	next     http.RoundTripper
	attempts int           // tries in all, the first included
	base     time.Duration // first backoff after a 5xx or a broken connection
	maxWait  time.Duration // the longest single wait, whatever the server asks
	timeout  time.Duration // bound of one request; zero: none
}

// requestTimeout bounds one request of the daemon's Matrix clients, the
// response's body included, when its context has no earlier deadline (tool
// calls, sends and the /sync long poll bound their own, tighter): mautrix's
// default http.Client.Timeout, kept as a backstop. It is a deadline in the
// request's context rather than http.Client.Timeout because net/http enforces
// a Client.Timeout through a transport it does not know (this wrapper) with
// a goroutine and a timer per request.
const requestTimeout = 180 * time.Second

// A read is tried readAttempts times in all, never waiting longer than
// maxReadWait between two tries: a tool call on a homeserver that keeps
// failing ends within about half a minute.
const (
	readAttempts = 4
	maxReadWait  = 10 * time.Second
)

// readErrorBody bounds how much of a failed response is read to find its
// retry_after_ms: Matrix errors are a few dozen bytes.
const readErrorBody = 4 << 10

func (rt *retryReads) RoundTrip(req *http.Request) (*http.Response, error) {
	if rt.timeout <= 0 {
		return rt.roundTrip(req)
	}
	if dl, ok := req.Context().Deadline(); ok && time.Until(dl) <= rt.timeout {
		return rt.roundTrip(req)
	}
	ctx, cancel := context.WithTimeout(req.Context(), rt.timeout)
	resp, err := rt.roundTrip(req.WithContext(ctx))
	if resp == nil {
		cancel()
		return nil, err
	}
	// The deadline holds while the caller reads the body, as
	// Client.Timeout's did; closing the body releases it.
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, err
}

// cancelOnClose is a response body that ends its request's context when closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelOnClose) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}

func (rt *retryReads) roundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodGet {
		return rt.next.RoundTrip(req)
	}
	for attempt := 1; ; attempt++ {
		resp, err := rt.next.RoundTrip(req)
		if attempt >= rt.attempts || req.Context().Err() != nil {
			return resp, err
		}
		var wait time.Duration
		switch {
		case err != nil:
			wait = backoff(rt.base, attempt, rt.maxWait)
		case resp.StatusCode == http.StatusTooManyRequests:
			var body []byte
			body, resp = peekBody(resp)
			wait = min(retryAfter(resp, body, rt.base), rt.maxWait)
		case resp.StatusCode >= 500:
			wait = backoff(rt.base, attempt, rt.maxWait)
		default:
			return resp, nil
		}
		if resp != nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, readErrorBody))
			_ = resp.Body.Close()
		}
		if !mxcall.Sleep(req.Context(), wait) {
			return nil, errors.Join(req.Context().Err(), err)
		}
	}
}

// peekBody reads the start of a failed response and puts it back, so the
// caller that gets this response last still reads the whole error.
func peekBody(resp *http.Response) ([]byte, *http.Response) {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, readErrorBody))
	rest := resp.Body
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), rest), rest}
	return body, resp
}

// retryAfter is how long a 429 asks to wait: retry_after_ms in the body, else
// the Retry-After header in seconds, else def.
func retryAfter(resp *http.Response, body []byte, def time.Duration) time.Duration {
	var e struct {
		RetryAfterMS int64 `json:"retry_after_ms"`
	}
	if json.Unmarshal(body, &e) == nil && e.RetryAfterMS > 0 {
		return time.Duration(e.RetryAfterMS) * time.Millisecond
	}
	if secs, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && secs > 0 {
		return time.Duration(secs) * time.Second
	}
	return def
}
