package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckAndRunRefuseTheSameConfigs runs each bad config through `zooid
// check` and `zooid run`: both must refuse it, with the same errors.
func TestCheckAndRunRefuseTheSameConfigs(t *testing.T) {
	t.Setenv("CR_AS", "as-0123456789abcdef")
	t.Setenv("CR_HS", "hs-0123456789abcdef")
	const mx = `transports:
  matrix:
    homeserver: http://127.0.0.1:1
    server_name: example.org
    as_token: ${CR_AS}
    hs_token: ${CR_HS}
`
	const agent = `agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`
	for _, c := range []struct{ name, yaml, want string }{
		{"two matrix transports", mx + `  other:
    type: matrix
    homeserver: http://127.0.0.1:2
    as_token: ${CR_AS}-other
    hs_token: ${CR_HS}-other
` + agent, "a daemon serves one matrix transport"},
		{"token in an agent's args", mx + `agents:
  a:
    acp: { command: /bin/true, args: ["--token=${CR_AS}"] }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, "agents.a.acp.args[0]: the argument carries the token of transports.matrix.as_token"},
		{"token in an agent's env", mx + `agents:
  a:
    acp: { preset: pi, env: { T: "${CR_HS}" } }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, "agents.a.acp.env.T: the value carries the token of transports.matrix.hs_token"},
		{"inherited variable holding a token", mx + `agents:
  a:
    acp: { preset: pi, inherit_env: [CR_AS] }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, "agents.a.acp.inherit_env[0]: $CR_AS carries the token"},
		{"http without a token off loopback", `transports:
  hooks:
    type: http
    listen: 0.0.0.0:0
agents:
  a:
    acp: { preset: pi }
    http: {}
`, "transports.hooks.token: is required because 0.0.0.0:0 is not a loopback address"},
		{"short token", strings.Replace(mx, "${CR_AS}", "short", 1) + agent, "transports.matrix.as_token: is 5 characters long"},
		{"token in a container's env", mx + `agents:
  a:
    runtime: docker
    container: { image: agent:1, bridge: /bin/sh, env: { T: "${CR_AS}" } }
    acp: { command: /agent }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, "agents.a.container.env.T: the value carries the token of transports.matrix.as_token"},
		{"a dynamically linked bridge for a container", mx + `agents:
  a:
    runtime: docker
    container: { image: agent:1, bridge: /bin/sh }
    acp: { command: /agent }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, "agents.a.container.bridge: /bin/sh is dynamically linked"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "zooid.yaml")
			if err := os.WriteFile(path, []byte(c.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			var checkOut, checkErr, runOut, runErr strings.Builder
			checkCode := dispatch([]string{"check", "--config", path}, &checkOut, &checkErr)
			runCode := dispatch([]string{"run", "--config", path}, &runOut, &runErr)
			if checkCode != 1 || runCode != 1 {
				t.Fatalf("exit codes: check %d, run %d; want both 1\ncheck: %s\nrun: %s", checkCode, runCode, checkErr.String(), runErr.String())
			}
			if !strings.Contains(checkErr.String(), c.want) {
				t.Fatalf("check said %q, want it to contain %q", checkErr.String(), c.want)
			}
			if got := strings.TrimPrefix(runErr.String(), "zooid run: "); got != checkErr.String() {
				t.Fatalf("run and check disagree:\nrun:   %q\ncheck: %q", got, checkErr.String())
			}
		})
	}
}
