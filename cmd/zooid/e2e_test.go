package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zooid-dev/zooid/fakeagent"
	"github.com/zooid-dev/zooid/internal/childproc"
	"github.com/zooid-dev/zooid/sim/cli"
	"github.com/zooid-dev/zooid/zooid/sandbox"
)

// execEnv makes the test binary behave as the zooid command, so the test runs
// the real subcommands as real processes without a separate build step. With
// "1" it plays zooid-sim too (as if installed next to zooid): the harness
// commands go to cli. With "alone" it is zooid by itself, exec and all.
const execEnv = "ZOOID_TEST_AS_ZOOID"

func TestMain(m *testing.M) {
	// The daemon under test starts its agents as `<this binary> sandbox --
	// …` with their policy in the environment, whatever else it holds.
	if _, ok := os.LookupEnv(sandbox.Env); ok && len(os.Args) > 1 && os.Args[1] == "sandbox" {
		os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
	}
	switch os.Getenv(execEnv) {
	case "1":
		if len(os.Args) > 1 && slices.Contains(harnessCommands, os.Args[1]) {
			os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
		}
		os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
	case "alone":
		os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// zooidProcess starts `zooid args...` (this test binary) and stops it on cleanup.
func zooidProcess(t *testing.T, stdout io.Writer, args ...string) *exec.Cmd {
	t.Helper()
	return zooidProcessWith(t, stdout, nil, args...)
}

// zooidProcessWith is zooidProcess handing the process extra descriptors
// (3, 4, ...) with LISTEN_FDS saying so, as systemd's socket activation does.
func zooidProcessWith(t *testing.T, stdout io.Writer, files []*os.File, args ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return zooidProcessAt(t, self, stdout, files, args...)
}

// zooidProcessAt is zooidProcessWith running the zooid binary at exe (a copy
// of this test binary).
func zooidProcessAt(t *testing.T, exe string, stdout io.Writer, files []*os.File, args ...string) *exec.Cmd {
	t.Helper()
	return zooidProcessLogged(t, exe, stdout, nil, files, args...)
}

// zooidProcessLogged is zooidProcessAt copying the process's stderr (its log)
// to logs as well, when logs is not nil.
func zooidProcessLogged(t *testing.T, exe string, stdout, logs io.Writer, files []*os.File, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), execEnv+"=1")
	if len(files) > 0 {
		cmd.ExtraFiles = files
		cmd.Env = append(cmd.Env, fmt.Sprintf("LISTEN_FDS=%d", len(files)))
	}
	cmd.Stdout = stdout
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if logs != nil {
		cmd.Stderr = io.MultiWriter(stderr, logs)
	}
	cmd.SysProcAttr = childproc.SysProcAttr()
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting zooid %s: %v", args[0], err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			t.Logf("zooid %s stderr:\n%s", args[0], stderr.String())
		}
	})
	return cmd
}

// The appservice tokens an end-to-end test's zooid.yaml names as
// ${E2E_AS_TOKEN} and ${E2E_HS_TOKEN} (e2eEnv sets them).
const (
	e2eASToken = "e2e-as-token-0123456789"
	e2eHSToken = "e2e-hs-token-0123456789"
)

// matrixYAML opens an end-to-end zooid.yaml: #general, which the daemon
// creates private, invites ori (the stack's human); its transports.matrix
// (last, so a test may add transports) names the homeserver and tokens
// startStack provides, and listens on the push port.
func matrixYAML(push string) string {
	return `rooms:
  '#general': { invite: ['@ori'] }
transports:
  matrix:
    homeserver: ${E2E_HS_URL}
    server_name: localhost
    as_token: ${E2E_AS_TOKEN}
    hs_token: ${E2E_HS_TOKEN}
    listen: ` + push + "\n"
}

// e2eEnv sets the variables an end-to-end zooid.yaml names, E2E_HS_URL to
// a placeholder until fakehs says where it is.
func e2eEnv(t *testing.T) {
	t.Setenv("E2E_HS_URL", "http://127.0.0.1:1")
	t.Setenv("E2E_AS_TOKEN", e2eASToken)
	t.Setenv("E2E_HS_TOKEN", e2eHSToken)
}

// stack is the standalone fake homeserver and the daemon as separate
// processes, as an operator runs them, with ori joined to #general.
type stack struct {
	exe, cfg string      // the zooid binary the processes run, and its config
	logs     *syncBuffer // what every `zooid run` of the stack logged
	push     *os.File    // the daemon's push port, bound by the test
	runArgs  []string    // after `run --config cfg`
	hs       *curl       // the homeserver, as ori calls it by hand
	token    string      // ori's access token
	room     string      // #general's room id
	daemon   *exec.Cmd   // the latest `zooid run`
}

// startStack starts what an end-to-end test needs, in the order an operator
// would: the registration `zooid registration --config cfg` prints (written
// beside cfg), `zooid fakehs` serving it on a port of its choosing, then
// `zooid run --config cfg runArgs...` with push handed over as a
// socket-activated descriptor; ori registers first, then waits for the
// daemon to create #general (inviting ori) and joins it. exe is the zooid binary to run ("" for this
// test binary). cfg names the homeserver ${E2E_HS_URL} and the tokens
// ${E2E_AS_TOKEN} and ${E2E_HS_TOKEN}; E2E_HS_URL points at fakehs once it
// says where it is. Every process is stopped when the test ends.
func startStack(t *testing.T, exe, cfg string, push *os.File, runArgs ...string) *stack {
	t.Helper()
	return startStackRegistered(t, exe, cfg, cfg, push, runArgs...)
}

// startStackRegistered is startStack with the registration made from
// another config, regCfg: an operator who changed zooid.yaml after installing
// the registration.
func startStackRegistered(t *testing.T, exe, cfg, regCfg string, push *os.File, runArgs ...string) *stack {
	t.Helper()
	if exe == "" {
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		exe = self
	}
	e2eEnv(t)
	// The registration is made by the same binary that runs: zooid judges the
	// config, agents' users included, against its own executable.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	regCmd := exec.CommandContext(ctx, exe, "registration", "--config", regCfg)
	regCmd.Env = append(os.Environ(), execEnv+"=1")
	var stderr bytes.Buffer
	regCmd.Stderr = &stderr
	reg, err := regCmd.Output()
	if err != nil {
		t.Fatalf("zooid registration: %v: %s", err, stderr.String())
	}
	regPath := filepath.Join(filepath.Dir(cfg), "registration.yaml")
	writeFile(t, regPath, string(reg))
	urls := &lineWriter{lines: make(chan string, 4)}
	zooidProcessAt(t, exe, urls, nil, "fakehs", "--addr", "127.0.0.1:0", "--server-name", "localhost", "--appservice", regPath)
	var hsURL string
	select {
	case hsURL = <-urls.lines:
	case <-time.After(15 * time.Second):
		t.Fatal("zooid fakehs printed no URL")
	}
	hsURL = strings.TrimSpace(hsURL)
	t.Setenv("E2E_HS_URL", hsURL)

	s := &stack{exe: exe, cfg: cfg, push: push, runArgs: runArgs, hs: &curl{t: t, base: hsURL}, logs: &syncBuffer{}}
	// ori exists before the daemon starts, as the people an operator lists
	// under rooms: do: the daemon invites them when it creates the room.
	reply := s.hs.do("POST", "/_matrix/client/v3/register", "", `{"username":"ori","password":"pw","auth":{"type":"m.login.dummy"}}`)
	s.token = reply["access_token"].(string)
	s.run(t)
	eventually(t, "the daemon to create #general", func() bool {
		r, status := s.hs.try("GET", "/_matrix/client/v3/directory/room/"+url.PathEscape("#general:localhost"), s.token, "")
		if status != http.StatusOK {
			return false
		}
		s.room, _ = r["room_id"].(string)
		return s.room != ""
	})
	// The invite follows the room's creation (and its alias) by a request or
	// two: until it lands, the private room refuses ori's join.
	eventually(t, "ori to join #general once invited", func() bool {
		_, status := s.hs.try("POST", "/_matrix/client/v3/join/"+url.PathEscape(s.room), s.token, `{}`)
		return status == http.StatusOK
	})
	return s
}

// run starts a daemon (another one after a kill) on the stack's config, state
// and push port.
func (s *stack) run(t *testing.T) {
	t.Helper()
	s.daemon = zooidProcessLogged(t, s.exe, io.Discard, s.logs, []*os.File{s.push}, append([]string{"run", "--config", s.cfg}, s.runArgs...)...)
}

// send posts an event of type typ with the raw JSON content into #general
// as ori, with txn as its transaction id, and returns its event id.
func (s *stack) send(typ, txn, content string) string {
	sent := s.hs.do("PUT", "/_matrix/client/v3/rooms/"+url.PathEscape(s.room)+"/send/"+typ+"/"+txn, s.token, content)
	return sent["event_id"].(string)
}

// mention posts "@agent text" in #general as ori, mentioning the agent.
func (s *stack) mention(agent, txn, text string) string {
	return s.send("m.room.message", txn,
		fmt.Sprintf(`{"msgtype":"m.text","body":"@%s %s","m.mentions":{"user_ids":["@%s:localhost"]}}`, agent, text, agent))
}

// recent is #general's newest 50 events, newest first, as ori reads them.
func (s *stack) recent() []map[string]any {
	page := s.hs.do("GET", "/_matrix/client/v3/rooms/"+url.PathEscape(s.room)+"/messages?dir=b&limit=50", s.token, "")
	chunk, _ := page["chunk"].([]any)
	evs := make([]map[string]any, 0, len(chunk))
	for _, raw := range chunk {
		evs = append(evs, raw.(map[string]any))
	}
	return evs
}

// TestRunAnswersAMentionPostedOverHTTP is the operator's smoke test: the
// standalone fake homeserver and the daemon as separate processes, a scripted
// agent, and a human's mention posted with plain HTTP requests as curl would.
func TestRunAnswersAMentionPostedOverHTTP(t *testing.T) {
	dir := t.TempDir()
	ctl := fakeagent.NewController(t)
	ctl.Queue("agent-a", fakeagent.Turn{fakeagent.Say("svc-a looks healthy"), fakeagent.Stop("end_turn")})

	// Nothing is named before it is bound: the push port is bound here and
	// handed to the daemon as a socket-activated descriptor, and fakehs binds
	// a port of its choosing and prints it.
	push, pushFile := boundPort(t)
	cfgPath := filepath.Join(dir, "zooid.yaml")
	self, _ := os.Executable()
	args, _ := json.Marshal(ctl.Args("agent-a"))
	writeFile(t, cfgPath, matrixYAML(push)+fmt.Sprintf(`agents:
  agent-a:
    # The agent and its bridge are this test binary too; the daemon passes
    # agents only an allowlisted environment, so the switch is named here.
    acp: { command: %q, args: %s, env: { %s: "1" } }
    matrix:
      user_id: '@agent-a'
      display_name: Agent A
      rooms: ['#general']
`, self, args, execEnv))
	// A human's token in the operator's shell, and an unlisted variable: the daemon
	// process inherits both, its agent must get neither.
	t.Setenv("OPERATOR_ACCESS_TOKEN", "syt_b3JpZ2luYWw_human_token")
	t.Setenv("E2E_UNLISTED", "daemon-only")

	// The registration comes from the config, as an operator would make it;
	// ori joins the #general the daemon creates and mentions agent-a.
	s := startStack(t, "", cfgPath, pushFile, "--log-level", "debug")
	mention := s.mention("agent-a", "t1", "is svc-a healthy?")

	// The daemon made #general private: ori, whom rooms: lists, joined; eve, anyone else
	// on the homeserver, can't join and so can't prompt agent-a.
	eve := s.hs.do("POST", "/_matrix/client/v3/register", "", `{"username":"eve","password":"pw","auth":{"type":"m.login.dummy"}}`)
	if r, status := s.hs.try("POST", "/_matrix/client/v3/join/"+url.PathEscape(s.room), eve["access_token"].(string), `{}`); status != http.StatusForbidden || r["errcode"] != "M_FORBIDDEN" {
		t.Errorf("eve, never invited, joining the #general the daemon created: %d %v; want 403 M_FORBIDDEN", status, r)
	}

	eventually(t, "agent-a's reply in the mention's thread", func() bool {
		for _, ev := range s.recent() {
			content, _ := ev["content"].(map[string]any)
			rel, _ := content["m.relates_to"].(map[string]any)
			if ev["sender"] == "@agent-a:localhost" && content["msgtype"] == "m.notice" &&
				content["body"] == "svc-a looks healthy" && rel["rel_type"] == "m.thread" && rel["event_id"] == mention {
				return true
			}
		}
		return false
	})
	prompts := ctl.Prompts("agent-a")
	// A new session's first prompt is the session header, a blank line, then the
	// message with the agent's own mention stripped.
	if len(prompts) != 1 || !strings.HasPrefix(prompts[0].Text, "[zooid] room: #general:localhost ") ||
		!strings.HasSuffix(prompts[0].Text, "\n\nis svc-a healthy?") {
		t.Fatalf("agent-a was prompted with %+v, want one prompt: the session header, then the message with its mention stripped", prompts)
	}

	// The agent process ran in its own directory under the state dir, with an
	// allowlisted environment.
	sessions := ctl.Sessions("agent-a")
	if len(sessions) != 1 {
		t.Fatalf("agent-a had %d sessions, want 1", len(sessions))
	}
	if want := filepath.Join(dir, ".zooid", "agents", "agent-a"); sessions[0].Cwd != want || sessions[0].Wd != want {
		t.Errorf("agent-a's session/new named %s and its process ran in %s, want its own directory %s for both", sessions[0].Cwd, sessions[0].Wd, want)
	}
	for _, kv := range sessions[0].Env {
		name, _, _ := strings.Cut(kv, "=")
		if name == "OPERATOR_ACCESS_TOKEN" || name == "E2E_UNLISTED" || name == "E2E_AS_TOKEN" || name == "E2E_HS_TOKEN" {
			t.Errorf("agent-a's environment carries the daemon's %s", kv)
		}
	}
	if !slices.Contains(sessions[0].Env, execEnv+"=1") {
		t.Errorf("agent-a's environment lacks its configured env %s=1: %q", execEnv, sessions[0].Env)
	}
}

// curl is a minimal client-server API caller: what an operator does by hand.
type curl struct {
	t    *testing.T
	base string
}

func (c *curl) try(method, path, token, body string) (map[string]any, int) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return out, resp.StatusCode
}

func (c *curl) do(method, path, token, body string) map[string]any {
	c.t.Helper()
	out, status := c.try(method, path, token, body)
	if status != http.StatusOK {
		c.t.Fatalf("%s %s: status %d: %v", method, path, status, out)
	}
	return out
}

// eventually waits up to 20 s for cond, asking every 50 ms.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll(t, 20*time.Second, 50*time.Millisecond, what, cond)
}

// poll asks cond every interval until it holds, and fails the test when it
// has not within timeout.
func poll(t *testing.T, timeout, interval time.Duration, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		case <-time.After(interval):
		}
	}
}

// boundPort binds a loopback port and returns its address and the socket,
// held until the test ends, to hand to a child process.
func boundPort(t *testing.T) (string, *os.File) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return ln.Addr().String(), f
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// lineWriter hands each line a process prints to a channel.
type lineWriter struct {
	buf   bytes.Buffer
	lines chan string
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf.Write(p)
	sc := bufio.NewScanner(bytes.NewReader(w.buf.Bytes()))
	consumed := 0
	for sc.Scan() {
		if consumed+len(sc.Bytes())+1 > w.buf.Len() {
			break // an unterminated last line waits for more
		}
		consumed += len(sc.Bytes()) + 1
		select {
		case w.lines <- sc.Text():
		default:
		}
	}
	w.buf.Next(consumed)
	return len(p), nil
}

// syncBuffer is a bytes.Buffer safe to write from a process's output copier
// while a test reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
