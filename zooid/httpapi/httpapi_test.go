package httpapi_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/zooid-dev/zooid/fakeagent"
	"github.com/zooid-dev/zooid/zooid/acpagent"
	"github.com/zooid-dev/zooid/zooid/httpapi"
)

func TestMain(m *testing.M) {
	fakeagent.ExecIfRequested()
	os.Exit(m.Run())
}

func start(t *testing.T, ctl *fakeagent.Controller, token string) *httpapi.Server {
	t.Helper()
	return startWith(t, ctl, token, httpapi.Timeouts{})
}

func startWith(t *testing.T, ctl *fakeagent.Controller, token string, timeouts httpapi.Timeouts) *httpapi.Server {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	srv, err := httpapi.Start(httpapi.Options{
		Listen: "127.0.0.1:0",
		Token:  token,
		Agents: map[string]httpapi.Agent{"hook": {
			Name: "hook",
			Spec: acpagent.Spec{Command: self, Args: ctl.Args("hook"), Env: append(os.Environ(), fakeagent.ExecEnv+"=fake-agent"), Dir: t.TempDir()},
		}},
		TurnTimeout: 20 * time.Second,
		Timeouts:    timeouts,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return srv
}

func post(t *testing.T, url, token, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, url, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// events reads a server-sent event stream to its end as (name, data) pairs.
func events(t *testing.T, resp *http.Response) [][2]string {
	t.Helper()
	var out [][2]string
	var name string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			out = append(out, [2]string{name, strings.TrimPrefix(line, "data: ")})
		}
	}
	return out
}

func TestSessionStreamsTheTurnWithoutZooidMCP(t *testing.T) {
	ctl := fakeagent.NewController(t)
	ctl.Queue("hook", fakeagent.Turn{fakeagent.SayInChunks("build ", "is green"), fakeagent.Stop("end_turn")})
	srv := start(t, ctl, "s3cret")

	resp := post(t, srv.URL()+"/agents/hook/sessions", "s3cret", `{"prompt":"how is the build?"}`)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d, content type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	got := events(t, resp)
	var names []string
	var text strings.Builder
	for _, e := range got {
		names = append(names, e[0])
		if e[0] == "chunk" {
			text.WriteString(e[1])
		}
	}
	if strings.Join(names, ",") != "session,chunk,chunk,done" {
		t.Fatalf("events = %v, want session, two chunks, done", got)
	}
	if !strings.Contains(text.String(), "build ") || !strings.Contains(text.String(), "is green") {
		t.Fatalf("chunks = %s", text.String())
	}
	if !strings.Contains(got[len(got)-1][1], `"end_turn"`) {
		t.Fatalf("done event = %s", got[len(got)-1][1])
	}
	sessions := ctl.Sessions("hook")
	if len(sessions) != 1 || len(sessions[0].McpServers) != 0 {
		t.Fatalf("session/new = %+v; an HTTP-bound agent must get no MCP server", sessions)
	}
	if p := ctl.Prompts("hook"); len(p) != 1 || p[0].Text != "how is the build?" {
		t.Fatalf("prompts = %+v", p)
	}
}

func TestBadRequestsAreRefusedClearly(t *testing.T) {
	ctl := fakeagent.NewController(t)
	srv := start(t, ctl, "s3cret")
	cases := []struct {
		name, path, token, body string
		status                  int
	}{
		{"no token", "/agents/hook/sessions", "", `{"prompt":"x"}`, http.StatusUnauthorized},
		{"wrong token", "/agents/hook/sessions", "s3creT", `{"prompt":"x"}`, http.StatusUnauthorized},
		{"unknown agent", "/agents/nobody/sessions", "s3cret", `{"prompt":"x"}`, http.StatusNotFound},
		{"not json", "/agents/hook/sessions", "s3cret", `prompt=x`, http.StatusBadRequest},
		{"unknown field", "/agents/hook/sessions", "s3cret", `{"prompt":"x","room_id":"!r"}`, http.StatusBadRequest},
		{"empty prompt", "/agents/hook/sessions", "s3cret", `{"prompt":"  "}`, http.StatusBadRequest},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := post(t, srv.URL()+c.path, c.token, c.body)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.status)
			}
		})
	}
	if n := len(ctl.Sessions("hook")); n != 0 {
		t.Fatalf("a refused request started %d agent sessions", n)
	}
}

// cutOff reports whether the server ended conn (EOF or reset) before limit; it
// reads and discards whatever the server answered first.
func cutOff(t *testing.T, conn net.Conn, limit time.Duration) bool {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(limit))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return true
}

func TestSlowBodyClientIsCutOff(t *testing.T) {
	ctl := fakeagent.NewController(t)
	srv := startWith(t, ctl, "0123456789abcdef", httpapi.Timeouts{Read: 300 * time.Millisecond})
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Headers promise 200 bytes; the body then dribbles in a byte every 100ms,
	// which would take 20s to complete.
	fmt.Fprintf(conn, "POST /agents/hook/sessions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer 0123456789abcdef\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n")
	done := make(chan struct{})
	defer close(done)
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for range 200 {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	if !cutOff(t, conn, 10*time.Second) {
		t.Fatal("a client dribbling its body was still connected after 10s; the read timeout is 300ms")
	}
	if n := len(ctl.Sessions("hook")); n != 0 {
		t.Fatalf("a cut-off request started %d agent sessions", n)
	}
}

func TestIdleUnauthenticatedConnectionIsCutOff(t *testing.T) {
	ctl := fakeagent.NewController(t)
	srv := startWith(t, ctl, "0123456789abcdef", httpapi.Timeouts{Header: 300 * time.Millisecond, Idle: 300 * time.Millisecond})
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL(), "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if !cutOff(t, conn, 10*time.Second) {
		t.Fatal("a connection that sent nothing was still open after 10s; the header timeout is 300ms")
	}
}

func TestLongTurnOutlivesTheListenerTimeouts(t *testing.T) {
	ctl := fakeagent.NewController(t)
	// The turn takes about a second, several times every listener timeout: the
	// stream must still carry it to the end.
	ctl.Queue("hook", fakeagent.Turn{fakeagent.Say("started "), fakeagent.Wait(time.Second), fakeagent.Say("finished"), fakeagent.Stop("end_turn")})
	srv := startWith(t, ctl, "0123456789abcdef", httpapi.Timeouts{Header: 200 * time.Millisecond, Read: 200 * time.Millisecond, Write: 200 * time.Millisecond, Idle: 200 * time.Millisecond})
	resp := post(t, srv.URL()+"/agents/hook/sessions", "0123456789abcdef", `{"prompt":"go"}`)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, want 200", resp.StatusCode)
	}
	evs := events(t, resp)
	if len(evs) == 0 || evs[len(evs)-1][0] != "done" {
		t.Fatalf("stream did not end with done: %v", evs)
	}
}
