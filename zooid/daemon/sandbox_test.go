package daemon

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zooid-dev/zooid/zooid/acpagent"
	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/sandbox"
)

// TestSandboxSpecStartsTheAgentThroughTheWrapper: a local agent is started
// as `<bridge program> sandbox -- <its program, resolved> <args>`, with its
// own temp dir as TMPDIR and its policy in the wrapper's environment; the
// policy grants its working and temp directories, the bridge and its
// HOME, and reaches none of zooid.yaml, the token files, the state dir, the
// run dir, the trace dir or the other agent's directory, unless the
// agent's sandbox.read names that one. An agent with sandbox none and a
// docker agent are started as they are.
func TestSandboxSpecStartsTheAgentThroughTheWrapper(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	at := func(p string) string { return filepath.Join(base, p) }
	for _, dir := range []string{"state/agents/a", "state/tmp/a", "state/agents/b", "run/a", "trace", "home", "shared/b", "bin"} {
		if err := os.MkdirAll(at(dir), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"zooid.yaml", "hs_token", "bin/agent", "bin/zooid"} {
		if err := os.WriteFile(at(f), nil, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cfg := &config.Config{
		File: at("zooid.yaml"), SecretFiles: []string{at("hs_token")}, StateDir: at("state"),
		RunDir: at("run"), Trace: &config.Trace{Dir: at("trace")},
		Agents: []config.Agent{
			{Name: "a", Sandbox: &config.Sandbox{Mode: sandbox.Landlock}},
			{Name: "b", Dir: at("shared/b"), Sandbox: &config.Sandbox{Mode: sandbox.Landlock}},
			{Name: "sharing", Sandbox: &config.Sandbox{Mode: sandbox.Landlock, Read: []string{at("shared")}}},
			{Name: "open", Sandbox: &config.Sandbox{Mode: sandbox.None}},
			{Name: "boxed", Runtime: config.RuntimeDocker},
		},
	}
	d, err := New(Options{Config: cfg, BridgeCommand: []string{at("bin/zooid"), "mcp"}})
	if err != nil {
		t.Fatal(err)
	}
	spec := func(name string) acpagent.Spec {
		return acpagent.Spec{Command: "agent", Args: []string{"--acp"}, Dir: at("state/agents/" + name),
			Env: []string{"PATH=" + at("bin"), "HOME=" + at("home"), "TMPDIR=/tmp"}}
	}
	rt := d.agents["a"]
	rt.workDir, rt.tmpDir, rt.socket = at("state/agents/a"), at("state/tmp/a"), at("run/a/zooid.sock")
	got, err := d.sandboxSpec(rt, spec("a"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Command != at("bin/zooid") || !slices.Equal(got.Args, []string{"sandbox", "--", at("bin/agent"), "--acp"}) {
		t.Errorf("started as %s %q; want the bridge's program with sandbox -- the resolved agent", got.Command, got.Args)
	}
	if envValue(got.Env, "TMPDIR") != at("state/tmp/a") {
		t.Errorf("TMPDIR %q, want the agent's own temp dir", envValue(got.Env, "TMPDIR"))
	}
	var p sandbox.Policy
	if err := json.Unmarshal([]byte(envValue(got.Env, sandbox.Env)), &p); err != nil {
		t.Fatalf("the policy in the wrapper's environment: %v", err)
	}
	for _, want := range []string{at("state/agents/a"), at("state/tmp/a"), at("home")} {
		if !slices.Contains(p.Write, want) {
			t.Errorf("write %q lacks %s", p.Write, want)
		}
	}
	if !slices.Contains(p.Read, at("bin")) || !slices.Equal(p.Sockets, []string{at("run/a")}) {
		t.Errorf("read %q, sockets %q; want the agent's bin directory and its socket directory", p.Read, p.Sockets)
	}
	kept := []string{at("zooid.yaml"), at("hs_token"), at("state"), at("run"), at("trace"), at("shared/b")}
	for _, g := range slices.Concat(p.Read, p.Write, p.Devices, p.List) {
		for _, k := range kept {
			if g == k || strings.HasPrefix(g, k+"/") && !strings.HasPrefix(g, at("state/agents/a")) && !strings.HasPrefix(g, at("state/tmp/a")) || strings.HasPrefix(k, g+"/") {
				t.Errorf("the grant %s reaches %s", g, k)
			}
		}
	}

	sharing := d.agents["sharing"]
	sharing.workDir = at("state/agents/sharing")
	got, err = d.sandboxSpec(sharing, spec("sharing"))
	if err != nil {
		t.Fatal(err)
	}
	p = sandbox.Policy{}
	if err := json.Unmarshal([]byte(envValue(got.Env, sandbox.Env)), &p); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(p.Read, at("shared")) {
		t.Errorf("read %q: the directory its sandbox.read shares, b's inside it, is carved out", p.Read)
	}

	for _, name := range []string{"open", "boxed"} {
		s := spec(name)
		if got, err := d.sandboxSpec(d.agents[name], s); err != nil || got.Command != "agent" || envValue(got.Env, sandbox.Env) != "" {
			t.Errorf("%s: started as %s %q (err %v); want it as it is", name, got.Command, got.Args, err)
		}
	}
}
