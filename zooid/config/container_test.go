package config

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func parseErrors(t *testing.T, yaml string) []string {
	t.Helper()
	_, err := Parse([]byte(yaml), "zooid.yaml", testEnv)
	var list ErrorList
	if err != nil && !errors.As(err, &list) {
		t.Fatalf("Parse: %v", err)
	}
	var out []string
	for _, e := range list {
		out = append(out, e.Error())
	}
	return out
}

func TestContainerRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		want []string
	}{
		{"unknown runtime", okTransport + `runtime: podman
agents:
  a:
    acp: { command: /agent }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:7: runtime: must be "local" or "docker", got "podman"`}},
		{"docker without an image", okTransport + `agents:
  a:
    runtime: docker
    acp: { command: /agent }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:8: agents.a.container.image: is required for runtime docker (here or in the top-level container:)`}},
		{"a token in the container's env", okTransport + `agents:
  a:
    runtime: docker
    container: { image: agent:1, env: { LEAK: "x-${AS}" } }
    acp: { command: /agent }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:10: agents.a.container.env.LEAK: the value carries the token of transports.matrix.as_token; agents must never see a token (remove it, or give the agent a credential of its own)`}},
		{"a token in the default container's env", okTransport + `container: { image: agent:1, env: { LEAK: "${HS}" } }
agents:
  a:
    runtime: docker
    acp: { command: /agent }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:7: container.env.LEAK: the value carries the token of transports.matrix.hs_token; agents must never see a token (remove it, or give the agent a credential of its own)`}},
		{"relative workdir", okTransport + `agents:
  a:
    runtime: docker
    container: { image: agent:1, workdir: work }
    acp: { command: /agent }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:10: agents.a.container.workdir: must be an absolute path inside the container, got "work"`}},
		{"workdir over the bridge", okTransport + `agents:
  a:
    runtime: docker
    container: { image: agent:1, workdir: /zooid/run }
    acp: { command: /agent }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:10: agents.a.container.workdir: /zooid/run is taken: the workdir must not be /, nor lie in or over /zooid, /proc, /sys or /dev`}},
		{"another container's network", okTransport + `agents:
  a:
    runtime: docker
    container: { image: agent:1, network: "container:db" }
    acp: { command: /agent }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:10: agents.a.container.network: must be a docker network name such as none, host or a network of yours, got "container:db"`}},
		{"an http agent in a container", okTransport + `  hooks: { type: http, port: 3000 }
agents:
  a:
    runtime: docker
    container: { image: agent:1 }
    acp: { command: /agent }
    http: {}
`, []string{`zooid.yaml:9: agents.a.runtime: runtime docker is for matrix agents for now: an http agent runs locally`}},
		{"unknown container key", okTransport + `agents:
  a:
    runtime: docker
    container: { image: agent:1, volumes: [/] }
    acp: { command: /agent }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:10: agents.a.container: unknown key "volumes"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := parseErrors(t, tc.yaml)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// TestContainerDefaults: the top-level runtime and container are each agent's
// defaults, an agent's keys win, env maps merge, and a local agent carries no
// container settings.
func TestContainerDefaults(t *testing.T) {
	cfg, err := Parse([]byte(okTransport+`runtime: docker
container:
  image: agent:1
  env: { A: one, B: two }
agents:
  a:
    acp: { command: bin/agent, args: [--acp] }
    matrix: { user_id: '@a', rooms: ['#r'] }
  b:
    container: { image: other:2, env: { B: own }, workdir: /src, network: host, bridge: ./zooid-static }
    acp: { command: agent }
    matrix: { user_id: '@b', rooms: ['#r'] }
  c:
    runtime: local
    acp: { command: bin/agent }
    matrix: { user_id: '@c', rooms: ['#r'] }
`), "/etc/zooid/zooid.yaml", testEnv)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := cfg.Agent("a")
	if a.Runtime != RuntimeDocker || a.Container == nil || a.Container.Image != "agent:1" || a.Container.Workdir != "/work" ||
		a.Container.Network != "none" || a.Container.Env["A"] != "one" || a.Container.Env["B"] != "two" || a.Container.Bridge != "" {
		t.Errorf("a = %+v %+v", a, a.Container)
	}
	// In an image a relative command is the image's, not the host's.
	if a.ACP.Command != "bin/agent" {
		t.Errorf("a's command %q, want bin/agent as written (a path inside the image)", a.ACP.Command)
	}
	b, _ := cfg.Agent("b")
	if b.Runtime != RuntimeDocker || b.Container.Image != "other:2" || b.Container.Workdir != "/src" || b.Container.Network != "host" ||
		b.Container.Env["A"] != "one" || b.Container.Env["B"] != "own" || b.Container.Bridge != "/etc/zooid/zooid-static" {
		t.Errorf("b = %+v %+v", b, b.Container)
	}
	c, _ := cfg.Agent("c")
	if c.Runtime != RuntimeLocal || c.Container != nil || c.ACP.Command != "/etc/zooid/bin/agent" {
		t.Errorf("c = %+v", c)
	}
}

// TestLoadRefusesADynamicBridge: the bridge runs inside the container, where
// the host's dynamic loader and libraries are not; check says so.
func TestLoadRefusesADynamicBridge(t *testing.T) {
	dynamic, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	// Load wants a docker command on PATH; this one only has to exist.
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "docker"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("AS", testAS)
	t.Setenv("HS", testHS)
	if StaticExecutable(dynamic) == nil {
		t.Fatalf("%s is static on this machine; the test needs a dynamically linked program", dynamic)
	}
	dir := t.TempDir()
	notELF := filepath.Join(dir, "script")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ bridge, want string }{
		{dynamic, dynamic + " is dynamically linked: the bridge runs inside the container"},
		{notELF, notELF + " is not an executable this machine can run in a container"},
	} {
		path := filepath.Join(dir, "zooid.yaml")
		if err := os.WriteFile(path, []byte(okTransport+`agents:
  a:
    runtime: docker
    container: { image: agent:1, bridge: `+tc.bridge+` }
    acp: { command: /agent }
    matrix: { user_id: '@a', rooms: ['#r'] }
`), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Load(path)
		if err == nil || !strings.Contains(err.Error(), path+":8: agents.a.container.bridge: "+tc.want) {
			t.Errorf("Load with bridge %s: %v, want an error containing %q", tc.bridge, err, tc.want)
		}
	}
}

// TestLoadNeedsTheDockerCommand: a docker agent with no docker CLI to start
// it is refused by check, not found out at the first mention.
func TestLoadNeedsTheDockerCommand(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("AS", testAS)
	t.Setenv("HS", testHS)
	path := filepath.Join(t.TempDir(), "zooid.yaml")
	if err := os.WriteFile(path, []byte(okTransport+`agents:
  a:
    runtime: docker
    container: { image: agent:1, bridge: /nonexistent/zooid }
    acp: { command: /agent }
    matrix: { user_id: '@a', rooms: ['#r'] }
`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Load(path)
	if err == nil || !strings.Contains(err.Error(), path+`:8: agents.a.runtime: runtime docker needs the docker command on PATH: exec: "docker": executable file not found in $PATH`) {
		t.Fatalf("Load without docker on PATH: %v", err)
	}
}
