package daemon

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/unixuser"
)

func TestAgentEnvIsAnAllowlistPlusWhatTheConfigNames(t *testing.T) {
	daemonEnv := []string{
		"PATH=/usr/bin", "HOME=/home/op", "LC_ALL=C.UTF-8", "TERM=xterm",
		"OPERATOR_ACCESS_TOKEN=syt_human_token", // a human's token in the operator's shell
		"AWS_SECRET_ACCESS_KEY=cloud",
		"ANTHROPIC_API_KEY=agent-needs-this",
		"MODE=from-daemon",
		"STALE=carries-as-secret-0123456789-inside", // a token the config did not see
	}
	acp := config.ACP{
		Env:        map[string]string{"MODE": "fast"},
		InheritEnv: []string{"ANTHROPIC_API_KEY", "STALE"},
	}
	got := buildEnv(daemonEnv, []string{"as-secret-0123456789"}, acp)
	want := []string{"PATH=/usr/bin", "HOME=/home/op", "LC_ALL=C.UTF-8", "TERM=xterm", "ANTHROPIC_API_KEY=agent-needs-this", "MODE=fast"}
	if !slices.Equal(got, want) {
		t.Fatalf("agent env\n got %q\nwant %q", got, want)
	}
}

func TestAgentProcessGetsNoVariableOutsideTheAllowlist(t *testing.T) {
	t.Setenv("OPERATOR_ACCESS_TOKEN", "syt_human_token_0123456789")
	t.Setenv("ZOOID_INHERITED", "yes")
	t.Setenv("PATH", "/usr/bin:/bin")
	cmd := exec.Command("env")
	cmd.Env = agentEnv(nil, config.ACP{InheritEnv: []string{"ZOOID_INHERITED"}})
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("running env as the agent would: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, "OPERATOR_ACCESS_TOKEN=") }) {
		t.Fatalf("the operator's token reached the agent process:\n%s", out)
	}
	for _, want := range []string{"ZOOID_INHERITED=yes", "PATH=/usr/bin:/bin"} {
		if !slices.Contains(lines, want) {
			t.Fatalf("agent process lacks %s:\n%s", want, out)
		}
	}
}

func TestDefaultWorkDirIsTheAgentsOwnUnderTheStateDir(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state")
	d := &Daemon{opts: Options{Config: &config.Config{StateDir: state}}}
	dir, err := d.workDir(config.Agent{Name: "agent-a"})
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(state, "agents", "agent-a"); dir != want {
		t.Fatalf("work dir %s, want %s", dir, want)
	}
	st, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o700 {
		t.Fatalf("work dir mode %v, want 0700", st.Mode())
	}
}

// TestAnAgentUserGetsItsOwnHomeAndName: an agent with a user of its own gets
// that user's HOME, USER and LOGNAME instead of the daemon's; without a
// passwd entry, HOME is its working directory and USER/LOGNAME are dropped
// rather than left as the daemon's; acp.env still wins.
func TestAnAgentUserGetsItsOwnHomeAndName(t *testing.T) {
	t.Setenv("HOME", "/root")
	t.Setenv("USER", "root")
	t.Setenv("LOGNAME", "root")
	val := func(env []string, name string) (string, bool) {
		for _, kv := range env {
			if k, v, _ := strings.Cut(kv, "="); k == name {
				return v, true
			}
		}
		return "", false
	}
	named := config.Agent{User: &unixuser.User{Name: "zooid-a", UID: 1001, GID: 1001, Home: "/home/zooid-a"}}
	env := agentEnvFor(nil, named, "/state/agents/a")
	for name, want := range map[string]string{"HOME": "/home/zooid-a", "USER": "zooid-a", "LOGNAME": "zooid-a"} {
		if got, _ := val(env, name); got != want {
			t.Errorf("named user: %s=%q, want %q (env %q)", name, got, want, env)
		}
	}
	bare := config.Agent{User: &unixuser.User{UID: 4000000, GID: 4000000}}
	env = agentEnvFor(nil, bare, "/state/agents/a")
	if got, _ := val(env, "HOME"); got != "/state/agents/a" {
		t.Errorf("uid without passwd entry: HOME=%q, want its working directory", got)
	}
	for _, name := range []string{"USER", "LOGNAME"} {
		if got, ok := val(env, name); ok {
			t.Errorf("uid without passwd entry: %s=%q, the daemon's, want it unset", name, got)
		}
	}
	named.ACP.Env = map[string]string{"HOME": "/srv/a"}
	if got, _ := val(agentEnvFor(nil, named, "/w"), "HOME"); got != "/srv/a" {
		t.Errorf("acp.env HOME: got %q, want /srv/a", got)
	}
}
