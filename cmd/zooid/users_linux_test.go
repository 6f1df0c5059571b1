package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zooid-dev/zooid/internal/childproc"
	"github.com/zooid-dev/zooid/internal/testdeps"

	"github.com/zooid-dev/zooid/zooid/handshake"

	"golang.org/x/sys/unix"

	"github.com/zooid-dev/zooid/fakeagent"
	"github.com/zooid-dev/zooid/zooid/tools"
	"github.com/zooid-dev/zooid/zooid/unixuser"
)

// requireUserTests lets through the tests that create unix users and run
// agents as them: they need root (to create users and switch to them) and
// useradd. Without root they follow internal/testdeps' rule: left out with
// one line for a developer, failed under CI=true or ZOOID_TEST_USERS=1.
func requireUserTests(t *testing.T) {
	t.Helper()
	testdeps.Require(t, testdeps.Root)
	if _, err := exec.LookPath("useradd"); err != nil {
		t.Fatalf("the per-agent user tests run as root but useradd is missing: %v", err)
	}
}

// addUser creates a system user (and its group) with a random name for the
// test and deletes it when the test ends, failed or not.
func addUser(t *testing.T, prefix string) unixuser.User {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := prefix + hex.EncodeToString(b)
	if out, err := exec.Command("useradd", "--system", "--no-create-home", "--user-group", "--shell", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
		t.Fatalf("useradd %s: %v: %s", name, err, out)
	}
	var uid uint32
	t.Cleanup(func() {
		// The daemon has killed its agents' process groups and waited for each
		// agent, but a child of an agent's that the kill reached is reaped by
		// init, which may not have happened yet: userdel refused with
		// "currently used by process" in a loaded CI run. What is still there
		// after a while outlived its daemon, and is named.
		if uid != 0 {
			if left := awaitNoProcessOf(uid, 10*time.Second); len(left) > 0 {
				t.Errorf("processes of the agent's user %s outlived the test: %s", name, strings.Join(left, "; "))
			}
		}
		if out, err := exec.Command("userdel", name).CombinedOutput(); err != nil {
			t.Errorf("userdel %s: %v: %s", name, err, out)
		}
	})
	u, err := unixuser.Resolve(name)
	if err != nil {
		t.Fatal(err)
	}
	uid = u.UID
	return u
}

// awaitNoProcessOf waits up to d until no process runs as uid, and returns
// those still there then (processesOf).
func awaitNoProcessOf(uid uint32, d time.Duration) []string {
	deadline := time.Now().Add(d)
	for {
		left := processesOf(uid)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// processesOf lists the processes running as uid (real or effective), each
// as its pid, state and command line.
func processesOf(uid uint32) []string {
	all, err := childproc.Processes()
	if err != nil {
		return []string{err.Error()}
	}
	var out []string
	for _, p := range all {
		if r, e, err := childproc.Owner(p.PID); err == nil && (r == uid || e == uid) {
			out = append(out, fmt.Sprintf("%d (%s) %s", p.PID, p.State, childproc.Cmdline(p.PID)))
		}
	}
	return out
}

// usersWorld is a directory tree as an operator would lay it out for agents
// with users of their own: the base searchable (0711), the zooid binary
// (a copy of this test binary) where every user may run it, zooid.yaml 0600.
type usersWorld struct {
	base, exe, cfg, state, run string
}

func newUsersWorld(t *testing.T) usersWorld {
	t.Helper()
	base, err := os.MkdirTemp("/tmp", "zu-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	must(t, os.Chmod(base, 0o711))
	bin := filepath.Join(base, "bin")
	must(t, os.Mkdir(bin, 0o755))
	must(t, os.Chmod(bin, 0o755))
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(bin, "zooid")
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	must(t, os.WriteFile(exe, data, 0o755))
	return usersWorld{base: base, exe: exe, cfg: filepath.Join(base, "zooid.yaml"), state: filepath.Join(base, ".zooid"), run: filepath.Join(base, "run")}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// runAs runs the world's zooid binary with args as cred (nil: as root) and
// returns its exit code and output (stdout, then stderr).
func (w usersWorld) runAs(t *testing.T, cred *syscall.Credential, env []string, args ...string) (int, string) {
	t.Helper()
	code, stdout, stderr := w.runAs3(t, cred, env, args...)
	return code, stdout + stderr
}

func (w usersWorld) runAs3(t *testing.T, cred *syscall.Credential, env []string, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, w.exe, args...)
	cmd.Env = append(append(os.Environ(), execEnv+"=1"), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	cmd.Stdin = strings.NewReader("")
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running zooid %v: %v", args, err)
	}
	return code, out.String(), errb.String()
}

// procIDs reads the Uid, Gid and Groups lines of /proc/<pid>/status.
func procIDs(t *testing.T, pid int) (uids, gids, groups string) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("agent process %d: %v", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, _ := strings.Cut(line, ":")
		switch k {
		case "Uid":
			uids = strings.Join(strings.Fields(v), " ")
		case "Gid":
			gids = strings.Join(strings.Fields(v), " ")
		case "Groups":
			groups = strings.Join(strings.Fields(v), " ")
		}
	}
	return uids, gids, groups
}

// TestAgentsRunAsTheirOwnUsers: the daemon (root) starts agent-a and
// agent-b as two users created for the test. Each agent process runs as
// exactly its user and group, with no supplementary group of the daemon; its
// tools work over its own socket; from inside it, zooid.yaml, the state dir
// and a file in it, and the other agent's socket all fail with EACCES, while
// its own socket and working directory open; a file every user may read,
// outside what the sandbox grants, fails too (the sandbox holds under user:
// as well: without it, that open succeeds and the test fails). agent-a's binding copied into
// a process of another uid (root, agent-b's user, and agent-a's own user
// outside its process tree) is refused or can't even connect, and agent-b's
// user can't read agent-a's process environment or memory. An HTTP-bound
// agent-c (agent-b's user) can't read zooid.yaml or the state dir either.
func TestAgentsRunAsTheirOwnUsers(t *testing.T) {
	requireUserTests(t)
	userA := addUser(t, "zta")
	userB := addUser(t, "ztb")
	w := newUsersWorld(t)

	ctlDir := filepath.Join(w.base, "ctl")
	must(t, os.Mkdir(ctlDir, 0o711))
	ctl, err := fakeagent.StartController(ctlDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctl.Close() })
	// The controller is test scaffolding both agents' users must reach.
	must(t, os.Chmod(ctl.Socket(), 0o666))

	// A file every user may read, outside what the sandbox grants: unix
	// permissions let each agent's user open it, its sandbox (applied under
	// user: too) does not.
	pub, err := os.MkdirTemp("/tmp", "zpub-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(pub) })
	must(t, os.Chmod(pub, 0o755))
	public := filepath.Join(pub, "public.txt")
	must(t, os.WriteFile(public, []byte("readable by all"), 0o644))
	must(t, os.Chmod(public, 0o644))

	sockA := filepath.Join(w.run, "agent-a", "zooid.sock")
	sockB := filepath.Join(w.run, "agent-b", "zooid.sock")
	workA := filepath.Join(w.state, "agents", "agent-a")
	workB := filepath.Join(w.state, "agents", "agent-b")
	turn := func(own, other, work string) fakeagent.Turn {
		return fakeagent.Turn{
			fakeagent.CallTool(tools.GetRecentThreads, map[string]any{}),
			fakeagent.Reach(w.cfg, w.state, filepath.Join(w.state, "cursor.key"), other, own, work, public),
			fakeagent.Say("probed"),
		}
	}
	ctl.Queue("agent-a", turn(sockA, sockB, workA))
	ctl.Queue("agent-b", turn(sockB, sockA, workB))

	workC := filepath.Join(w.state, "agents", "agent-c")
	ctl.Queue("agent-c", fakeagent.Turn{fakeagent.Reach(w.cfg, w.state, workC), fakeagent.Say("probed")})

	push, pushFile := boundPort(t)
	// The HTTP transport binds its own port: one free a moment ago.
	httpPort := func() int {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().(*net.TCPAddr).Port
	}()
	agent := func(name string, u unixuser.User) string {
		args := fmt.Sprintf("[%q, %q, %q, %q, %q]", "fake-agent", "--control", ctl.Socket(), "--agent", name)
		return fmt.Sprintf(`  %s:
    user: %s
    acp: { command: %q, args: %s, env: { %s: "1" } }
    matrix:
      user_id: '@%s'
      rooms: ['#general']
`, name, u.Name, w.exe, args, execEnv, name)
	}
	writeFile(t, w.cfg, matrixYAML(push)+fmt.Sprintf(`  http:
    port: %d
run_dir: %s
agents:
%s%s  agent-c:
    user: %s
    acp: { command: %q, args: [fake-agent, --control, %q, --agent, agent-c], env: { %s: "1" } }
    http: {}
`, httpPort, w.run, agent("agent-a", userA), agent("agent-b", userB), userB.Name, w.exe, ctl.Socket(), execEnv))
	e2eEnv(t)
	if code, out := w.runAs(t, nil, nil, "check", "--config", w.cfg); code != 0 {
		t.Fatalf("zooid check refused the world's config (exit %d):\n%s", code, out)
	}
	s := startStack(t, w.exe, w.cfg, pushFile, "--log-level", "debug")
	for i, name := range []string{"agent-a", "agent-b"} {
		s.mention(name, fmt.Sprintf("u%d", i), "look around")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	check := func(name string, u unixuser.User, own, other, work string) {
		sessions, err := ctl.WaitSessions(ctx, name, 1)
		if err != nil {
			t.Fatal(err)
		}
		uids, gids, groups := procIDs(t, sessions[0].Pid)
		wantU, wantG := strings.Repeat(strconv.Itoa(int(u.UID))+" ", 4), strings.Repeat(strconv.Itoa(int(u.GID))+" ", 4)
		if uids != strings.TrimSpace(wantU) || gids != strings.TrimSpace(wantG) || groups != "" {
			t.Errorf("%s's process %d runs as Uid %q Gid %q Groups %q; want uid %d and gid %d throughout and no supplementary groups", name, sessions[0].Pid, uids, gids, groups, u.UID, u.GID)
		}
		results, err := ctl.WaitToolResults(ctx, name, 1)
		if err != nil {
			t.Fatal(err)
		}
		if r := results[0]; r.Err != "" || r.IsError {
			t.Errorf("%s's %s over its own socket failed: err %q, result %q", name, r.Tool, r.Err, r.Text)
		}
		reaches, err := ctl.WaitReaches(ctx, name, 7)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range reaches {
			switch r.Path {
			case own, work:
				if r.Err != "" {
					t.Errorf("%s can't reach its own %s: %s", name, r.Path, r.Err)
				}
			default:
				if !r.EACCES {
					t.Errorf("%s reaching %s: got err %q, want permission denied (EACCES)", name, r.Path, r.Err)
				}
			}
		}
		if len(reaches) != 7 {
			t.Errorf("%s made %d reach attempts, want 7: %+v", name, len(reaches), reaches)
		}
	}
	check("agent-a", userA, sockA, sockB, workA)
	check("agent-b", userB, sockB, sockA, workB)

	// An HTTP-bound agent runs as its user too: it opens its own working
	// directory, and zooid.yaml and the state dir are out of its reach.
	resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/agents/agent-c/sessions", httpPort), "application/json", strings.NewReader(`{"prompt":"look around"}`))
	if err != nil {
		t.Fatal(err)
	}
	stream, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(stream), "event: done") {
		t.Fatalf("HTTP session of agent-c: status %d, stream %q", resp.StatusCode, stream)
	}
	reaches, err := ctl.WaitReaches(ctx, "agent-c", 3)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reaches {
		if (r.Path == workC) != (r.Err == "") || (r.Path != workC && !r.EACCES) {
			t.Errorf("HTTP-bound agent-c reaching %s: err %q; want its own working directory to open and the rest to fail with EACCES", r.Path, r.Err)
		}
	}
	if t.Failed() {
		return
	}

	// agent-b's user can't read agent-a's process environment (where the
	// bridge's binding lives) or memory: that needs ptrace access to it.
	sessions := ctl.Sessions("agent-a")
	for _, f := range []string{"environ", "mem"} {
		path := fmt.Sprintf("/proc/%d/%s", sessions[0].Pid, f)
		cmd := exec.Command("head", "-c", "1", path)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: userB.Credential()}
		if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "Permission denied") {
			t.Errorf("agent-b's user reading %s (agent-a's process): err %v, output %q; want permission denied", path, err, out)
		}
	}

	// agent-a's binding, copied into processes outside its tree.
	var binding string
	for _, m := range sessions[0].McpServers {
		if m.Stdio != nil {
			for _, e := range m.Stdio.Env {
				if e.Name == handshake.BindingEnv {
					binding = e.Value
				}
			}
		}
	}
	if binding == "" {
		t.Fatalf("agent-a's session/new carried no %s: %+v", handshake.BindingEnv, sessions[0].McpServers)
	}
	copied := []string{handshake.BindingEnv + "=" + binding}
	for _, c := range []struct {
		who  string
		cred *syscall.Credential
		want string
	}{
		{"root (another uid, which may connect to any socket)", nil, handshake.RefusedMessage},
		{"agent-a's own user, outside its process tree", userA.Credential(), handshake.RefusedMessage},
		{"agent-b's user", userB.Credential(), "permission denied"},
	} {
		code, out := w.runAs(t, c.cred, copied, "mcp", "--socket", sockA)
		if code == 0 || !strings.Contains(out, c.want) {
			t.Errorf("zooid mcp with agent-a's copied binding as %s: exit %d, output %q; want a failure saying %q", c.who, code, out, c.want)
		}
	}
}

// TestCheckRefusesWhatPerAgentUsersCantHold: zooid check (and run, through
// the same config.Load) refuses an agent user that doesn't exist or is root,
// a daemon that may not switch users, and a config, token file or state dir
// the agent's user could read, each with the path and the fix.
func TestCheckRefusesWhatPerAgentUsersCantHold(t *testing.T) {
	requireUserTests(t)
	userA := addUser(t, "zta")
	userB := addUser(t, "ztb")
	w := newUsersWorld(t)
	tokenFile := filepath.Join(w.base, "as.token")
	must(t, os.WriteFile(tokenFile, []byte("e2e-as-token-0123456789\n"), 0o600))
	config := func(user string) string {
		return fmt.Sprintf(`transports:
  matrix:
    homeserver: http://127.0.0.1:1
    server_name: localhost
    as_token_file: %s
    hs_token: e2e-hs-token-0123456789
agents:
  agent-a:
    user: %s
    acp: { command: /bin/true }
    matrix: { user_id: '@agent-a', rooms: ['#general'] }
`, tokenFile, user)
	}
	writeFile(t, w.cfg, config(userA.Name))
	check := func(t *testing.T, cred *syscall.Credential, want string) {
		t.Helper()
		code, out := w.runAs(t, cred, nil, "check", "--config", w.cfg)
		switch {
		case want == "" && code != 0:
			t.Fatalf("zooid check refused (exit %d):\n%s", code, out)
		case want != "" && (code != 1 || !strings.Contains(out, want)):
			t.Fatalf("zooid check: exit %d, output:\n%s\nwant exit 1 and %q", code, out, want)
		}
	}
	check(t, nil, "")

	t.Run("config readable by the agent's user", func(t *testing.T) {
		must(t, os.Chmod(w.cfg, 0o644))
		defer os.Chmod(w.cfg, 0o600)
		want := fmt.Sprintf("agents.agent-a.user: %s: can read the config %s, which holds the daemon's tokens or where they come from: chmod 600 it", userA, w.cfg)
		check(t, nil, want)
		// run refuses it the same way, before starting anything.
		code, out := w.runAs(t, nil, nil, "run", "--config", w.cfg)
		if code == 0 || !strings.Contains(out, want) {
			t.Fatalf("zooid run: exit %d, output:\n%s\nwant a refusal with %q", code, out, want)
		}
	})
	t.Run("token file readable by the agent's user", func(t *testing.T) {
		must(t, os.Chmod(tokenFile, 0o644))
		defer os.Chmod(tokenFile, 0o600)
		check(t, nil, fmt.Sprintf("transports.matrix.as_token_file: %s can read the token file %s (the agent of agent-a runs as that user): chmod 600 it", userA, tokenFile))
	})
	t.Run("state dir listable by the agent's user", func(t *testing.T) {
		must(t, os.Mkdir(w.state, 0o755))
		defer os.RemoveAll(w.state)
		must(t, os.Chmod(w.state, 0o755))
		check(t, nil, fmt.Sprintf("can list the state dir %s: chmod 711 it", w.state))
	})
	t.Run("a file in the state dir readable by the agent's user", func(t *testing.T) {
		must(t, os.Mkdir(w.state, 0o711))
		defer os.RemoveAll(w.state)
		must(t, os.Chmod(w.state, 0o711))
		leak := filepath.Join(w.state, "cursor.key")
		must(t, os.WriteFile(leak, []byte("k"), 0o644))
		must(t, os.Chmod(leak, 0o644))
		check(t, nil, fmt.Sprintf("can reach %s in the state dir: chmod go-rwx it", leak))
	})
	t.Run("trace dir reachable by the agent's user", func(t *testing.T) {
		traceDir := filepath.Join(w.base, "trace")
		must(t, os.Mkdir(traceDir, 0o755))
		defer os.RemoveAll(traceDir)
		must(t, os.Chmod(traceDir, 0o755))
		writeFile(t, w.cfg, config(userA.Name)+"trace: { dir: "+traceDir+" }\n")
		defer writeFile(t, w.cfg, config(userA.Name))
		check(t, nil, fmt.Sprintf("can reach the trace dir %s, which holds every room's messages: chmod 700 it", traceDir))
	})
	t.Run("working dir out of the agent user's reach", func(t *testing.T) {
		must(t, os.Chmod(w.base, 0o700))
		defer os.Chmod(w.base, 0o711)
		check(t, nil, fmt.Sprintf("can't reach its working directory under the state dir %s: %s must exist and be searchable for that user", w.state, w.base))
	})
	t.Run("run dir out of the agent user's reach", func(t *testing.T) {
		private := filepath.Join(w.base, "private")
		must(t, os.Mkdir(private, 0o700))
		defer os.RemoveAll(private)
		writeFile(t, w.cfg, config(userA.Name)+"run_dir: "+filepath.Join(private, "run")+"\n")
		defer writeFile(t, w.cfg, config(userA.Name))
		check(t, nil, fmt.Sprintf("can't reach its socket in run dir %s: %s must exist and be searchable for that user", filepath.Join(private, "run"), private))
	})
	t.Run("a configured dir out of the agent user's reach", func(t *testing.T) {
		private := filepath.Join(w.base, "private")
		must(t, os.MkdirAll(filepath.Join(private, "work"), 0o700))
		defer os.RemoveAll(private)
		writeFile(t, w.cfg, strings.Replace(config(userA.Name), "    user: ", "    dir: "+filepath.Join(private, "work")+"\n    user: ", 1))
		defer writeFile(t, w.cfg, config(userA.Name))
		check(t, nil, fmt.Sprintf("can't reach its working directory %s: make it (and its parents) searchable for that user", filepath.Join(private, "work")))
	})
	t.Run("the zooid binary out of the agent user's reach", func(t *testing.T) {
		bin := filepath.Dir(w.exe)
		must(t, os.Chmod(bin, 0o700))
		defer os.Chmod(bin, 0o755)
		check(t, nil, fmt.Sprintf("can't run %s, the zooid binary its agent starts as its Zooid MCP bridge", w.exe))
	})
	t.Run("unknown user", func(t *testing.T) {
		writeFile(t, w.cfg, config("zooid-no-such-user"))
		defer writeFile(t, w.cfg, config(userA.Name))
		check(t, nil, `agents.agent-a.user: no user named "zooid-no-such-user" on this machine: create it`)
	})
	t.Run("root", func(t *testing.T) {
		writeFile(t, w.cfg, config("root"))
		defer writeFile(t, w.cfg, config(userA.Name))
		check(t, nil, "agents.agent-a.user: root (uid 0) is root, which can read everything the daemon keeps from agents")
	})
	t.Run("a daemon of its own user holding the capabilities", func(t *testing.T) {
		// agent-b's user as the daemon, with CAP_SETUID, CAP_SETGID,
		// CAP_CHOWN and CAP_KILL as ambient capabilities (what systemd's
		// AmbientCapabilities= gives): the config and token are its own
		// (0600), and agent-a's user still can't read them.
		for _, p := range []string{w.cfg, tokenFile} {
			must(t, os.Chown(p, int(userB.UID), int(userB.GID)))
			defer os.Chown(p, 0, 0)
		}
		cmd := exec.Command(w.exe, "check", "--config", w.cfg)
		cmd.Env = append(os.Environ(), execEnv+"=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Credential:  userB.Credential(),
			AmbientCaps: []uintptr{unix.CAP_SETUID, unix.CAP_SETGID, unix.CAP_CHOWN, unix.CAP_KILL},
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("zooid check as %s with the four capabilities: %v\n%s", userB, err, out)
		}
	})
	t.Run("the daemon's own user", func(t *testing.T) {
		// agent-b's user as the daemon, naming itself as agent-a's user: that
		// user can read zooid.yaml and the state dir, so it is refused.
		writeFile(t, w.cfg, config(userB.Name))
		defer writeFile(t, w.cfg, config(userA.Name))
		for _, p := range []string{w.cfg, tokenFile} {
			must(t, os.Chown(p, int(userB.UID), int(userB.GID)))
			defer os.Chown(p, 0, 0)
		}
		check(t, userB.Credential(), fmt.Sprintf("agents.agent-a.user: %s is the daemon's own user, which can read zooid.yaml and the state dir: give the agent a user of its own", userB))
	})
	t.Run("a daemon that may not switch users", func(t *testing.T) {
		// Run as agent-b's user, which holds no capability; it must be able
		// to read the config to judge it at all.
		must(t, os.Chmod(w.cfg, 0o644))
		defer os.Chmod(w.cfg, 0o600)
		must(t, os.Chmod(tokenFile, 0o644))
		defer os.Chmod(tokenFile, 0o600)
		check(t, userB.Credential(), fmt.Sprintf("agents.agent-a.user: the daemon (uid %d) lacks CAP_SETUID, CAP_SETGID, CAP_CHOWN, CAP_KILL, so it can't start an agent as another user: run zooid as root", userB.UID))
	})
}
