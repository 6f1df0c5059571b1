package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"
)

// Client is a minimal Client-Server API client over a base URL, built so that tests can assert
// on raw status codes and bodies, which mautrix's client hides behind typed errors.
type Client struct {
	BaseURL     string
	UserID      id.UserID
	DeviceID    id.DeviceID
	AccessToken string
	// AsUserID, when set, is sent as ?user_id= so that an appservice token acts as that user.
	AsUserID id.UserID
	// AsDeviceID, when set with AsUserID, is sent as ?org.matrix.msc3202.device_id= so that
	// the appservice acts as that device of the user (OnDevice).
	AsDeviceID id.DeviceID
	http       *http.Client
}

// Response is one finished HTTP exchange, kept whole so failures can print it.
type Response struct {
	Method     string
	URL        string
	ReqBody    []byte
	StatusCode int
	Body       []byte
}

// JSON parses the response body.
func (r *Response) JSON() gjson.Result { return gjson.ParseBytes(r.Body) }

// String renders the exchange for failure messages: the exact request and response.
func (r *Response) String() string {
	req := ""
	if len(r.ReqBody) > 0 {
		req = " " + truncate(string(r.ReqBody), 600)
	}
	return fmt.Sprintf("%s %s%s -> %d %s", r.Method, r.URL, req, r.StatusCode, truncate(string(r.Body), 1500))
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// ReqOpt adjusts one request.
type ReqOpt func(*reqConfig)

type reqConfig struct {
	query   url.Values
	noAuth  bool
	token   *string
	timeout time.Duration
}

// WithQuery adds a query parameter.
func WithQuery(key, value string) ReqOpt {
	return func(c *reqConfig) { c.query.Add(key, value) }
}

// WithoutAuth sends the request with no access token at all.
func WithoutAuth() ReqOpt { return func(c *reqConfig) { c.noAuth = true } }

// WithToken sends the request with the given access token instead of the client's own.
func WithToken(tok string) ReqOpt { return func(c *reqConfig) { c.token = &tok } }

// WithTimeout bounds one request; long polls need more than the default.
func WithTimeout(d time.Duration) ReqOpt { return func(c *reqConfig) { c.timeout = d } }

// CS builds a Client-Server API path from segments, escaping each one (room ids, aliases with '#').
func CS(version string, segments ...string) string {
	var b strings.Builder
	b.WriteString("/_matrix/client/")
	b.WriteString(version)
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	return b.String()
}

const (
	defaultRequestTimeout = 30 * time.Second
	maxRateLimitRetries   = 8
)

// DoCtx performs one request, honouring 429 retry_after_ms, and never fails the test itself so
// it is safe to call from goroutines.
func (c *Client) DoCtx(ctx context.Context, method, path string, body any, opts ...ReqOpt) (*Response, error) {
	cfg := reqConfig{query: url.Values{}, timeout: defaultRequestTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	var raw []byte
	switch b := body.(type) {
	case nil:
	case []byte:
		raw = b
	case string:
		raw = []byte(b)
	default:
		var err error
		raw, err = json.Marshal(b)
		if err != nil {
			return nil, fmt.Errorf("encoding body for %s %s: %w", method, path, err)
		}
	}
	if c.AsUserID != "" {
		cfg.query.Set("user_id", string(c.AsUserID))
	}
	if c.AsDeviceID != "" {
		// The unstable name mautrix sends (SetAppServiceDeviceID); Synapse reads it
		// and the stable device_id alike.
		cfg.query.Set("org.matrix.msc3202.device_id", string(c.AsDeviceID))
	}
	u := strings.TrimRight(c.BaseURL, "/") + path
	if len(cfg.query) > 0 {
		u += "?" + cfg.query.Encode()
	}
	token := c.AccessToken
	if cfg.token != nil {
		token = *cfg.token
	}
	for attempt := 0; ; attempt++ {
		rctx, cancel := context.WithTimeout(ctx, cfg.timeout)
		var rd io.Reader
		if raw != nil {
			rd = bytes.NewReader(raw)
		}
		req, err := http.NewRequestWithContext(rctx, method, u, rd)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("building %s %s: %w", method, u, err)
		}
		if raw != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if !cfg.noAuth && token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := c.httpClient().Do(req)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("%s %s: %w", method, u, err)
		}
		data, err := io.ReadAll(res.Body)
		res.Body.Close()
		cancel()
		if err != nil {
			return nil, fmt.Errorf("reading response of %s %s: %w", method, u, err)
		}
		resp := &Response{Method: method, URL: u, ReqBody: raw, StatusCode: res.StatusCode, Body: data}
		if res.StatusCode == http.StatusTooManyRequests && attempt < maxRateLimitRetries {
			wait := retryAfter(resp, res.Header)
			select {
			case <-time.After(wait):
				continue
			case <-ctx.Done():
				return resp, fmt.Errorf("rate limited on %s %s: %w", method, u, ctx.Err())
			}
		}
		return resp, nil
	}
}

// retryAfter reads how long a 429 asks us to wait, bounded so a bad value cannot hang a test.
func retryAfter(resp *Response, h http.Header) time.Duration {
	wait := time.Second
	if ms := resp.JSON().Get("retry_after_ms"); ms.Exists() {
		wait = time.Duration(ms.Int()) * time.Millisecond
	} else if s, err := strconv.Atoi(h.Get("Retry-After")); err == nil {
		wait = time.Duration(s) * time.Second
	}
	return min(max(wait, 10*time.Millisecond), 10*time.Second)
}

func (c *Client) httpClient() *http.Client {
	if c.http != nil {
		return c.http
	}
	return http.DefaultClient
}

// Do performs a request and fails the test on transport errors; any status is returned.
func (c *Client) Do(t testing.TB, method, path string, body any, opts ...ReqOpt) *Response {
	t.Helper()
	res, err := c.DoCtx(context.Background(), method, path, body, opts...)
	if err != nil {
		t.Fatalf("request failed: %v", err)
	}
	return res
}

// MustDo performs a request and fails the test unless it answers 2xx; it returns the parsed body.
func (c *Client) MustDo(t testing.TB, method, path string, body any, opts ...ReqOpt) gjson.Result {
	t.Helper()
	res := c.Do(t, method, path, body, opts...)
	if res.StatusCode < 200 || res.StatusCode > 299 {
		t.Fatalf("want 2xx: %s", res)
	}
	return res.JSON()
}

// As returns a copy of an appservice client that impersonates user via ?user_id=.
func (c *Client) As(user id.UserID) *Client {
	cp := *c
	cp.AsUserID = user
	cp.UserID = user
	cp.DeviceID = ""
	cp.AsDeviceID = ""
	return &cp
}

// OnDevice returns a copy of an impersonating appservice client that also acts as one of
// that user's devices (MSC3202's org.matrix.msc3202.device_id), as an appservice that gives
// each user a device of its own uploads keys and sends to-device messages.
func (c *Client) OnDevice(dev id.DeviceID) *Client {
	cp := *c
	cp.AsDeviceID = dev
	cp.DeviceID = dev
	return &cp
}

// Mautrix returns mautrix's client with the same identity, because the daemon talks through it
// and the suite must prove that exact client works against the homeserver.
func (c *Client) Mautrix(t testing.TB) *mautrix.Client {
	t.Helper()
	user := c.UserID
	if c.AsUserID != "" {
		user = c.AsUserID
	}
	cli, err := mautrix.NewClient(c.BaseURL, user, c.AccessToken)
	if err != nil {
		t.Fatalf("creating mautrix client for %s: %v", user, err)
	}
	cli.Client = c.httpClient()
	cli.DeviceID = c.DeviceID
	cli.SetAppServiceUserID = c.AsUserID != ""
	// mautrix retries 429s with its own backoff; keep it bounded so real failures surface.
	cli.DefaultHTTPRetries = 4
	return cli
}
