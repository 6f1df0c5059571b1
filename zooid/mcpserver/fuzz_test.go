package mcpserver_test

import (
	"bufio"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/zooid-dev/zooid/zooid/handshake"
)

// FuzzHandshake sends an arbitrary first line on an agent's socket: the daemon
// answers with exactly one Welcome line, OK only for the line naming the
// agent's live binding, and the one refusal text for anything else.
func FuzzHandshake(f *testing.F) {
	srv := newServer(f, nil, nil)
	sock, err := srv.ListenAgent("agent-a")
	if err != nil {
		f.Fatal(err)
	}
	good := srv.Bind(conversation("agent-a"), self(f))
	other := srv.Bind(conversation("agent-b"), self(f))
	for _, s := range []string{`{"zooid_binding":"` + good + `"}`, `{"zooid_binding":"` + other + `"}`, `{}`, ``, `null`, `{"zooid_binding":1}`, `{"zooid_binding":"x"}`, "\x00\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		if strings.ContainsAny(line, "\n") {
			return // one line is the handshake; the rest is MCP
		}
		var hello handshake.Hello
		want := json.Unmarshal([]byte(line), &hello) == nil && hello.Binding == good
		nc, err := net.Dial("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := nc.Write([]byte(line + "\n")); err != nil {
			t.Fatal(err)
		}
		answer, err := bufio.NewReader(nc).ReadBytes('\n')
		if err != nil {
			t.Fatalf("no answer to %q: %v", line, err)
		}
		var w handshake.Welcome
		if err := json.Unmarshal(answer, &w); err != nil {
			t.Fatalf("answer %q is not a Welcome: %v", answer, err)
		}
		if w.OK != want || (!w.OK && w.Error != handshake.RefusedMessage) {
			t.Fatalf("handshake %q answered %+v, want ok=%v", line, w, want)
		}
	})
}
