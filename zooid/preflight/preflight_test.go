package preflight

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
	"maunium.net/go/mautrix/appservice"

	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/matrix"
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

// TestCheckWantsTheRegistrationToAskForDevices: with encryption: true a
// registration without MSC2409's, MSC3202's and MSC4190's keys is named with
// what each is for; zooid registration's own output passes.
func TestCheckWantsTheRegistrationToAskForDevices(t *testing.T) {
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "zooid.yaml")
	mt := &config.MatrixTransport{Homeserver: "http://127.0.0.1:8008", ServerName: "localhost", ASToken: "as", HSToken: "hs", Listen: "127.0.0.1:9000"}
	cfg := &config.Config{File: cfgFile, Encryption: true, Transports: []config.Transport{{Name: "matrix", Type: "matrix", Matrix: mt}}}
	write := func(reg *appservice.Registration) string {
		path := filepath.Join(dir, "registration.yaml")
		data, err := yaml.Marshal(reg)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := matrix.Registration(matrix.OptionsFromConfig(cfg, mt), "http://127.0.0.1:9000")
	if got := Check(cfg, Options{Registration: write(good)}); len(got) != 0 {
		t.Errorf("zooid registration's own output: findings %v, want none", got)
	}
	bare := *good
	bare.EphemeralEvents, bare.SoruEphemeralEvents, bare.MSC3202, bare.MSC4190 = false, false, false, false
	got := Check(cfg, Options{Registration: write(&bare)})
	if len(got) != 1 {
		t.Fatalf("a registration without the device keys: findings %v, want one", got)
	}
	for _, want := range []string{"encryption: true", "receive_ephemeral", "org.matrix.msc3202", "io.element.msc4190"} {
		if !strings.Contains(got[0].Msg, want) {
			t.Errorf("finding %q does not name %q", got[0].Msg, want)
		}
	}
	cfg.Encryption = false
	if got := Check(cfg, Options{Registration: write(&bare)}); len(got) != 0 {
		t.Errorf("without encryption the same registration: findings %v, want none", got)
	}
}
