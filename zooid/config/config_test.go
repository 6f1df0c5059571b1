package config

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix/id"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

const (
	testAS = "as-secret-0123456789"
	testHS = "hs-secret-0123456789"
)

var testEnv = env(map[string]string{"AS": testAS, "HS": testHS, "EMPTY": ""})

func TestExampleLoads(t *testing.T) {
	t.Setenv("MATRIX_AS_TOKEN", "as-1-0123456789abcdef")
	t.Setenv("MATRIX_HS_TOKEN", "hs-1-0123456789abcdef")
	t.Setenv("HOOKS_TOKEN", "bearer-1-0123456789abcdef")
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/1000")
	cfg, err := Load("testdata/zooid.yaml")
	if err != nil {
		t.Fatalf("example config refused:\n%v", err)
	}
	dir, _ := filepath.Abs("testdata")
	if len(cfg.Transports) != 2 || len(cfg.Agents) != 3 {
		t.Fatalf("got %d transports, %d agents", len(cfg.Transports), len(cfg.Agents))
	}
	mx := cfg.Transports[0]
	if mx.Name != "matrix" || mx.Type != TypeMatrix || mx.Matrix == nil || mx.HTTP != nil {
		t.Fatalf("matrix transport %+v", mx)
	}
	want := MatrixTransport{Homeserver: "http://127.0.0.1:8008", ServerName: "example.org", ASToken: "as-1-0123456789abcdef", HSToken: "hs-1-0123456789abcdef",
		HSTokenFrom: "hs_token ${MATRIX_HS_TOKEN}", Listen: "127.0.0.1:9000", ID: "zooid", SenderLocalpart: "zooid"}
	if *mx.Matrix != want {
		t.Errorf("matrix = %+v, want %+v", *mx.Matrix, want)
	}
	if r := cfg.Room("#general:example.org"); r.Visibility != VisibilityPrivate || !slices.Equal(r.Invite, []id.UserID{"@alice:example.org", "@bob:example.net"}) {
		t.Errorf("#general = %+v, want private with alice and bob invited", r)
	}
	hooks := cfg.Transports[1]
	if hooks.Type != TypeHTTP || hooks.HTTP.Port != 3000 || hooks.HTTP.Listen != "127.0.0.1:3000" || hooks.HTTP.Token != "bearer-1-0123456789abcdef" {
		t.Errorf("hooks = %+v %+v", hooks, hooks.HTTP)
	}

	a, ok := cfg.Agent("agent-a")
	if !ok || a.Matrix == nil {
		t.Fatalf("agent-a missing: %+v", cfg.Agents)
	}
	if a.Matrix.UserID != id.UserID("@agent-a:example.org") || a.Matrix.Transport != "matrix" || a.Matrix.DisplayName != "Agent A" ||
		a.Matrix.Trigger != TriggerMention || !slices.Equal(a.Matrix.Rooms, []RoomRef{"#general:example.org", "!abc123:example.org"}) {
		t.Errorf("agent-a matrix = %+v", a.Matrix)
	}
	if a.Permission != PermissionDeny || a.Dir != "" || a.ACP.Preset != "claude" {
		t.Errorf("agent-a = %+v", a)
	}
	if got := cfg.WorkDir(a); got != filepath.Join(dir, ".zooid", "agents", "agent-a") {
		t.Errorf("agent-a works in %s, want its own directory under the state dir", got)
	}
	if cmd, args := a.ACP.Resolve(); cmd != "claude-agent-acp" || len(args) != 0 {
		t.Errorf("claude resolves to %s %v", cmd, args)
	}

	c, _ := cfg.Agent("coder")
	if c.ACP.Command != filepath.Join(dir, "bin/my-agent") || !slices.Equal(c.ACP.Args, []string{"--verbose"}) {
		t.Errorf("coder acp = %+v", c.ACP)
	}
	if c.ACP.Env["MODEL"] != "small" || c.ACP.Env["PRICE"] != "${NOT_EXPANDED}" {
		t.Errorf("coder env = %v", c.ACP.Env)
	}
	if c.Dir != filepath.Join(dir, "work") || c.Permission != PermissionAllow || c.Matrix.Trigger != TriggerAny || c.Matrix.DisplayName != "coder" {
		t.Errorf("coder = %+v %+v", c, c.Matrix)
	}
	w, _ := cfg.Agent("webhook")
	if w.HTTP == nil || w.HTTP.Transport != "hooks" || w.Matrix != nil {
		t.Errorf("webhook = %+v", w)
	}
	if cfg.StateDir != filepath.Join(dir, ".zooid") {
		t.Errorf("state dir %s", cfg.StateDir)
	}
	if cfg.RunDir != "/run/user/1000/zooid" {
		t.Errorf("run dir %q, want $XDG_RUNTIME_DIR/zooid", cfg.RunDir)
	}
}

func TestExampleNeedsItsSecrets(t *testing.T) {
	data, err := os.ReadFile("testdata/zooid.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Parse(data, "zooid.yaml", env(map[string]string{"MATRIX_AS_TOKEN": testAS}))
	var list ErrorList
	if !errors.As(err, &list) || len(list) != 2 {
		t.Fatalf("want two errors, got %v", err)
	}
	if list[0].Error() != "zooid.yaml:7: transports.matrix.hs_token: environment variable MATRIX_HS_TOKEN is not set" ||
		list[1].Error() != "zooid.yaml:12: transports.hooks.token: environment variable HOOKS_TOKEN is not set" {
		t.Fatalf("errors:\n%v", err)
	}
}

const okTransport = `transports:
  matrix:
    homeserver: http://127.0.0.1:8008
    server_name: example.org
    as_token: ${AS}
    hs_token: ${HS}
`

func TestRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		yaml string
		want []string // whole error lines, in order
	}{
		{"bad trigger", okTransport + `agents:
  agent-a:
    acp: { preset: claude }
    matrix:
      user_id: '@agent-a'
      rooms: ['#general']
      trigger: all
`, []string{`zooid.yaml:13: agents.agent-a.matrix.trigger: must be "mention" or "any", got "all"`}},
		{"bad turn timeout", okTransport + `turn_timeout: soon
agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:7: turn_timeout: must be a duration such as 30m or 90s, got "soon"`}},
		{"bad process caps", okTransport + `max_processes: 0
queue_notice_after: 5ms
agents:
  a:
    acp: { preset: pi }
    max_processes: lots
    sessions_per_process: 2000
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{
			`zooid.yaml:7: max_processes: must be a whole number from 1 to 1024, got "0"`,
			`zooid.yaml:8: queue_notice_after: must be at least 1s, got 5ms`,
			`zooid.yaml:12: agents.a.max_processes: must be a whole number from 1 to 1024, got "lots"`,
			`zooid.yaml:13: agents.a.sessions_per_process: must be auto or a whole number from 1 to 1024, got "2000"`,
		}},
		{"bad encryption", okTransport + `encryption: yes
agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:7: encryption: must be true or false, got "yes"`}},
		{"encryption without a push listener", okTransport + `encryption: true
agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:7: encryption: needs transports[0] (matrix) to set listen: an agent's device hears its room keys, device lists and one-time key counts only in the transactions the homeserver pushes there (MSC2409, MSC3202)`}},
		{"room key wait without encryption", okTransport + `room_key_wait: 30s
agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:7: room_key_wait: is how long an encrypted message waits for its room key; it needs encryption: true`}},
		{"room key wait too long", okTransport + `    listen: 127.0.0.1:9000
encryption: true
room_key_wait: 10m
agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:9: room_key_wait: must be at most 2m0s (a room's later messages wait behind one whose key has not come), got 10m0s`}},
		{"bad prewarm", okTransport + `prewarm: yes please
agents:
  a:
    acp: { preset: pi }
    prewarm: 1
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{
			`zooid.yaml:7: prewarm: must be true or false, got "yes please"`,
			`zooid.yaml:11: agents.a.prewarm: must be true or false, got "1"`,
		}},
		{"bad timeouts", okTransport + `tool_timeout: 500ms
post_timeout: never
agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{
			`zooid.yaml:7: tool_timeout: must be at least 1s, got 500ms`,
			`zooid.yaml:8: post_timeout: must be a duration such as 30m or 90s, got "never"`,
		}},
		{"bad task timeouts", okTransport + `task_timeout: 0
agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:7: task_timeout: must be at least 1s, got 0s`}},
		{"negative task timeout", okTransport + `task_timeout: -5m
agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:7: task_timeout: must be at least 1s, got -5m0s`}},
		{"task timeout not a duration", okTransport + `task_timeout: 3
agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:7: task_timeout: must be a duration such as 30m or 90s, got "3"`}},
		{"trace without dir", okTransport + `trace: { max_file_size: 1MiB }
agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:7: trace: dir is required: the directory the trace is written to`}},
		{"trace with a bad size", okTransport + `trace: { dir: ./t, max_file_size: 2 }
agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:7: trace.max_file_size: must be at least 4KiB, got 2`}},
		{"trace keeping one file", okTransport + `trace: { dir: ./t, max_files: 1 }
agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:7: trace.max_files: must be a number of files, at least 2 (the one being written and the one before it), or all; got 1`}},
		{"turn timeout too short", okTransport + `turn_timeout: 10ms
agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:7: turn_timeout: must be at least 1s, got 10ms`}},
		{"unknown top key with suggestion", okTransport + `agent:
  a: {}
`, []string{`zooid.yaml:1: agents: at least one agent is required`, `zooid.yaml:7: unknown key "agent" (did you mean "agents"?)`}},
		{"unknown nested key", okTransport + `    hs_tokn: x
agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:7: transports.matrix: unknown key "hs_tokn" (did you mean "hs_token"?)`}},
		{"bad agent name", okTransport + `agents:
  Agent_A:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:8: agents.Agent_A: agent name must match ^[a-z][a-z0-9-]{0,31}$`}},
		{"agent name too long", okTransport + `agents:
  a123456789012345678901234567890123:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:8: agents.a123456789012345678901234567890123: agent name must match ^[a-z][a-z0-9-]{0,31}$`}},
		{"duplicate agent", okTransport + `agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
  a:
    acp: { preset: pi }
    matrix: { user_id: '@b', rooms: ['#r'] }
`, []string{`zooid.yaml:11: agents.a: duplicate name (first at line 8)`}},
		{"duplicate key", okTransport + `agents:
  a:
    acp: { preset: pi }
    acp: { preset: claude }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:10: agents.a.acp: duplicate key (first at line 9)`}},
		{"unknown preset", okTransport + `agents:
  a:
    acp: { preset: cursor }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:9: agents.a.acp.preset: unknown preset "cursor" (known: claude, codex, demo, gemini, opencode, pi)`}},
		{"no preset nor command", okTransport + `agents:
  a:
    acp: { args: [x] }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:9: agents.a.acp: needs a preset or a command`}},
		{"no transport bound", okTransport + `agents:
  a:
    acp: { preset: pi }
`, []string{`zooid.yaml:8: agents.a: an agent binds exactly one transport: set matrix or http`}},
		{"two transports bound", okTransport + `  web: { type: http, port: 3000 }
agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
    http: {}
`, []string{`zooid.yaml:12: agents.a: an agent binds exactly one transport: both matrix and http are set`}},
		{"short user id needs server_name", `transports:
  matrix:
    homeserver: http://127.0.0.1:8008
    as_token: ${AS}
    hs_token: ${HS}
agents:
  a:
    acp: { preset: pi }
    matrix:
      user_id: '@a'
      rooms: ['#r', '!x:example.org', '#full:example.org']
`, []string{`zooid.yaml:10: agents.a.matrix.user_id: "@a" has no server part and the transport has no server_name`,
			`zooid.yaml:11: agents.a.matrix.rooms[0]: "#r" has no server part and the transport has no server_name`}},
		{"user id on other server", okTransport + `agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a:evil.org', rooms: ['#r'] }
`, []string{`zooid.yaml:10: agents.a.matrix.user_id: @a:evil.org is not on the transport's server example.org`}},
		{"user id without @", okTransport + `agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: 'a', rooms: ['#r'] }
`, []string{`zooid.yaml:10: agents.a.matrix.user_id: must start with @, got "a"`}},
		{"duplicate user id", okTransport + `agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@same', rooms: ['#r'] }
  b:
    acp: { preset: pi }
    matrix: { user_id: '@same:example.org', rooms: ['#r'] }
`, []string{`zooid.yaml:13: agents.b.matrix.user_id: @same:example.org is already used by agent a`}},
		{"bad room", okTransport + `agents:
  a:
    acp: { preset: pi }
    matrix:
      user_id: '@a'
      rooms:
        - general
`, []string{`zooid.yaml:13: agents.a.matrix.rooms[0]: must be a room alias (#name) or room id (!id), got "general"`}},
		{"no rooms", okTransport + `agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a' }
`, []string{`zooid.yaml:10: agents.a.matrix.rooms: at least one room is required`}},
		{"unset variable", `transports:
  matrix:
    homeserver: http://127.0.0.1:8008
    server_name: example.org
    as_token: ${NOPE}
    hs_token: ${HS}
agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:5: transports.matrix.as_token: environment variable NOPE is not set`}},
		{"empty variable is empty", `transports:
  matrix:
    homeserver: http://127.0.0.1:8008
    server_name: example.org
    as_token: ${EMPTY}
    hs_token: ${HS}
agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:5: transports.matrix.as_token: must not be empty`}},
		{"missing required", `transports:
  matrix:
    server_name: example.org
    as_token: ${AS}
agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:2: transports.matrix.homeserver: is required`, `zooid.yaml:2: transports.matrix.hs_token: is required (or hs_token_file)`}},
		{"bad homeserver", `transports:
  matrix:
    homeserver: 127.0.0.1:8008
    server_name: example.org
    as_token: ${AS}
    hs_token: ${HS}
agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:3: transports.matrix.homeserver: must be an http(s) URL, got "127.0.0.1:8008"`}},
		{"transport type needed", `transports:
  main:
    homeserver: http://h
agents:
  a:
    acp: { preset: pi }
    http: {}
`, []string{`zooid.yaml:2: transports.main: type is required ("matrix" or "http") unless the transport is named after its type`}},
		{"bad transport type", `transports:
  main:
    type: irc
agents:
  a:
    acp: { preset: pi }
    http: {}
`, []string{`zooid.yaml:3: transports.main.type: must be "matrix" or "http", got "irc"`}},
		{"http port", `transports:
  http:
    port: 99999
agents:
  a:
    acp: { preset: pi }
    http: {}
`, []string{`zooid.yaml:3: transports.http.port: must be a number 1-65535, got "99999"`}},
		{"http needs port or listen", `transports:
  http:
    token: ${HS}
agents:
  a:
    acp: { preset: pi }
    http: {}
`, []string{`zooid.yaml:2: transports.http: port or listen is required`}},
		{"matrix key on http transport", `transports:
  http:
    port: 3000
    as_token: ${AS}
agents:
  a:
    acp: { preset: pi }
    http: {}
`, []string{`zooid.yaml:4: transports.http: unknown key "as_token"`}},
		{"unknown transport reference", okTransport + `agents:
  a:
    acp: { preset: pi }
    matrix: { transport: other, user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:10: agents.a.matrix.transport: no transport named "other"`}},
		{"http agent without http transport", okTransport + `agents:
  a:
    acp: { preset: pi }
    http: {}
`, []string{`zooid.yaml:10: agents.a.http: no http transport is configured`}},
		{"permission", okTransport + `agents:
  a:
    acp: { preset: pi }
    permission: yes
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:10: agents.a.permission: must be "deny" or "allow", got "yes"`}},
		{"wrong shape", okTransport + `agents:
  a:
    acp: claude
    matrix: { user_id: '@a', rooms: '#r' }
`, []string{`zooid.yaml:9: agents.a.acp: must be a mapping, got "claude"`, `zooid.yaml:10: agents.a.matrix.rooms: must be a list, got "#r"`}},
		{"invalid yaml", "transports:\n  matrix: [\n", []string{`zooid.yaml:2: invalid YAML: did not find expected node content`}},
		{"empty", "", []string{`zooid.yaml: the file is empty`}},
		{"bad env name", okTransport + `agents:
  a:
    acp: { preset: pi, env: { "BAD-NAME": x } }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:9: agents.a.acp.env: invalid variable name "BAD-NAME"`}},
		{"sender collides", okTransport + `agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@zooid', rooms: ['#r'] }
`, []string{`zooid.yaml:10: agents.a.matrix.user_id: @zooid:example.org is the appservice sender of transport matrix`}},
		{"two matrix transports", okTransport + `  second:
    type: matrix
    homeserver: https://matrix.other.net/
    as_token: ${AS}-2
    hs_token: ${HS}-2
agents:
  a:
    acp: { preset: pi }
    matrix: { transport: matrix, user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:7: transports.second: a daemon serves one matrix transport and the first is at line 2: run one daemon per homeserver`}},
		{"token in an agent's args, command and dir", okTransport + `agents:
  a:
    acp: { command: "/bin/agent-${AS}", args: [--verbose, "--token=${AS}"] }
    dir: /srv/${HS}
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{
			`zooid.yaml:9: agents.a.acp.command: the command carries the token of transports.matrix.as_token; agents must never see a token (remove it, or give the agent a credential of its own)`,
			`zooid.yaml:9: agents.a.acp.args[1]: the argument carries the token of transports.matrix.as_token; agents must never see a token (remove it, or give the agent a credential of its own)`,
			`zooid.yaml:10: agents.a.dir: the directory carries the token of transports.matrix.hs_token; agents must never see a token (remove it, or give the agent a credential of its own)`,
		}},
		{"token in an agent's env is refused, not dropped", okTransport + `agents:
  a:
    acp:
      preset: pi
      env: { MATRIX_TOKEN: "${HS}" }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:11: agents.a.acp.env.MATRIX_TOKEN: the value carries the token of transports.matrix.hs_token; agents must never see a token (remove it, or give the agent a credential of its own)`}},
		{"inherit_env naming a variable that holds a token", okTransport + `agents:
  a:
    acp: { preset: pi, inherit_env: [LANG_X, AS, 9BAD, LANG_X] }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{
			`zooid.yaml:9: agents.a.acp.inherit_env[1]: $AS carries the token of transports.matrix.as_token; agents must never see a token (remove it, or give the agent a credential of its own)`,
			`zooid.yaml:9: agents.a.acp.inherit_env[2]: invalid variable name "9BAD"`,
			`zooid.yaml:9: agents.a.acp.inherit_env[3]: LANG_X is listed twice`,
		}},
		{"http without a token off loopback", `transports:
  hooks:
    type: http
    listen: 0.0.0.0:3000
agents:
  a:
    acp: { preset: pi }
    http: {}
`, []string{`zooid.yaml:4: transports.hooks.token: is required because 0.0.0.0:3000 is not a loopback address: set token (or token_file), or listen on 127.0.0.1`}},
		{"http without a token on an empty host", `transports:
  hooks:
    type: http
    listen: ":3000"
agents:
  a:
    acp: { preset: pi }
    http: {}
`, []string{`zooid.yaml:4: transports.hooks.token: is required because :3000 is not a loopback address: set token (or token_file), or listen on 127.0.0.1`}},
		{"short token", `transports:
  matrix:
    homeserver: http://127.0.0.1:8008
    server_name: example.org
    as_token: x
    hs_token: ${HS}
agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:5: transports.matrix.as_token: is 1 characters long; a token must have at least 16 (generate one with: openssl rand -hex 32)`}},
		{"token and token_file", `transports:
  matrix:
    homeserver: http://127.0.0.1:8008
    server_name: example.org
    as_token: ${AS}
    as_token_file: as.token
    hs_token_file: /nonexistent/hs.token
agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{
			`zooid.yaml:6: transports.matrix.as_token_file: set as_token or as_token_file, not both`,
			`zooid.yaml:7: transports.matrix.hs_token_file: reading the token: open /nonexistent/hs.token: no such file or directory`,
		}},
		{"the two appservice tokens are one", `transports:
  matrix:
    homeserver: http://127.0.0.1:8008
    server_name: example.org
    as_token: ${AS}
    hs_token: ${AS}
agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:6: transports.matrix.hs_token: must differ from as_token`}},
		{"unknown user", okTransport + `user: zooid-no-such-user
agents:
  a:
    acp: { command: /bin/true }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:7: user: no user named "zooid-no-such-user" on this machine: create it (useradd --system --no-create-home zooid-no-such-user) or give a uid:gid`}},
		{"root as an agent's user", okTransport + `agents:
  a:
    user: root
    acp: { command: /bin/true }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:9: agents.a.user: root (uid 0) is root, which can read everything the daemon keeps from agents: give the agent a user of its own`}},
		{"uid without a passwd entry or a group", okTransport + `agents:
  a:
    user: "4000000"
    acp: { command: /bin/true }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, []string{`zooid.yaml:9: agents.a.user: uid 4000000 has no passwd entry: give its group too, as 4000000:GID`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), "zooid.yaml", testEnv)
			if err == nil {
				t.Fatalf("accepted; want:\n%s", strings.Join(tc.want, "\n"))
			}
			var list ErrorList
			if !errors.As(err, &list) {
				t.Fatalf("error %T is not an ErrorList: %v", err, err)
			}
			got := strings.Split(err.Error(), "\n")
			if !slices.Equal(got, tc.want) {
				t.Fatalf("errors:\n%s\nwant:\n%s", err, strings.Join(tc.want, "\n"))
			}
		})
	}
}

func TestValidVariants(t *testing.T) {
	for _, tc := range []struct {
		name  string
		yaml  string
		check func(t *testing.T, c *Config)
	}{
		{"turn timeout", okTransport + `turn_timeout: 45m
idle_timeout: 2h
agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, func(t *testing.T, c *Config) {
			if c.TurnTimeout != 45*time.Minute {
				t.Errorf("turn timeout %s, want 45m", c.TurnTimeout)
			}
			if c.IdleTimeout != 2*time.Hour {
				t.Errorf("idle timeout %s, want 2h", c.IdleTimeout)
			}
		}},
		{"process caps", okTransport + `max_processes: 6
queue_notice_after: 2m
agents:
  a:
    acp: { preset: pi }
    max_processes: 2
    sessions_per_process: 10
    matrix: { user_id: '@a', rooms: ['#r'] }
  b:
    acp: { preset: pi }
    matrix: { user_id: '@b', rooms: ['#r'] }
  c:
    acp: { preset: pi }
    sessions_per_process: auto
    matrix: { user_id: '@c', rooms: ['#r'] }
`, func(t *testing.T, c *Config) {
			if got := c.Agents[2].SessionsPerProcess; got != SessionsPerProcessAuto {
				t.Errorf("agent c sessions_per_process %d, want SessionsPerProcessAuto", got)
			}
			if c.MaxProcesses != 6 || c.QueueNoticeAfter != 2*time.Minute {
				t.Errorf("daemon caps %d, %s; want 6, 2m", c.MaxProcesses, c.QueueNoticeAfter)
			}
			if a := c.Agents[0]; a.MaxProcesses != 2 || a.SessionsPerProcess != 10 {
				t.Errorf("agent a caps %d, %d; want 2, 10", a.MaxProcesses, a.SessionsPerProcess)
			}
			if b := c.Agents[1]; b.MaxProcesses != DefaultAgentMaxProcesses || b.SessionsPerProcess != 1 {
				t.Errorf("agent b caps %d, %d; want the defaults %d, 1", b.MaxProcesses, b.SessionsPerProcess, DefaultAgentMaxProcesses)
			}
		}},
		{"prewarm", okTransport + `prewarm: true
agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
  b:
    acp: { preset: pi }
    prewarm: false
    matrix: { user_id: '@b', rooms: ['#r'] }
`, func(t *testing.T, c *Config) {
			if !c.Prewarm || !c.Agents[0].Prewarm || c.Agents[1].Prewarm {
				t.Errorf("prewarm top %v, a %v, b %v; want true, true (the top's), false (its own)", c.Prewarm, c.Agents[0].Prewarm, c.Agents[1].Prewarm)
			}
		}},
		{"encryption", okTransport + `    listen: 127.0.0.1:9000
encryption: true
agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, func(t *testing.T, c *Config) {
			if !c.Encryption || c.RoomKeyWait != DefaultRoomKeyWait {
				t.Errorf("encryption %v, room_key_wait %s; want true, %s", c.Encryption, c.RoomKeyWait, DefaultRoomKeyWait)
			}
		}},
		{"room key wait", okTransport + `    listen: 127.0.0.1:9000
encryption: true
room_key_wait: 45s
agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, func(t *testing.T, c *Config) {
			if c.RoomKeyWait != 45*time.Second {
				t.Errorf("room_key_wait %s; want 45s", c.RoomKeyWait)
			}
		}},
		{"encryption off by default", okTransport + `agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, func(t *testing.T, c *Config) {
			if c.Encryption {
				t.Errorf("encryption %v; want false (today's behaviour: one notice per agent in an encrypted room)", c.Encryption)
			}
		}},
		{"prewarm off by default", okTransport + `agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, func(t *testing.T, c *Config) {
			if c.Prewarm || c.Agents[0].Prewarm {
				t.Errorf("prewarm top %v, a %v; want false, false", c.Prewarm, c.Agents[0].Prewarm)
			}
		}},
		{"timeouts", okTransport + `tool_timeout: 45s
agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, func(t *testing.T, c *Config) {
			if c.ToolTimeout != 45*time.Second || c.PostTimeout != DefaultPostTimeout {
				t.Errorf("tool timeout %s, post timeout %s; want 45s and the default %s", c.ToolTimeout, c.PostTimeout, DefaultPostTimeout)
			}
			if c.TaskTimeout != DefaultTaskTimeout {
				t.Errorf("task timeout %s, want the default %s", c.TaskTimeout, DefaultTaskTimeout)
			}
		}},
		{"task timeout", okTransport + `task_timeout: 90s
agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, func(t *testing.T, c *Config) {
			if c.TaskTimeout != 90*time.Second {
				t.Errorf("task timeout %s, want 90s", c.TaskTimeout)
			}
		}},
		{"trace", okTransport + `trace:
  dir: ./trace
  max_file_size: 8MiB
  max_files: 4
agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, func(t *testing.T, c *Config) {
			if c.Trace == nil || !filepath.IsAbs(c.Trace.Dir) || filepath.Base(c.Trace.Dir) != "trace" || c.Trace.MaxFileSize != 8<<20 || c.Trace.MaxFiles != 4 {
				t.Errorf("trace = %+v, want dir …/trace, 8MiB and 4 files", c.Trace)
			}
		}},
		{"trace keeping every file", okTransport + `trace: { dir: ./trace, max_files: all }
agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`, func(t *testing.T, c *Config) {
			if c.Trace == nil || c.Trace.MaxFiles != -1 {
				t.Errorf("trace = %+v, want every file kept (-1)", c.Trace)
			}
		}},
		{"full ids without server_name, http listen, dirs", `transports:
  matrix:
    homeserver: http://127.0.0.1:8008
    as_token: ${AS}
    hs_token_file: hs.token
  api:
    type: http
    listen: 0.0.0.0:8080
    token: ${HS}-http
  hooks:
    type: http
    listen: 0.0.0.0:8081
    token_file: http.token
state_dir: /var/lib/zooid
run_dir: /run/zooid
agents:
  a:
    acp: { preset: gemini, args: [--model, x] }
    dir: /srv/work
    matrix: { user_id: '@a:hs.local', rooms: ['!room:hs.local'] }
  b:
    acp: { preset: codex }
    http: { transport: api }
`, func(t *testing.T, c *Config) {
			if c.StateDir != "/var/lib/zooid" || c.RunDir != "/run/zooid" {
				t.Errorf("dirs %s %s", c.StateDir, c.RunDir)
			}
			mx, _ := c.Transport("matrix")
			// Where the token came from names the file, so a refused token can send the operator there.
			if !strings.HasPrefix(mx.Matrix.HSTokenFrom, "hs_token_file /") || !strings.HasSuffix(mx.Matrix.HSTokenFrom, "/hs.token") {
				t.Errorf("hs_token from %q, want hs_token_file and the absolute path of hs.token", mx.Matrix.HSTokenFrom)
			}
			if mx.Matrix.HSToken != "hs-from-file-0123456789" || mx.Matrix.ServerName != "hs.local" {
				t.Errorf("matrix %+v: want the token from hs.token and the server of the agents' ids", mx.Matrix)
			}
			a, _ := c.Agent("a")
			if a.Dir != "/srv/work" || a.Matrix.UserID != "@a:hs.local" {
				t.Errorf("a %+v", a)
			}
			if cmd, args := a.ACP.Resolve(); cmd != "gemini" || !slices.Equal(args, []string{"--acp", "--model", "x"}) {
				t.Errorf("resolve %s %v", cmd, args)
			}
			tr, _ := c.Transport("api")
			if tr.HTTP.Listen != "0.0.0.0:8080" || tr.HTTP.Port != 0 {
				t.Errorf("http %+v", tr.HTTP)
			}
			if hooks, _ := c.Transport("hooks"); hooks.HTTP.Token != "http-from-file-0123456789" {
				t.Errorf("hooks token %q, want the one in http.token", hooks.HTTP.Token)
			}
		}},
		{"anchors and escapes", okTransport + `agents:
  a:
    acp: &acp { preset: opencode, env: { X: "a$${B}c$$d", Y: "${EMPTY}" }, inherit_env: [ANTHROPIC_API_KEY, EMPTY] }
    matrix: { user_id: '@a', rooms: ['#r'] }
  b:
    acp: *acp
    matrix: { user_id: '@b', rooms: ['#r'] }
`, func(t *testing.T, c *Config) {
			b, _ := c.Agent("b")
			if b.ACP.Preset != "opencode" || b.ACP.Env["X"] != "a${B}c$$d" || b.ACP.Env["Y"] != "" ||
				!slices.Equal(b.ACP.InheritEnv, []string{"ANTHROPIC_API_KEY", "EMPTY"}) {
				t.Errorf("b acp %+v", b.ACP)
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "hs.token"), []byte("hs-from-file-0123456789\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "http.token"), []byte("http-from-file-0123456789\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err := Parse([]byte(tc.yaml), filepath.Join(dir, "zooid.yaml"), testEnv)
			if err != nil {
				t.Fatalf("refused:\n%v", err)
			}
			tc.check(t, c)
		})
	}
}

// TestPresetsResolve checks what a preset must be, not what the table says:
// the README lists exactly the presets there are; a preset chosen in
// zooid.yaml starts a program found on PATH with the user's args after the
// preset's; and an npx preset never waits for a yes, because the agent's stdin
// is the ACP stream and npx would read its confirmation from it.
func TestPresetsResolve(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	listed := regexp.MustCompile(`preset: claude\s*\}?\s+# ([a-z, ]+?) — or command`).FindSubmatch(readme)
	if listed == nil {
		t.Fatal("README's config example no longer lists the presets after `preset: claude`")
	}
	documented := strings.FieldsFunc(string(listed[1]), func(r rune) bool { return r == ',' || r == ' ' })
	slices.Sort(documented)
	if names := PresetNames(); !slices.Equal(documented, names) {
		t.Errorf("README lists presets %v, the code has %v", documented, names)
	}

	for _, name := range PresetNames() {
		yaml := `transports:
  matrix: { homeserver: http://127.0.0.1:8008, server_name: example.org, as_token: 0123456789abcdef0123, hs_token: fedcba98765432100123 }
agents:
  a:
    acp: { preset: ` + name + `, args: [--user-arg] }
    matrix: { user_id: '@a', rooms: ['#general'] }
`
		c, err := Parse([]byte(yaml), "zooid.yaml", testEnv)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		cmd, args := c.Agents[0].ACP.Resolve()
		bare, _ := ACP{Preset: name}.Resolve()
		switch {
		case cmd == "" || strings.ContainsAny(cmd, "/ "):
			t.Errorf("%s starts %q: want a bare program name, found on PATH as its adapter installs it", name, cmd)
		case len(args) == 0 || args[len(args)-1] != "--user-arg":
			t.Errorf("%s: user args %v do not come after the preset's", name, args)
		case slices.Contains([]string{"sh", "bash", "env"}, cmd):
			t.Errorf("%s starts %s: a preset runs its adapter directly", name, cmd)
		case cmd != bare:
			t.Errorf("%s: zooid.yaml resolves to %s, the preset to %s", name, cmd, bare)
		}
		if cmd == "npx" {
			i := slices.IndexFunc(args, func(a string) bool { return !strings.HasPrefix(a, "-") })
			if !slices.Contains(args, "-y") || i < 0 || slices.Index(args, "-y") > i || !strings.HasPrefix(args[i], "@") {
				t.Errorf("%s runs npx %v: want -y before the scoped adapter package", name, args)
			}
		}
		// Command overrides the preset.
		if cmd, _ := (ACP{Preset: name, Command: "/opt/x"}).Resolve(); cmd != "/opt/x" {
			t.Errorf("%s: command override gave %s", name, cmd)
		}
	}
}

func TestExpand(t *testing.T) {
	look := env(map[string]string{"A": "1", "B_2": "two"})
	for _, tc := range []struct{ in, out, err string }{
		{"plain", "plain", ""},
		{"${A}", "1", ""},
		{"x${A}y${B_2}z", "x1ytwoz", ""},
		{"$${A}", "${A}", ""},
		{"$A $ $$", "$A $ $$", ""},
		{"${MISSING}", "", "environment variable MISSING is not set"},
		{"${A", "", "unterminated ${"},
		{"${1X}", "", `invalid variable name "1X"`},
	} {
		got, err := expand(tc.in, look)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("expand(%q) err = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.out {
			t.Errorf("expand(%q) = %q, %v; want %q", tc.in, got, err, tc.out)
		}
	}
}

func TestLoadChecksAgentDir(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "zooid.yaml")
	data := okTransport + `agents:
  a:
    acp: { preset: pi }
    dir: missing
    matrix: { user_id: '@a', rooms: ['#r'] }
`
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AS", testAS)
	t.Setenv("HS", testHS)
	_, err := Load(p)
	if err == nil || !strings.Contains(err.Error(), p+":10: agents.a.dir: working directory:") {
		t.Fatalf("err = %v", err)
	}
	if _, err := Load(filepath.Join(dir, "nope.yaml")); err == nil {
		t.Fatal("loading a missing file succeeded")
	}
}

func TestRunDirTooLong(t *testing.T) {
	data := okTransport + "run_dir: /" + strings.Repeat("x", 70) + `
agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`
	_, err := Parse([]byte(data), "zooid.yaml", testEnv)
	if err == nil || !strings.Contains(err.Error(), "zooid.yaml:7: run_dir:") {
		t.Fatalf("err = %v", err)
	}
}

func TestLoadRefusesARunDirOthersCanSteer(t *testing.T) {
	dir := t.TempDir()
	shared := filepath.Join(dir, "shared")
	if err := os.Mkdir(shared, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "zooid.yaml")
	data := okTransport + `run_dir: shared
agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', rooms: ['#r'] }
`
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AS", testAS)
	t.Setenv("HS", testHS)
	_, err := Load(p)
	want := p + ":7: run_dir: run dir " + shared + " is writable by group or others (mode 1777)"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want %q", err, want)
	}
	if st, _ := os.Stat(shared); st.Mode().Perm() != 0o777 {
		t.Fatalf("check changed the run dir's mode to %v", st.Mode())
	}
}

// TestPresetEnvironment: the gemini preset trusts the agent's folder (gemini
// connects no MCP server in an untrusted one), acp.env overrides that, and a
// command override drops the preset's variables with its command.
func TestPresetEnvironment(t *testing.T) {
	for _, tc := range []struct {
		acp  ACP
		want map[string]string
	}{
		{ACP{Preset: "gemini"}, map[string]string{"GEMINI_CLI_TRUST_WORKSPACE": "true"}},
		{ACP{Preset: "gemini", Env: map[string]string{"GEMINI_CLI_TRUST_WORKSPACE": "false", "X": "1"}}, map[string]string{"GEMINI_CLI_TRUST_WORKSPACE": "false", "X": "1"}},
		{ACP{Preset: "gemini", Command: "/opt/gemini"}, map[string]string{}},
		{ACP{Preset: "claude", Env: map[string]string{"X": "1"}}, map[string]string{"X": "1"}},
	} {
		if got := tc.acp.Environment(); !maps.Equal(got, tc.want) {
			t.Errorf("%+v: environment %v, want %v", tc.acp, got, tc.want)
		}
	}
}
