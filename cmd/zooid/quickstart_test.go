package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix/appservice"

	"github.com/zooid-dev/zooid/docker/synapse"
	"github.com/zooid-dev/zooid/internal/freeport"
)

// quickstartDoc is the guide this test follows.
const quickstartDoc = "../../docs/quickstart.md"

// TestQuickstartOnSynapse runs docs/quickstart.md step by step against a real Synapse: the
// real zooid binary built from this tree, the guide's own zooid.yaml (read from the guide,
// with this run's homeserver, server name, push port and user filled in), its registration
// installed in Synapse, a user made with Synapse's register_new_matrix_user, the invitation
// to the private room the daemon creates, a mention of the demo agent answered in its
// thread, and a tool call. It logs each step's time for the guide's table.
func TestQuickstartOnSynapse(t *testing.T) {
	synapse.RequireEngine(t)
	dir := t.TempDir()
	timings := map[string]time.Duration{}
	step := func(name string, start time.Time) { timings[name] = time.Since(start) }

	// 1. Build zooid.
	begin := time.Now()
	exe := filepath.Join(dir, "bin", "zooid")
	build := exec.Command("go", "build", "-tags", "goolm", "-o", exe, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	step("build", begin)

	// 2. Two tokens, in files only the daemon's user reads.
	for _, name := range []string{"as_token", "hs_token"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(randomHex(t, 32)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// 3. zooid.yaml, as the guide writes it, and zooid check.
	port, err := freeport.Port()
	if err != nil {
		t.Fatal(err)
	}
	hsURL := fmt.Sprintf("http://127.0.0.1:%d", port)
	push, pushFile := boundPort(t)
	cfg := guideConfig(t, map[string]string{
		"http://127.0.0.1:8008": hsURL,
		"example.org":           "localhost",
		"127.0.0.1:9000":        push,
		"'@you'":                "'@ori'",
	})
	cfgPath := filepath.Join(dir, "zooid.yaml")
	writeFile(t, cfgPath, cfg)
	if out, errOut := runZooid(t, exe, "check", "--config", cfgPath); !strings.HasPrefix(out, "ok: 1 agents, 1 transports\nsandbox: ") || errOut != "" {
		t.Fatalf("zooid check: stdout %q, stderr %q; want the guide's ok, the sandbox's lines and no warning", out, errOut)
	}

	// 4. The registration, installed in Synapse, which reads it at start.
	regPath := filepath.Join(dir, "registration.yaml")
	regYAML, _ := runZooid(t, exe, "registration", "--config", cfgPath)
	writeFile(t, regPath, regYAML)
	reg, err := appservice.LoadRegistration(regPath)
	if err != nil {
		t.Fatalf("the registration zooid printed: %v", err)
	}
	begin = time.Now()
	hs := synapse.RunForTest(t, synapse.WithAppservice(reg), synapse.WithPort(port))
	step("synapse", begin)
	if out, errOut := runZooid(t, exe, "check", "--config", cfgPath); !strings.Contains(out, "compared with the registration") || errOut != "" {
		t.Fatalf("zooid check with the registration beside it: stdout %q, stderr %q", out, errOut)
	}

	// 5. Your own user, with Synapse's tool.
	ctx := context.Background()
	begin = time.Now()
	registerHuman(ctx, t, hs, "ori", "ori-password")
	step("register", begin)
	api := &curl{t: t, base: hsURL}
	login := api.do("POST", "/_matrix/client/v3/login", "",
		`{"type":"m.login.password","identifier":{"type":"m.id.user","user":"ori"},"password":"ori-password"}`)
	token, _ := login["access_token"].(string)

	// The guide's troubleshooting, on Synapse: an hs_token file newer than the registration
	// Synapse holds stops the start with the daemon's refusal named, not the url.
	stale := filepath.Join(dir, "stale")
	if err := os.MkdirAll(stale, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(stale, "as_token"), mustRead(t, filepath.Join(dir, "as_token")))
	writeFile(t, filepath.Join(stale, "hs_token"), randomHex(t, 32)+"\n")
	writeFile(t, filepath.Join(stale, "zooid.yaml"), cfg)
	staleLogs := &syncBuffer{}
	staleRun := zooidProcessLogged(t, exe, io.Discard, staleLogs, []*os.File{pushFile}, "run", "--config", filepath.Join(stale, "zooid.yaml"))
	if err := staleRun.Wait(); err == nil {
		t.Fatal("zooid run with an hs_token the registration does not hold started")
	}
	for _, want := range []string{
		"this daemon refused the homeserver's token: the registration's hs_token differs from this daemon's (hs_token_file " + filepath.Join(stale, "hs_token") + ")",
		"level=WARN msg=\"push listener refused a request with a wrong homeserver token",
	} {
		if !strings.Contains(staleLogs.String(), want) {
			t.Errorf("zooid run with a stale registration: the output lacks %q:\n%s", want, staleLogs)
		}
	}

	// 6. zooid run (its push port bound here and handed over, so Synapse's url leads to it
	// from the first moment).
	logs := &syncBuffer{}
	begin = time.Now()
	zooidProcessLogged(t, exe, io.Discard, logs, []*os.File{pushFile}, "run", "--config", cfgPath)

	// 7. Join the room the daemon created, once it has invited ori.
	alias := url.PathEscape("#zooid-demo:localhost")
	var joined map[string]any
	poll(t, 60*time.Second, 100*time.Millisecond, "the daemon to create #zooid-demo and invite ori", func() bool {
		r, status := api.try("POST", "/_matrix/client/v3/join/"+alias, token, `{}`)
		joined = r
		return status == http.StatusOK
	})
	step("run+join", begin)
	room, _ := joined["room_id"].(string)
	// ori can join once invited, before the daemon has finished the room's
	// set-up (its agent marks itself in the room's state) and logged it ready.
	poll(t, 60*time.Second, 50*time.Millisecond, "zooid run to log \"matrix transport ready\"", func() bool {
		return strings.Contains(logs.String(), "matrix transport ready")
	})
	for _, want := range []string{"appservice registration checked", "created room", "visibility=private", "invited", "room ready", "matrix transport ready"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("zooid run's log lacks %q, which the guide says it logs:\n%s", want, logs)
		}
	}
	// Nobody else joins the private room.
	_, eveToken, err := hs.RegisterUser(ctx, "eve", "eve-password", false)
	if err != nil {
		t.Fatal(err)
	}
	if r, status := api.try("POST", "/_matrix/client/v3/join/"+alias, eveToken, `{}`); status != http.StatusForbidden || r["errcode"] != "M_FORBIDDEN" {
		t.Errorf("eve, never invited, joining #zooid-demo on Synapse: %d %v; want 403 M_FORBIDDEN", status, r)
	}

	// 8. Mention the agent; the answer comes in a thread on the mention.
	s := &stack{hs: api, token: token, room: room}
	begin = time.Now()
	hello := s.send("m.room.message", "qs1", `{"msgtype":"m.text","body":"Demo: hello","m.mentions":{"user_ids":["@demo:localhost"]}}`)
	s.waitNoticeWithin(t, 60*time.Second, hello, "I am Zooid's demo agent")
	step("hello", begin)

	// 9. A tool call, and a bare reply in its thread.
	begin = time.Now()
	who := s.send("m.room.message", "qs2", `{"msgtype":"m.text","body":"Demo: who is here?","m.mentions":{"user_ids":["@demo:localhost"]}}`)
	members := s.waitNoticeWithin(t, 60*time.Second, who, "In this room (zooid_get_members), 2 members:")
	step("tool", begin)
	if !strings.Contains(members, "- ori (@ori:localhost)") || !strings.Contains(members, "- Demo (@demo:localhost), agent demo") {
		t.Errorf("the members posted:\n%s", members)
	}
	s.send("m.room.message", "qs3", fmt.Sprintf(`{"msgtype":"m.text","body":"thread","m.relates_to":{"rel_type":"m.thread","event_id":%q}}`, who))
	s.waitNoticeWithin(t, 60*time.Second, who, "This thread, ")

	if lines := regexp.MustCompile(`(?m)^.*level=ERROR.*$`).FindAllString(logs.String(), -1); len(lines) > 0 {
		t.Errorf("zooid run logged errors on the guide's path:\n%s", strings.Join(lines, "\n"))
	}
	t.Logf("quickstart timings: build %s, synapse %s, register_new_matrix_user %s, run until joined %s, hello answered %s, tool answered %s",
		timings["build"].Round(100*time.Millisecond), timings["synapse"].Round(100*time.Millisecond), timings["register"].Round(100*time.Millisecond),
		timings["run+join"].Round(100*time.Millisecond), timings["hello"].Round(100*time.Millisecond), timings["tool"].Round(100*time.Millisecond))
}

// guideConfig is the zooid.yaml of docs/quickstart.md (the yaml block after its
// "quickstart: zooid.yaml" marker) with each of replace's keys replaced.
func guideConfig(t *testing.T, replace map[string]string) string {
	t.Helper()
	doc, err := os.ReadFile(quickstartDoc)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- quickstart: zooid.yaml -->\n```yaml\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatalf("%s has no zooid.yaml block after its marker", quickstartDoc)
	}
	cfg := string(m[1])
	for from, to := range replace {
		if !strings.Contains(cfg, from) {
			t.Fatalf("the guide's zooid.yaml no longer holds %q", from)
		}
		cfg = strings.ReplaceAll(cfg, from, to)
	}
	return cfg
}

// runZooid runs the zooid binary exe with args and returns its stdout and stderr, failing
// the test when it exits non-zero.
func runZooid(t *testing.T, exe string, args ...string) (string, string) {
	t.Helper()
	cmd := exec.Command(exe, args...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("zooid %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), stderr.String()
}

// registerHuman makes a user as the guide's step 5 does: Synapse's own
// register_new_matrix_user inside the container (named
// synapse_register_new_matrix_user by Debian's package).
func registerHuman(ctx context.Context, t *testing.T, hs *synapse.Container, user, password string) {
	t.Helper()
	var out string
	for _, tool := range []string{"register_new_matrix_user", "synapse_register_new_matrix_user"} {
		code, o, err := hs.Exec(ctx, []string{tool, "-c", synapse.ConfigPath, "-u", user, "-p", password, "--no-admin", hs.BaseURL()})
		if err != nil {
			t.Fatal(err)
		}
		if code == 0 {
			return
		}
		out += fmt.Sprintf("%s: exit %d: %s\n", tool, code, o)
	}
	t.Fatalf("registering %s with register_new_matrix_user:\n%s", user, out)
}

func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestComposeConfigChecks: docker/compose's zooid.yaml, with the tokens compose.yaml passes
// in, passes zooid check with nothing to warn of — its agent is the demo, which needs
// nothing in the image but zooid.
func TestComposeConfigChecks(t *testing.T) {
	t.Setenv("MATRIX_AS_TOKEN", randomHex(t, 32))
	t.Setenv("MATRIX_HS_TOKEN", randomHex(t, 32))
	t.Setenv("PATH", t.TempDir()) // nothing installed: the image holds only zooid
	var out, errb strings.Builder
	if code := dispatch([]string{"check", "--config", "../../docker/compose/zooid.yaml"}, &out, &errb); code != 0 || errb.Len() != 0 ||
		!strings.HasPrefix(out.String(), "ok: 1 agents, 1 transports\nsandbox: ") {
		t.Fatalf("zooid check of docker/compose/zooid.yaml: exit %d\n%s%s", code, out.String(), errb.String())
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
