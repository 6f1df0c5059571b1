package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zooid-dev/zooid/internal/testdeps"

	"github.com/zooid-dev/zooid/fakeagent"
	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/container"
)

// repoRoot is the module's root, from this package's directory.
const repoRoot = "../.."

// dockerEngine goes on when a Docker engine answers; without one the test
// follows internal/testdeps' rule: left out with one line, or failed under
// CI=true or ZOOID_TEST_DOCKER=1 (CI starts the engine first, with
// docker/engine.sh start, which needs root).
func dockerEngine(t *testing.T) {
	t.Helper()
	testdeps.Require(t, testdeps.DockerEngine)
}

// docker runs the docker CLI and returns its trimmed stdout.
func docker(t *testing.T, stdin io.Reader, args ...string) string {
	t.Helper()
	cmd := exec.Command("docker", args...)
	cmd.Stdin = stdin
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("docker %s: %v: %s", strings.Join(args, " "), err, errOut.String())
	}
	return strings.TrimSpace(out.String())
}

// buildStatic builds a package of this module as a static binary (CGO_ENABLED=0).
func buildStatic(t *testing.T, pkg, out string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-tags", "goolm", "-o", out, pkg)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building %s statically: %v\n%s", pkg, err, b)
	}
	if err := config.StaticExecutable(out); err != nil {
		t.Fatalf("%s: %v", pkg, err)
	}
}

// scratchImage imports an image holding only the static fake agent at
// /fake-agent (docker import: no registry, no base image) and removes it
// when the test ends.
func scratchImage(t *testing.T, agent string) string {
	t.Helper()
	data, err := os.ReadFile(agent)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "fake-agent", Mode: 0o755, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	tag := fmt.Sprintf("zooid-test-fake-agent:%d", time.Now().UnixNano())
	docker(t, &buf, "import", "--change", "LABEL dev.zooid.test=container_test", "-", tag)
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "--force", tag).Run() })
	return tag
}

// containersOf lists the containers (running or not) labelled with daemon.
func containersOf(t *testing.T, daemon string) []string {
	t.Helper()
	out := docker(t, nil, "ps", "--all", "--filter", "label="+container.LabelDaemon+"="+daemon, "--format", "{{.Names}}")
	return strings.Fields(out)
}

// mount is one line of /proc/self/mountinfo: the root of the mounted
// filesystem that appears, where, its options and type.
type mount struct{ root, point, opts, fstype string }

func parseMountinfo(t *testing.T, text string) []mount {
	t.Helper()
	var out []mount
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		// id parent major:minor root mount-point options [optional...] - fstype source super-options
		f := strings.Fields(sc.Text())
		sep := slices.Index(f, "-")
		if len(f) < 6 || sep < 6 || sep+1 >= len(f) {
			t.Fatalf("mountinfo line %q", sc.Text())
		}
		out = append(out, mount{root: unescapeMount(f[3]), point: unescapeMount(f[4]), opts: f[5], fstype: f[sep+1]})
	}
	return out
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, ...).
func unescapeMount(s string) string {
	r := strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`)
	return r.Replace(s)
}

// TestDockerRuntime runs agent-a in a container of a scratch image holding
// only the static scripted agent, with no network, and shows from inside:
// the Zooid tools work (a post made with zooid_send_message arrives as
// @agent-a), the host reaches in only through the agent's socket directory,
// the read-only bridge and its working directory, no token is in the
// container's environment or filesystem, agent-b's socket is out of reach;
// and outside: the container is gone when the session ends, and a container
// a SIGKILLed daemon left is removed when the daemon starts again.
func TestDockerRuntime(t *testing.T) {
	dockerEngine(t)
	dir := t.TempDir()
	bridge := filepath.Join(dir, "zooid-static")
	agentBin := filepath.Join(dir, "fake-agent-static")
	buildStatic(t, "./cmd/zooid", bridge)
	buildStatic(t, "./cmd/fake-agent", agentBin)
	image := scratchImage(t, agentBin)

	// agent-a's working directory is mounted at /work: its controller's
	// socket lives there, so the agent reaches it without a network or any
	// other mount.
	workA := filepath.Join(dir, "work-a")
	if err := os.Mkdir(workA, 0o700); err != nil {
		t.Fatal(err)
	}
	ctl, err := fakeagent.StartController(workA)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ctl.Close() })
	runDir := filepath.Join(dir, "run")
	socketB := filepath.Join(runDir, "agent-b", "zooid.sock")

	push, pushFile := boundPort(t)
	cfgPath := filepath.Join(dir, "zooid.yaml")
	writeFile(t, cfgPath, matrixYAML(push)+fmt.Sprintf(`run_dir: %s
agents:
  agent-a:
    runtime: docker
    container: { image: %s, bridge: %s, env: { IN_CONTAINER: "yes" } }
    dir: %s
    acp: { command: /fake-agent, args: [--control, /work/ctl.sock, --agent, agent-a, --linger] }
    matrix: { user_id: '@agent-a', rooms: ['#general'] }
  agent-b:
    acp: { command: /bin/false }
    matrix: { user_id: '@agent-b', rooms: ['#general'] }
`, runDir, image, bridge, workA))
	operatorToken := "syt_b3JpZ2luYWw_human_token"
	t.Setenv("OPERATOR_ACCESS_TOKEN", operatorToken)
	tokens := []string{e2eASToken, e2eHSToken, operatorToken}

	daemonID := container.Identity(filepath.Join(dir, ".zooid"))
	t.Cleanup(func() {
		// Whatever happened, no container of this test outlives it.
		if names := containersOf(t, daemonID); len(names) > 0 {
			_ = exec.Command("docker", append([]string{"rm", "--force"}, names...)...).Run()
		}
	})
	s := startStack(t, "", cfgPath, pushFile)

	ctl.Queue("agent-a", fakeagent.Turn{
		fakeagent.CallTool("zooid_send_message", map[string]any{"room": "#general", "text": "posted from inside a container"}),
		fakeagent.ReadFile("/proc/self/mountinfo"),
		fakeagent.ReadFile("/proc/self/environ"),
		fakeagent.Dial(config.ContainerSocketDir + "/zooid.sock"),
		fakeagent.Dial(socketB),
		fakeagent.Say("done in the container"),
	})
	first := s.mention("agent-a", "t1", "look around")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	results, err := ctl.WaitToolResults(ctx, "agent-a", 1)
	if err != nil {
		t.Fatalf("agent-a's tool call from its container: %v (MCP errors: %+v)", err, ctl.MCPErrors("agent-a"))
	}
	if r := results[0]; r.IsError || r.Err != "" {
		t.Fatalf("zooid_send_message from inside the container failed: %+v (MCP errors: %+v)", r, ctl.MCPErrors("agent-a"))
	}
	waitFor(t, "agent-a's tool post and its reply", func() bool {
		var tool, said bool
		for _, ev := range s.recent() {
			content, _ := ev["content"].(map[string]any)
			if ev["sender"] != "@agent-a:localhost" {
				continue
			}
			tool = tool || content["body"] == "posted from inside a container"
			said = said || content["body"] == "done in the container"
		}
		return tool && said
	})

	// What session/new named: the paths as the container sees them.
	sessions := ctl.Sessions("agent-a")
	if len(sessions) != 1 || sessions[0].Cwd != "/work" || len(sessions[0].McpServers) != 1 || sessions[0].McpServers[0].Stdio == nil {
		t.Fatalf("agent-a's sessions: %+v, want one with cwd /work and the zooid bridge", sessions)
	}
	if e := sessions[0].McpServers[0].Stdio; e.Command != config.ContainerBridge || !slices.Equal(e.Args, []string{"mcp", "--socket", config.ContainerSocketDir + "/zooid.sock"}) {
		t.Errorf("agent-a's bridge entry is %s %v, want %s mcp --socket %s/zooid.sock", e.Command, e.Args, config.ContainerBridge, config.ContainerSocketDir)
	}

	probes, err := ctl.WaitProbes(ctx, "agent-a", 4)
	if err != nil {
		t.Fatal(err)
	}
	mounts, environ, own, other := probes[0], probes[1], probes[2], probes[3]
	if mounts.Err != "" || environ.Err != "" {
		t.Fatalf("reading /proc/self inside the container: %+v %+v", mounts, environ)
	}
	names := containersOf(t, daemonID)
	if len(names) != 1 {
		t.Fatalf("containers of this daemon: %v, want agent-a's one", names)
	}
	cid := docker(t, nil, "inspect", "--format", "{{.Id}}", names[0])

	// The host reaches in through exactly three mounts. The rest is the
	// container's own: its image's root, the kernel's pseudo filesystems under
	// /proc, /sys and /dev, and the three files docker writes per container.
	sockDirA := filepath.Join(runDir, "agent-a")
	want := map[string]string{config.ContainerSocketDir: sockDirA, config.ContainerBridge: bridge, "/work": workA}
	seen := map[string]bool{}
	pseudo := []string{"proc", "sysfs", "tmpfs", "devpts", "mqueue", "cgroup", "cgroup2", "devtmpfs"}
	for _, m := range parseMountinfo(t, mounts.Out) {
		host, ours := want[m.point]
		switch {
		case ours:
			if !strings.HasSuffix(host, m.root) {
				t.Errorf("%s inside shows %s, want the host's %s", m.point, m.root, host)
			}
			if m.point == config.ContainerBridge && !slices.Contains(strings.Split(m.opts, ","), "ro") {
				t.Errorf("the bridge is mounted %s, want read-only", m.opts)
			}
			seen[m.point] = true
		case m.point == "/" && m.fstype == "overlay":
		case (m.point == "/proc" || strings.HasPrefix(m.point, "/proc/") || m.point == "/sys" || strings.HasPrefix(m.point, "/sys/") ||
			m.point == "/dev" || strings.HasPrefix(m.point, "/dev/")) && slices.Contains(pseudo, m.fstype):
		case slices.Contains([]string{"/etc/hosts", "/etc/hostname", "/etc/resolv.conf"}, m.point) && strings.Contains(m.root, "/containers/"+cid+"/"):
		default:
			t.Errorf("unexpected mount inside the container: %s from %s (%s)", m.point, m.root, m.fstype)
		}
	}
	for point := range want {
		if !seen[point] {
			t.Errorf("%s is not mounted inside the container; mountinfo:\n%s", point, mounts.Out)
		}
	}

	// The agent's own socket is there; agent-b's is not reachable.
	if own.Err != "" {
		t.Errorf("agent-a could not reach its own socket at %s: %s", own.Path, own.Err)
	}
	if !strings.Contains(other.Err, "no such file or directory") {
		t.Errorf("agent-a dialling agent-b's socket %s from its container: err %q, want no such file or directory", socketB, other.Err)
	}

	// No token in the environment (as the agent reads it, and as docker keeps it)...
	envInspect := docker(t, nil, "inspect", "--format", "{{json .Config.Env}}", names[0])
	if !strings.Contains(environ.Out, "IN_CONTAINER=yes") {
		t.Errorf("container.env did not reach the agent: %q", environ.Out)
	}
	for _, tok := range tokens {
		if strings.Contains(environ.Out, tok) || strings.Contains(envInspect, tok) {
			t.Errorf("a token (%s…) is in the container's environment", tok[:8])
		}
	}
	// ...nor in its filesystem: the container's own files (docker export)
	// and what the three mounts show.
	exp := exec.Command("docker", "export", names[0])
	tarOut, err := exp.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := exp.Start(); err != nil {
		t.Fatal(err)
	}
	files := 0
	tr := tar.NewReader(tarOut)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("reading docker export: %v", err)
		}
		data, _ := io.ReadAll(tr)
		files++
		for _, tok := range tokens {
			if bytes.Contains(data, []byte(tok)) {
				t.Errorf("the container's file %s holds a token (%s…)", h.Name, tok[:8])
			}
		}
	}
	if err := exp.Wait(); err != nil {
		t.Fatalf("docker export: %v", err)
	}
	if files == 0 {
		t.Fatal("docker export listed no files; the image holds /fake-agent")
	}
	for _, root := range []string{sockDirA, bridge, workA} {
		_ = filepath.Walk(root, func(path string, info os.FileInfo, err error) error {
			if err != nil || !info.Mode().IsRegular() {
				return nil
			}
			data, _ := os.ReadFile(path)
			for _, tok := range tokens {
				if bytes.Contains(data, []byte(tok)) {
					t.Errorf("%s, mounted into the container, holds a token (%s…)", path, tok[:8])
				}
			}
			return nil
		})
	}

	// The session ends (/clear in its thread): its container goes with it.
	s.send("dev.zooid.session_reset", "t2", fmt.Sprintf(`{"m.relates_to":{"rel_type":"m.thread","event_id":%q}}`, first))
	waitFor(t, "agent-a's container to be removed after /clear", func() bool { return len(containersOf(t, daemonID)) == 0 })

	// A new session starts a new container; the daemon is SIGKILLed and its
	// agent (which ignores the end of its input) keeps the container up.
	ctl.Queue("agent-a", fakeagent.Turn{fakeagent.Say("second session")})
	s.mention("agent-a", "t3", "again")
	if _, err := ctl.WaitPrompts(ctx, "agent-a", 2); err != nil {
		t.Fatal(err)
	}
	if names := containersOf(t, daemonID); len(names) != 1 {
		t.Fatalf("containers of this daemon during the second session: %v, want one", names)
	}
	if err := syscall.Kill(s.daemon.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = s.daemon.Wait()
	orphans := containersOf(t, daemonID)
	if len(orphans) != 1 {
		t.Fatalf("containers after the daemon was killed: %v, want the orphan still there (the fault did not happen)", orphans)
	}
	s.run(t)
	waitFor(t, "the restarted daemon to remove the orphan "+orphans[0], func() bool { return len(containersOf(t, daemonID)) == 0 })
}

// waitFor is eventually with room for a loaded machine: each docker command
// the daemon runs (inspect, rm) can take seconds there.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll(t, 2*time.Minute, 100*time.Millisecond, what, cond)
}
