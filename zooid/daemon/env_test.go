package daemon

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zooid-dev/zooid/zooid/config"
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
