package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/zooid-dev/zooid/zooid/sandbox"
)

// TestSandboxRules: a sandbox is a mode or a mapping of known keys; paths
// are absolute, ports numbers, connect and bind lists; a docker agent's
// container is its sandbox, so sandbox settings of its own are refused.
func TestSandboxRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		want []string
	}{
		{"unknown mode", okTransport + `sandbox: bubblewrap
agents:
  a:
    acp: { command: /agent }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:7: sandbox: must be "landlock" or "none", got "bubblewrap"`}},
		{"unknown key and type", okTransport + `agents:
  a:
    acp: { command: /agent }
    sandbox: { type: off, reads: [/srv] }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{
			`zooid.yaml:10: agents.a.sandbox: unknown key "reads" (did you mean "read"?)`,
			`zooid.yaml:10: agents.a.sandbox.type: must be "landlock" or "none", got "off"`,
		}},
		{"relative paths and bad ports", okTransport + `agents:
  a:
    acp: { command: /agent }
    sandbox:
      read: [srv/data]
      write: [./cache]
      connect: [443, 0, https]
      bind: 8080
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{
			`zooid.yaml:11: agents.a.sandbox.read[0]: must be an absolute path, got "srv/data"`,
			`zooid.yaml:12: agents.a.sandbox.write[0]: must be an absolute path, got "./cache"`,
			`zooid.yaml:13: agents.a.sandbox.connect[1]: must be a port from 1 to 65535, got "0"`,
			`zooid.yaml:13: agents.a.sandbox.connect[2]: must be a port from 1 to 65535, got "https"`,
			`zooid.yaml:14: agents.a.sandbox.bind: must be a list of ports, got "8080"`,
		}},
		{"connect without a list", okTransport + `agents:
  a:
    acp: { command: /agent }
    sandbox:
      connect:
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:11: agents.a.sandbox.connect: must be a list of ports ([] allows none; leave the key out to leave TCP open)`}},
		{"a docker agent's own sandbox", okTransport + `agents:
  a:
    runtime: docker
    container: { image: agent:1 }
    sandbox: none
    acp: { command: /agent }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:11: agents.a.sandbox: is for local agents: a runtime docker agent's container is its sandbox`}},
		{"a token in a path", okTransport + `agents:
  a:
    acp: { command: /agent }
    sandbox: { read: ["/srv/${AS}"] }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:10: agents.a.sandbox.read[0]: the path carries the token of transports.matrix.as_token; agents must never see a token (remove it, or give the agent a credential of its own)`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := parseErrors(t, tc.yaml)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestSandboxDefaults: every local agent is sandboxed with Landlock unless
// zooid.yaml says none; the top-level sandbox is each agent's default and an
// agent's key replaces the default's (lists too); absent ports leave TCP
// open, an empty list allows none; a docker agent has no sandbox of ours.
func TestSandboxDefaults(t *testing.T) {
	cfg, err := Parse([]byte(okTransport+`sandbox:
  read: [/srv/shared]
  connect: [443]
agents:
  plain:
    acp: { command: /agent }
    matrix: { user_id: '@plain', rooms: ['#r'] }
  own:
    acp: { command: /agent }
    sandbox: { read: [/srv/own], write: [/srv/cache], bind: [] }
    matrix: { user_id: '@own', rooms: ['#r'] }
  off:
    acp: { command: /agent }
    sandbox: none
    matrix: { user_id: '@off', rooms: ['#r'] }
  boxed:
    runtime: docker
    container: { image: agent:1 }
    acp: { command: /agent }
    matrix: { user_id: '@boxed', rooms: ['#r'] }
`), "zooid.yaml", testEnv)
	if err != nil {
		t.Fatal(err)
	}
	get := func(name string) *Sandbox { a, _ := cfg.Agent(name); return a.Sandbox }
	plain := get("plain")
	if plain.Mode != sandbox.Landlock || !slices.Equal(plain.Read, []string{"/srv/shared"}) || plain.Write != nil ||
		!slices.Equal(plain.Connect, sandbox.Ports{443}) || plain.Bind != nil {
		t.Errorf("plain: %+v; want the top-level default", plain)
	}
	own := get("own")
	if own.Mode != sandbox.Landlock || !slices.Equal(own.Read, []string{"/srv/own"}) || !slices.Equal(own.Write, []string{"/srv/cache"}) ||
		!slices.Equal(own.Connect, sandbox.Ports{443}) || own.Bind == nil || len(own.Bind) != 0 {
		t.Errorf("own: %+v; want its read and write, the default's connect, and no port to bind", own)
	}
	if off := get("off"); off.Mode != sandbox.None || !slices.Equal(off.Read, []string{"/srv/shared"}) {
		t.Errorf("off: %+v; want none (the default's other keys kept)", off)
	}
	if boxed := get("boxed"); boxed != nil {
		t.Errorf("a docker agent has a sandbox of ours: %+v", boxed)
	}

	bare, err := Parse([]byte(okTransport+`agents:
  a:
    acp: { command: /agent }
    matrix: { user_id: '@a', rooms: ['#r'] }
`), "zooid.yaml", testEnv)
	if err != nil {
		t.Fatal(err)
	}
	if s := bare.Agents[0].Sandbox; s == nil || s.Mode != sandbox.Landlock || s.Connect != nil || s.Bind != nil {
		t.Errorf("without sandbox: %+v; want Landlock, TCP open", s)
	}
}

// TestLoadChecksSandboxPaths: check names, with the line, a sandbox path
// that does not exist and one that is or lies in what the daemon keeps from
// agents (zooid.yaml, a token file, the state dir, the run dir, the trace dir).
func TestLoadChecksSandboxPaths(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "hs_token"), []byte(testHS), 0o600))
	must(os.MkdirAll(filepath.Join(dir, "state", "agents"), 0o700))
	must(os.MkdirAll(filepath.Join(dir, "run"), 0o700))
	must(os.MkdirAll(filepath.Join(dir, "trace"), 0o700))
	must(os.MkdirAll(filepath.Join(dir, "shared"), 0o700))
	t.Setenv("AS", testAS)
	cfgPath := filepath.Join(dir, "zooid.yaml")
	must(os.WriteFile(cfgPath, []byte(`transports:
  matrix:
    homeserver: http://127.0.0.1:8008
    server_name: example.org
    as_token: ${AS}
    hs_token_file: hs_token
state_dir: state
run_dir: run
trace: { dir: trace }
agents:
  a:
    acp: { command: /agent }
    sandbox:
      read: [`+dir+`/shared, `+dir+`/missing, `+dir+`/zooid.yaml, `+dir+`/hs_token]
      write: [`+dir+`/state/agents, `+dir+`/run, `+dir+`/trace]
    matrix: { user_id: '@a', rooms: ['#r'] }
`), 0o600))
	_, err := Load(cfgPath)
	got := ""
	if err != nil {
		got = err.Error()
	}
	for _, want := range []string{
		cfgPath + ":14: agents.a.sandbox.read[1]: stat " + dir + "/missing: no such file or directory",
		cfgPath + ":14: agents.a.sandbox.read[2]: " + dir + "/zooid.yaml is zooid.yaml, which no agent may reach",
		cfgPath + ":14: agents.a.sandbox.read[3]: " + dir + "/hs_token is a token file (transports.matrix.hs_token_file), which no agent may reach",
		cfgPath + ":15: agents.a.sandbox.write[0]: " + dir + "/state/agents is in the state dir " + dir + "/state, which no agent may reach",
		cfgPath + ":15: agents.a.sandbox.write[1]: " + dir + "/run is the run dir, which no agent may reach",
		cfgPath + ":15: agents.a.sandbox.write[2]: " + dir + "/trace is the trace dir, which no agent may reach",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing error %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "read[0]") {
		t.Errorf("an existing path of nobody's was refused:\n%s", got)
	}
}
