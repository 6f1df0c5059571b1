package fakehs

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"
)

func urlQuery(s string) string { return url.QueryEscape(s) }

// rawDo sends a request with an optional bearer token and body.
func rawDo(t *testing.T, s *Server, method, token, path, body string) *http.Response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.URL()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func rawGet(t *testing.T, s *Server, token, path string) *http.Response {
	t.Helper()
	return rawDo(t, s, http.MethodGet, token, path, "")
}

// decode checks the status and decodes the JSON body into v (if non-nil).
func decode(t *testing.T, resp *http.Response, status int, v any) {
	t.Helper()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != status {
		t.Fatalf("%s %s: status %d, want %d: %s", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, status, data)
	}
	if v != nil {
		if err := json.Unmarshal(data, v); err != nil {
			t.Fatalf("decoding %s: %v", data, err)
		}
	}
}

// wantError checks a Matrix error response.
func wantError(t *testing.T, resp *http.Response, status int, errcode string) {
	t.Helper()
	var body struct {
		Errcode string `json:"errcode"`
		Error   string `json:"error"`
	}
	decode(t, resp, status, &body)
	if body.Errcode != errcode || body.Error == "" {
		t.Fatalf("%s %s: errcode %q (%q), want %q", resp.Request.Method, resp.Request.URL.Path, body.Errcode, body.Error, errcode)
	}
}

func stringsReader(s string) io.Reader { return strings.NewReader(s) }

// mustCreateRoom creates a room as c and returns its id, failing the test on error.
func mustCreateRoom(t *testing.T, c *mautrix.Client, req *mautrix.ReqCreateRoom) id.RoomID {
	t.Helper()
	resp, err := c.CreateRoom(context.Background(), req)
	if err != nil {
		t.Fatalf("%s creating a room: %v", c.UserID, err)
	}
	return resp.RoomID
}

// mustJoin joins c to room, failing the test on error.
func mustJoin(t *testing.T, c *mautrix.Client, room id.RoomID) {
	t.Helper()
	if _, err := c.JoinRoom(context.Background(), string(room), nil); err != nil {
		t.Fatalf("%s joining %s: %v", c.UserID, room, err)
	}
}

// mustSync makes one /sync that returns at once (timeout 0) as c, from since with the uploaded
// filter filterID (either may be empty), failing the test on error.
func mustSync(t *testing.T, c *mautrix.Client, since, filterID string) *mautrix.RespSync {
	t.Helper()
	resp, err := c.SyncRequest(context.Background(), 0, since, filterID, false, "")
	if err != nil {
		t.Fatalf("%s syncing since %q: %v", c.UserID, since, err)
	}
	return resp
}
