package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/sandbox"
)

func TestCheckCommand(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	const base = `transports:
  matrix:
    homeserver: http://127.0.0.1:8008
    server_name: example.org
    as_token: as-0123456789abcdef
    hs_token: hs-0123456789abcdef
agents:
  agent-a:
    acp: { preset: claude }
    matrix:
      user_id: '@agent-a'
      rooms: ['#general']
`
	// The preset's adapter is installed: the check has nothing to warn of.
	fakeAdapter(t, "claude-agent-acp")
	if err := os.WriteFile(good, []byte(base+"      trigger: mention\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(base+"      trigger: all\n  Bad: {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errb strings.Builder
	if code := dispatch([]string{"check", "--config", good}, &out, &errb); code != 0 {
		t.Fatalf("good config: exit %d, stderr %s", code, errb.String())
	}
	if !strings.HasPrefix(out.String(), "ok: 1 agents, 1 transports\nsandbox: ") || !strings.Contains(out.String(), "\n  agent-a: landlock") {
		t.Fatalf("stdout %q", out.String())
	}
	out.Reset()
	errb.Reset()
	if code := dispatch([]string{"check", "--config", bad}, &out, &errb); code != 1 {
		t.Fatalf("bad config: exit %d", code)
	}
	want := bad + `:13: agents.agent-a.matrix.trigger: must be "mention" or "any", got "all"`
	if !strings.Contains(errb.String(), want) || !strings.Contains(errb.String(), bad+":14: agents.Bad:") || out.Len() != 0 {
		t.Fatalf("stderr %q, want it to contain %q and the agents.Bad errors", errb.String(), want)
	}
}

// fakeAdapter puts an executable named name on a PATH of its own, the only
// PATH the test process has, and returns its directory.
func fakeAdapter(t *testing.T, name string) string {
	t.Helper()
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	return bin
}

// TestCheckWarnsOfWhatStartUpWillMeet: a config zooid run accepts may still fail at the
// first mention (the agent's program is not where the agent looks) or at start (the
// registration the homeserver holds does not match). check says so, with the fix, and exits
// 0 unless --strict; before, it said "ok" and the operator learned it from the first mention.
func TestCheckWarnsOfWhatStartUpWillMeet(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("CHECK_HS_TOKEN", "hs-0123456789abcdef")
	agentBin := t.TempDir()
	if err := os.WriteFile(filepath.Join(agentBin, "codex-acp"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", t.TempDir()) // the daemon's PATH holds no adapter
	cfg := func(rooms string) string {
		return `transports:
  matrix:
    homeserver: http://127.0.0.1:8008
    server_name: example.org
    as_token: as-0123456789abcdef
    hs_token: ${CHECK_HS_TOKEN}
    listen: 127.0.0.1:9000
agents:
  helper:
    acp: { preset: claude }
    matrix: { user_id: '@helper', rooms: ` + rooms + ` }
  coder:
    # On the PATH the agent gets, though not on the daemon's: found as the agent will.
    acp: { preset: codex, env: { PATH: ` + agentBin + ` } }
    matrix: { user_id: '@coder', rooms: ['#general'] }
`
	}
	path := filepath.Join(dir, "zooid.yaml")
	writeFile(t, path, cfg("['#general']"))
	var reg strings.Builder
	if code := dispatch([]string{"registration", "--config", path}, &reg, io.Discard); code != 0 {
		t.Fatalf("zooid registration: exit %d", code)
	}
	writeFile(t, filepath.Join(dir, "registration.yaml"), reg.String())

	// The registration beside the config matches: only the missing adapter is warned of.
	var out, errb strings.Builder
	if code := dispatch([]string{"check", "--config", path}, &out, &errb); code != 0 {
		t.Fatalf("check: exit %d: %s", code, errb.String())
	}
	wantOut := "ok: 2 agents, 1 transports (1 warning); compared with the registration " + filepath.Join(dir, "registration.yaml") + "\n"
	wantErr := path + ": warning: agents.helper.acp: preset claude starts claude-agent-acp, which is not on the agent's PATH (" + os.Getenv("PATH") +
		"): every mention of helper would answer that it could not be started; install the adapter (npm install -g @zed-industries/claude-agent-acp), " +
		"or put its directory first on the agent's PATH with acp.env PATH\n"
	if first, _, _ := strings.Cut(out.String(), "\n"); first+"\n" != wantOut || errb.String() != wantErr {
		t.Fatalf("check\nstdout %q\nwant   %q\nstderr %q\nwant   %q", out.String(), wantOut, errb.String(), wantErr)
	}

	// The operator binds helper to a new room, renames an agent's user and changes the
	// hs_token, but installs no new registration: each mismatch is named with the fix.
	writeFile(t, path, strings.Replace(cfg("['#general', '#ops2']"), "'@coder'", "'@coder2'", 1))
	t.Setenv("CHECK_HS_TOKEN", "hs-another-0123456789")
	out.Reset()
	errb.Reset()
	if code := dispatch([]string{"check", "--strict", "--config", path}, &out, &errb); code != 1 {
		t.Fatalf("check --strict with warnings: exit %d, want 1: %s", code, errb.String())
	}
	fix := "regenerate it (zooid registration --config " + path + " > " + filepath.Join(dir, "registration.yaml") + "), install it on the homeserver and restart the homeserver"
	for _, want := range []string{
		"its hs_token differs from the matrix transport's hs_token ${CHECK_HS_TOKEN} (the daemon refuses the homeserver's pushes); " + fix,
		"its user namespaces do not hold agent coder's user @coder2:example.org (start-up stops: registering it is refused with M_EXCLUSIVE); " + fix,
		"its alias namespaces do not hold #ops2:example.org (if the room does not exist yet, the daemon may not create it and that room is not served); " + fix,
		"zooid check: start-up would meet the warnings above",
	} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("check's warnings lack %q:\n%s", want, errb.String())
		}
	}
	if strings.Contains(errb.String(), "hs-another-0123456789") || strings.Contains(errb.String(), "hs-0123456789abcdef") {
		t.Errorf("a token was printed:\n%s", errb.String())
	}
	if !strings.HasPrefix(out.String(), "ok: 2 agents, 1 transports (4 warnings)") {
		t.Errorf("stdout %q", out.String())
	}
}

// TestCheckSaysWhatAgentsAreHeldTo: check prints, per agent, what its
// sandbox holds it to on a kernel of the given Landlock ABI and what that
// kernel cannot: nothing on a kernel without Landlock, TCP only from ABI 4
// and only for an agent with ports, unix sockets only from ABI 9; an agent
// with sandbox none and a docker agent are named for what they are.
func TestCheckSaysWhatAgentsAreHeldTo(t *testing.T) {
	cfg := &config.Config{Agents: []config.Agent{
		{Name: "plain", Sandbox: &config.Sandbox{Mode: sandbox.Landlock}},
		{Name: "ports", Sandbox: &config.Sandbox{Mode: sandbox.Landlock, Connect: sandbox.Ports{443}}},
		{Name: "open", Sandbox: &config.Sandbox{Mode: sandbox.None}},
		{Name: "boxed", Runtime: config.RuntimeDocker},
	}}
	for _, c := range []struct {
		abi int
		// want holds, per line (the header, then an agent's), pieces it
		// must contain; not, pieces it must not.
		want, not [][]string
	}{
		{0, [][]string{{"no Landlock"}, {"plain: landlock, but held to nothing here", "not held to, on this kernel: files"}, {"ports: landlock, but held to nothing here", "TCP limited to its sandbox's ports (Landlock ABI 4)"}},
			[][]string{nil, {"TCP"}, nil}},
		{7, [][]string{{"Landlock ABI 7 (ABI 9 holds agents to all of it)"}, {"plain: landlock: held to files", "signals to the daemon and other agents refused", "not held to, on this kernel: connecting to unix sockets other than its own refused"}, {"held to files", "TCP limited"}},
			[][]string{nil, {"TCP"}, {"(Landlock ABI 4)"}}},
		{9, [][]string{{"Landlock ABI 9"}, {"plain: landlock: held to files", "unix sockets other than its own refused"}, {"TCP limited"}},
			[][]string{nil, {"not held to"}, {"not held to"}}},
	} {
		lines := sandboxReport(cfg, c.abi)
		if len(lines) != 5 || !strings.Contains(lines[3], "open: sandbox none: it can read and write everything its user can") ||
			!strings.Contains(lines[4], "boxed: runtime docker: its container is its sandbox") {
			t.Errorf("ABI %d: report %q; want a header and a line per agent", c.abi, lines)
			continue
		}
		for i, pieces := range c.want {
			for _, w := range pieces {
				if !strings.Contains(lines[i], w) {
					t.Errorf("ABI %d: %q lacks %q", c.abi, lines[i], w)
				}
			}
			for _, n := range c.not[i] {
				if strings.Contains(lines[i], n) {
					t.Errorf("ABI %d: %q says %q", c.abi, lines[i], n)
				}
			}
		}
	}
}
