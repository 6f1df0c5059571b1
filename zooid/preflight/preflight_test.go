package preflight

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"maunium.net/go/mautrix/appservice"

	"github.com/zooid-dev/zooid/zooid/config"
)

// TestNamespacesMatchAsSynapseDoes: Synapse matches a namespace regex at the start of the id
// only (Python's re.match), so "@zooid-" holds "@zooid-helper:server" and a regex without an
// end anchor holds longer ids too.
func TestNamespacesMatchAsSynapseDoes(t *testing.T) {
	nss := appservice.NamespaceList{{Regex: "@zooid-"}, {Regex: "^@exact:hs$"}}
	for s, want := range map[string]bool{
		"@zooid-helper:example.org": true,
		"@exact:hs":                 true,
		"@exact:hs2":                false,
		"@x@zooid-:hs":              false, // not at the start
		"@other:hs":                 false,
	} {
		if got := inNamespace(nss, s); got != want {
			t.Errorf("inNamespace(%q) = %v, want %v", s, got, want)
		}
	}
	if inNamespace(appservice.NamespaceList{{Regex: "(?<=x)"}}, "x") {
		t.Error("a regex Go can't compile matched")
	}
}

// TestCommandsAreFoundAsTheAgentWill: a command with a slash must be an executable file; a
// container's command is its image's, not looked for on the host.
func TestCommandsAreFoundAsTheAgentWill(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		agent config.Agent
		want  string // "" for no finding
	}{
		{"not executable", config.Agent{Name: "a", ACP: config.ACP{Command: notExec}},
			"command " + notExec + ", which is not an executable file: every mention of a would answer that it could not be started; set acp.command"},
		{"executable", config.Agent{Name: "a", ACP: config.ACP{Command: "/bin/sh"}}, ""},
		{"in a container", config.Agent{Name: "a", Runtime: config.RuntimeDocker, ACP: config.ACP{Command: "/usr/local/bin/agent"}}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, ok := checkCommand(c.agent)
			switch {
			case c.want == "" && ok:
				t.Fatalf("finding %q, want none", f)
			case c.want != "" && (!ok || !strings.Contains(f.Msg, c.want) || f.Path != "agents.a.acp"):
				t.Fatalf("finding %q (%v), want one on agents.a.acp containing %q", f, ok, c.want)
			}
		})
	}
}

// TestCheckWarnsThatEncryptionIsNotBuilt: check agrees with zooid run, which
// refuses encryption: true until the agents' devices exist.
func TestCheckWarnsThatEncryptionIsNotBuilt(t *testing.T) {
	dir := t.TempDir()
	for _, on := range []bool{false, true} {
		cfg := &config.Config{File: filepath.Join(dir, "zooid.yaml"), Encryption: on}
		got := slices.Contains(Check(cfg, Options{}), encryptionNotBuilt)
		if got != on {
			t.Errorf("encryption %v: warning given %v, want %v", on, got, on)
		}
	}
}
