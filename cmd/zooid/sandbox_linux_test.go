package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zooid-dev/zooid/fakeagent"
	"github.com/zooid-dev/zooid/internal/testdeps"
	"github.com/zooid-dev/zooid/zooid/sandbox"
	"github.com/zooid-dev/zooid/zooid/tools"
)

// TestAgentsOfTheDaemonsUidAreSandboxed runs the real `zooid run` with two
// agents of its own uid. Sandboxed (the default: their zooid.yaml names no
// sandbox type), agent-a itself tries to
// read zooid.yaml, the state dir and each file in it, the run dir, agent-b's
// working and temp directories; to write the cursor key; to connect to
// agent-b's socket; to ptrace and signal agent-b and the daemon: each is
// refused (another agent's socket from Landlock ABI 9, signals from ABI 6;
// before, the kernel cannot, and `zooid check` says so). Its own working and
// temp directories, its own socket and the system's files open; its Zooid
// tool works over the bridge it starts inside the sandbox; a script it
// writes into its working directory runs, using the system's programs. With
// `sandbox: none` every one of those reaches succeeds, so the test can fail.
func TestAgentsOfTheDaemonsUidAreSandboxed(t *testing.T) {
	testdeps.Require(t, testdeps.Landlock)
	for _, mode := range []string{sandbox.Landlock, sandbox.None} {
		t.Run(mode, func(t *testing.T) { sandboxedRun(t, mode) })
	}
}

// reachKind says what Landlock ABI refuses a reach: 0 for the files and
// ptrace (every ABI).
type reachKind struct {
	target string
	abi    int
}

func sandboxedRun(t *testing.T, mode string) {
	base, err := os.MkdirTemp("/tmp", "zsb-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctl := fakeagent.NewController(t)
	cfg := filepath.Join(base, "zooid.yaml")
	state := filepath.Join(base, ".zooid")
	run := filepath.Join(base, "run")
	push, pushFile := boundPort(t)
	// Sandboxed is the default: only none is said.
	typ := ""
	if mode == sandbox.None {
		typ = "type: none, "
	}
	agent := func(name string) string {
		args := fmt.Sprintf("[%q, %q, %q, %q, %q]", "fake-agent", "--control", ctl.Socket(), "--agent", name)
		// The controller's socket is test scaffolding the agents reach (a
		// kernel with Landlock ABI 9 guards unix sockets).
		return fmt.Sprintf(`  %s:
    acp: { command: %q, args: %s, env: { %s: "1" } }
    sandbox: { %swrite: [%q] }
    matrix:
      user_id: '@%s'
      rooms: ['#general']
`, name, self, args, execEnv, typ, filepath.Dir(ctl.Socket()), name)
	}
	writeFile(t, cfg, matrixYAML(push)+"run_dir: "+run+"\nagents:\n"+agent("agent-a")+agent("agent-b"))
	e2eEnv(t)

	ctl.Queue("agent-b", fakeagent.Turn{fakeagent.Say("here")})
	s := startStack(t, self, cfg, pushFile, "--log-level", "debug")
	s.mention("agent-b", "b1", "stay around")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sessionsB, err := ctl.WaitSessions(ctx, "agent-b", 1)
	if err != nil {
		t.Fatal(err)
	}
	pidB, daemon := sessionsB[0].Pid, s.daemon.Process.Pid

	work := filepath.Join(state, "agents", "agent-a")
	kept := []reachKind{
		{cfg, 0}, {state, 0}, {"write:" + filepath.Join(state, "cursor.key"), 0}, {run, 0},
		{filepath.Join(state, "agents", "agent-b"), 0},
		{filepath.Join(run, "agent-b", "zooid.sock"), 9},
		{fmt.Sprintf("ptrace:%d", pidB), 0}, {fmt.Sprintf("ptrace:%d", daemon), 0},
		{fmt.Sprintf("signal:%d", pidB), 6}, {fmt.Sprintf("signal:%d", daemon), 6},
	}
	for _, f := range []string{"cursor.key", "matrix/matrix.db", "tasks/tasks.db", "turns/turns.db"} {
		kept = append(kept, reachKind{filepath.Join(state, f), 0})
	}
	own := []string{work, "write:" + filepath.Join(work, "probe"), filepath.Join(run, "agent-a", "zooid.sock"), "/etc/passwd", "/usr/bin"}
	if mode == sandbox.Landlock {
		kept = append(kept, reachKind{filepath.Join(state, "tmp", "agent-b"), 0})
		own = append(own, "write:"+filepath.Join(state, "tmp", "agent-a", "probe"))
	}
	targets := append([]string(nil), own...)
	for _, k := range kept {
		targets = append(targets, k.target)
	}
	ctl.Queue("agent-a", fakeagent.Turn{
		fakeagent.CallTool(tools.GetRecentThreads, map[string]any{}),
		fakeagent.Reach(targets...),
		fakeagent.RunTool("/bin/sh", "-c", `printf '#!/bin/sh\nset -e\nls /usr/bin >/dev/null\necho made > "${TMPDIR:-/tmp}/tool-out-$$"\ncat "${TMPDIR:-/tmp}/tool-out-$$"\npwd\n' > ./tool.sh && chmod +x ./tool.sh && ./tool.sh`),
		fakeagent.Say("probed"),
	})
	s.mention("agent-a", "a1", "look around")

	results, err := ctl.WaitToolResults(ctx, "agent-a", 1)
	if err != nil {
		t.Fatal(err)
	}
	if r := results[0]; r.Err != "" || r.IsError {
		t.Errorf("agent-a's %s through its bridge failed: err %q, result %q", r.Tool, r.Err, r.Text)
	}
	reaches, err := ctl.WaitReaches(ctx, "agent-a", len(targets))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]fakeagent.ReachResult{}
	for _, r := range reaches {
		got[r.Path] = r
	}
	for _, target := range own {
		if r := got[target]; r.Err != "" {
			t.Errorf("%s: agent-a can't reach its own %s: %s", mode, target, r.Err)
		}
	}
	abi := sandbox.ABI()
	for _, k := range kept {
		r := got[k.target]
		switch {
		case mode == sandbox.None:
			if r.Err != "" && !(strings.HasPrefix(k.target, "ptrace:") && os.Geteuid() != 0) {
				t.Errorf("none: agent-a was refused %s (%s); without a sandbox it should reach it", k.target, r.Err)
			}
		case abi < k.abi:
			t.Logf("Landlock ABI %d does not hold agent-a from %s (ABI %d does): %s", abi, k.target, k.abi, orReached(r.Err))
		case !r.Refused():
			t.Errorf("sandboxed, agent-a reached %s: %s; want it refused (EACCES or EPERM)", k.target, orReached(r.Err))
		}
	}
	probes, err := ctl.WaitProbes(ctx, "agent-a", 1)
	if err != nil {
		t.Fatal(err)
	}
	if pr := probes[0]; pr.Err != "" || !strings.Contains(pr.Out, "made") || !strings.Contains(pr.Out, work) {
		t.Errorf("%s: agent-a's tool: err %q, output %q; want it to write and read its temp file and run in %s", mode, pr.Err, pr.Out, work)
	}
}

func orReached(err string) string {
	if err == "" {
		return "reached"
	}
	return err
}
