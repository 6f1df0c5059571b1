package cli

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestFakehsServesUntilCancelled(t *testing.T) {
	reg := filepath.Join(t.TempDir(), "registration.yaml")
	yaml := "id: zooid\nurl: \"\"\nas_token: ast\nhs_token: hst\nsender_localpart: zooid\n" +
		"namespaces:\n  users:\n  - regex: '@agent-.*:localhost'\n    exclusive: true\n"
	if err := os.WriteFile(reg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	outR, outW := io.Pipe()
	var stderr bytes.Buffer
	code := make(chan int, 1)
	go func() {
		code <- runFakehs(ctx, []string{"--addr", "127.0.0.1:0", "--appservice", reg}, outW, &stderr)
		outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatalf("reading URL: %v (stderr %s)", err, stderr.String())
	}
	url := strings.TrimSpace(line)
	if !strings.HasPrefix(url, "http://127.0.0.1:") {
		t.Fatalf("printed %q", url)
	}
	go func() { _, _ = io.Copy(io.Discard, outR) }()
	// The appservice's as_token authenticates as its sender user.
	req, _ := http.NewRequest(http.MethodGet, url+"/_matrix/client/v3/account/whoami", nil)
	req.Header.Set("Authorization", "Bearer ast")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "@zooid:localhost") {
		t.Fatalf("whoami: %d %s", resp.StatusCode, body)
	}
	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("exit %d: %s", c, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("fakehs did not stop")
	}
	if _, err := http.Get(url + "/_matrix/client/versions"); err == nil {
		t.Fatal("server still answering after shutdown")
	}
}

func TestFakehsBadArguments(t *testing.T) {
	var out, errb bytes.Buffer
	if c := runFakehs(context.Background(), []string{"--nope"}, &out, &errb); c != 2 {
		t.Fatalf("unknown flag: exit %d", c)
	}
	errb.Reset()
	if c := runFakehs(context.Background(), []string{"--appservice", "/does/not/exist.yaml"}, &out, &errb); c != 1 ||
		!strings.Contains(errb.String(), "exist.yaml") {
		t.Fatalf("missing registration: exit %d: %s", c, errb.String())
	}
}

// TestFakehsChildProcess runs `zooid fakehs` as a real child process (this
// test binary re-executed) and stops it with SIGTERM.
func TestFakehsChildProcess(t *testing.T) {
	if os.Getenv("ZOOID_FAKEHS_CHILD") == "1" {
		os.Exit(cmdFakehs([]string{"--addr", "127.0.0.1:0", "--server-name", "child.test"}, os.Stdout, os.Stderr))
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFakehsChildProcess$")
	cmd.Env = append(os.Environ(), "ZOOID_FAKEHS_CHILD=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("reading URL: %v (stderr %s)", err, stderr.String())
	}
	url := strings.TrimSpace(line)
	resp, err := http.Get(url + "/_matrix/client/versions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("versions: %d", resp.StatusCode)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v (stderr %s)", err, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("child did not stop on SIGTERM")
	}
	if !strings.Contains(stderr.String(), "fakehs stopped") {
		t.Fatalf("no clean shutdown log: %s", stderr.String())
	}
}

func TestFakeAgentNeedsController(t *testing.T) {
	var out, errb strings.Builder
	if code := Main([]string{"fake-agent", "--agent", "a"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "--control") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
}

func TestUnknownCommandListsTheHarnessCommands(t *testing.T) {
	var out, errb strings.Builder
	if code := Main([]string{"run"}, &out, &errb); code != 2 {
		t.Fatalf("exit %d, want 2", code)
	}
	for _, want := range []string{`unknown command "run"`, "sim ", "fakehs ", "fake-agent ", "mcp "} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errb.String())
		}
	}
}
