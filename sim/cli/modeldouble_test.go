package cli

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestModelDoubleServesItsScripts: the standalone model double prints each
// scripted agent's base URLs, answers a turn from the script file, and exits
// 1 naming the miss when the agent asked for more than the script held.
func TestModelDoubleServesItsScripts(t *testing.T) {
	script := filepath.Join(t.TempDir(), "bot.jsonl")
	if err := os.WriteFile(script, []byte("# one turn\n{\"say\": \"hello from the script\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	outR, outW := io.Pipe()
	var stderr bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- runModelDouble(ctx, []string{"--addr", "127.0.0.1:0", "--log-level", "error", "--script", "bot=" + script}, outW, &stderr)
		outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatalf("reading the first base URL: %v (stderr %s)", err, stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "bot" || f[1] != "anthropic" || !strings.HasPrefix(f[2], "http://127.0.0.1:") {
		t.Fatalf("printed %q, want \"bot anthropic http://127.0.0.1:…\"", line)
	}
	ask := func() string {
		resp, err := http.Post(f[2]+"/v1/messages", "application/json", strings.NewReader(
			`{"tools": [{"name": "t", "input_schema": {}}], "messages": [{"role": "user", "content": "hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if got := ask(); !strings.Contains(got, "hello from the script") {
		t.Fatalf("first turn answered %s", got)
	}
	if got := ask(); !strings.Contains(got, "no step left") {
		t.Fatalf("a turn past the script answered %s", got)
	}
	cancel()
	select {
	case c := <-code:
		if c != 1 || !strings.Contains(stderr.String(), "no step left") {
			t.Fatalf("exit %d, stderr %q; want 1 naming the miss", c, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the model double did not stop")
	}
}

// TestModelDoubleRefusesABadScript names the file and line of a bad step.
func TestModelDoubleRefusesABadScript(t *testing.T) {
	script := filepath.Join(t.TempDir(), "bad.jsonl")
	if err := os.WriteFile(script, []byte("{\"say\": \"ok\"}\n{\"fault\": {\"kind\": \"status\", \"status\": 200}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if c := runModelDouble(context.Background(), []string{"--script", "bot=" + script}, io.Discard, &stderr); c != 2 {
		t.Fatalf("exit %d, want 2", c)
	}
	if want := script + ":2: a status fault needs an HTTP error status"; !strings.Contains(stderr.String(), want) {
		t.Fatalf("stderr %q, want it to contain %q", stderr.String(), want)
	}
}
