// Package config reads zooid.yaml: it expands ${VAR} from the environment,
// reads secrets from files, validates strictly (unknown keys, names, ids,
// references, where tokens may appear) and reports every problem at once as
// "file:line: path: reason". It is the only place a config is judged:
// `zooid check` and `zooid run` both call Load, and the transports get their
// options from a Config that passed.
package config

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/rundir"
	"github.com/zooid-dev/zooid/zooid/unixuser"
)

// Transport types.
const (
	TypeMatrix = "matrix"
	TypeHTTP   = "http"
)

// Trigger values of a Matrix-bound agent.
const (
	TriggerMention = "mention"
	TriggerAny     = "any"
)

// Permission policies for an agent's session/request_permission.
const (
	PermissionDeny  = "deny"
	PermissionAllow = "allow"
)

// Config is a validated zooid.yaml with defaults applied.
type Config struct {
	// File is the path the config was read from, as given.
	File       string
	Transports []Transport
	Agents     []Agent
	// Rooms holds the settings of the rooms under rooms:, by room; Room gives any
	// room's settings with the defaults.
	Rooms map[RoomRef]Room
	// Workstation names this daemon among several with agents in the same
	// rooms (workstation:, NamePattern; empty when not set): its agents are
	// addressed as name or workstation.name, and their default user ids are
	// @workstation.name.
	Workstation string
	// StateDir holds durable state; default ".zooid" next to the file.
	StateDir string
	// TurnTimeout bounds one agent turn (turn_timeout: 30m); zero means the
	// daemon's default. A turn that runs longer is treated as a hung agent.
	TurnTimeout time.Duration
	// IdleTimeout stops an agent process that waited that long for its
	// thread's next turn (idle_timeout: 30m); zero means the daemon's default.
	IdleTimeout time.Duration
	// RunDir holds the agents' sockets; default $XDG_RUNTIME_DIR/zooid.
	// Empty means the daemon makes a fresh private directory at start.
	RunDir string
	// Trace, when set, turns on the flight recorder (trace: {dir, max_file_size}).
	Trace *Trace
	// User is the top-level user: every agent's default (see Agent.User).
	User *unixuser.User
	// MaxProcesses caps live agent processes across all agents
	// (max_processes, default DefaultMaxProcesses).
	MaxProcesses int
	// Prewarm is every agent's default Agent.Prewarm (prewarm, default
	// false).
	Prewarm bool
	// QueueNoticeAfter is how long a turn waits for an agent process before
	// the thread is told it is queued (queue_notice_after, default
	// DefaultQueueNoticeAfter).
	QueueNoticeAfter time.Duration
	// ToolTimeout bounds one Zooid MCP tool call (tool_timeout, default
	// DefaultToolTimeout): a call still waiting on the homeserver then
	// returns "unavailable" and the session goes on.
	ToolTimeout time.Duration
	// PostTimeout bounds one try of a post to the homeserver (post_timeout,
	// default DefaultPostTimeout); an unanswered try is retried with the
	// same txn id.
	PostTimeout time.Duration
	// TaskTimeout bounds how long a task thread stays open (task_timeout,
	// default DefaultTaskTimeout): past it the task closes timed_out, is
	// reported once and frees its slot, so a task waiting on a person who
	// never answers does not hold the room's capacity for ever. It also bounds
	// the wait for the return of a handoff to another daemon's agent.
	TaskTimeout time.Duration
	// Encryption turns on reading and writing end-to-end encrypted rooms
	// (encryption: true, default false; behaviour §10). Off, an encrypted
	// bound room gets one notice per agent saying it cannot be read.
	Encryption bool
	// RoomKeyWait bounds how long an encrypted message waits for its room
	// key before it is taken as undecryptable (room_key_wait, with
	// encryption: true); zero means the default, DefaultRoomKeyWait.
	RoomKeyWait time.Duration
	// SecretFiles are the files tokens were read from (the *_file keys),
	// absolute: like zooid.yaml, no agent may read them.
	SecretFiles []string
}

// AgentUsers says whether any agent runs as a user of its own.
func (c *Config) AgentUsers() bool {
	for _, a := range c.Agents {
		if a.User != nil {
			return true
		}
	}
	return false
}

// Transport is one entry under transports.
type Transport struct {
	Name string
	// Type is TypeMatrix or TypeHTTP; exactly the matching field is set.
	Type   string
	Matrix *MatrixTransport
	HTTP   *HTTPTransport
}

// MatrixTransport is a Matrix appservice connection.
type MatrixTransport struct {
	// Homeserver is the client-server API base URL.
	Homeserver string
	// ServerName is the homeserver's server name (the part after ':' in ids);
	// may be empty when every id in the file is written in full.
	ServerName string
	// ASToken and HSToken come from as_token / hs_token (usually ${VAR}) or
	// as_token_file / hs_token_file; each is at least MinSecretLen long.
	ASToken string
	HSToken string
	// HSTokenFrom says where HSToken came from, for messages that must send
	// an operator to it without printing it: "hs_token_file /etc/zooid/hs_token",
	// "hs_token ${MATRIX_HS_TOKEN}" or "hs_token (written inline in zooid.yaml)".
	HSTokenFrom string
	// Listen is the appservice push listener, e.g. 127.0.0.1:9000; empty
	// means no push listener: the daemon uses /sync.
	Listen string
	// ID is the registration id, default "zooid".
	ID string
	// SenderLocalpart is the appservice bot's localpart, default "zooid".
	SenderLocalpart string
}

// HTTPTransport is the plain HTTP API.
type HTTPTransport struct {
	// Port is the port given in the file (0 when only listen was given).
	Port int
	// Listen is the address to bind; from port it is 127.0.0.1:PORT.
	Listen string
	// Token is the bearer token (token or token_file); empty means no
	// authentication, which the parser allows only on a loopback Listen.
	Token string
}

// Agent is one entry under agents.
type Agent struct {
	// Name matches NamePattern.
	Name string
	ACP  ACP
	// Dir is the agent's working directory (absolute). Empty means the
	// agent's own directory under the state dir (see WorkDir), never the
	// directory of zooid.yaml.
	Dir string
	// Exactly one of Matrix and HTTP is set.
	Matrix *AgentMatrix
	HTTP   *AgentHTTP
	// Permission is PermissionDeny (default) or PermissionAllow.
	Permission string
	// User is the unix user the agent's process runs as (its user:, else
	// the top-level one); nil means the daemon's own user.
	User *unixuser.User
	// Runtime is RuntimeLocal (default) or RuntimeDocker: runtime: per
	// agent, defaulting to the top-level runtime:.
	Runtime string
	// Container is set exactly when Runtime is RuntimeDocker, with its
	// defaults filled (Bridge by Load).
	Container *Container
	// MaxProcesses caps this agent's live processes (max_processes, default
	// DefaultAgentMaxProcesses); beyond it the least recently used idle one
	// is stopped, and when none is idle turns wait in arrival order.
	MaxProcesses int
	// SessionsPerProcess is how many threads' ACP sessions one process of
	// this agent hosts over its life (sessions_per_process, default 1), or
	// SessionsPerProcessAuto.
	SessionsPerProcess int
	// Prewarm keeps one spare process of this agent started and initialized
	// before a thread needs it, counted against the process caps (prewarm,
	// default the top-level one).
	Prewarm bool
	// Sandbox holds a local agent's process (sandbox:, defaulting to the
	// top-level one, else Landlock); nil for a runtime docker agent, whose
	// container is its sandbox.
	Sandbox *Sandbox
}

// ACP says how to start the agent process.
type ACP struct {
	// Preset is one of PresetNames, or empty.
	Preset string
	// Command overrides the preset's command; relative paths with a slash
	// are resolved against the config file's directory.
	Command string
	// Args are appended to the preset's arguments, or follow Command.
	Args []string
	// Env is added to the environment the daemon gives the agent; a value
	// carrying a token is refused.
	Env map[string]string
	// InheritEnv names variables of the daemon's environment the agent gets
	// on top of the daemon's allowlist (inherit_env), e.g. an API key.
	InheritEnv []string
}

// AgentMatrix binds an agent to a Matrix transport.
type AgentMatrix struct {
	// Transport names a matrix transport; default the only one.
	Transport string
	// UserID is the agent's own Matrix user, normalised with the server name.
	UserID      id.UserID
	DisplayName string
	// Rooms are aliases and room ids, normalised with the server name.
	Rooms []RoomRef
	// Trigger is TriggerMention (default) or TriggerAny.
	Trigger string
}

// AgentHTTP binds an agent to an HTTP transport.
type AgentHTTP struct {
	// Transport names an http transport; default the only one.
	Transport string
}

type preset struct {
	command string
	args    []string
	env     map[string]string
	// install says how an operator gets the command, for messages about a
	// missing one.
	install string
	// self: the command is this zooid executable (SelfCommand), whatever its
	// path; the daemon puts its own in (ACP.RunsSelf).
	self bool
}

// SelfCommand is the command ACP.Resolve names for a preset whose agent is
// built into zooid itself (demo): the daemon runs its own executable instead.
const SelfCommand = "zooid"

// presets start each adapter's installed command, as its project documents
// it; docs/agents.md names the package and version proven with each.
var presets = map[string]preset{
	"claude":   {command: "claude-agent-acp", install: "npm install -g @zed-industries/claude-agent-acp"},
	"opencode": {command: "opencode", args: []string{"acp"}, install: "npm install -g opencode-ai"},
	"codex":    {command: "codex-acp", install: "npm install -g @zed-industries/codex-acp"},
	// gemini connects no MCP server in a folder it does not trust, so without
	// this the Zooid tools would be missing; the agent's folder is its own
	// working directory, which the operator chose.
	"gemini": {command: "gemini", args: []string{"--acp"}, env: map[string]string{"GEMINI_CLI_TRUST_WORKSPACE": "true"}, install: "npm install -g @google/gemini-cli"},
	"pi":     {command: "pi-acp", install: "npm install -g pi-acp @earendil-works/pi-coding-agent"},
	// The demo agent needs no model and nothing installed: a first conversation
	// with the daemon and its tools (zooid/demoagent).
	"demo": {command: SelfCommand, args: []string{"demo-agent"}, self: true},
}

// PresetInstall says how to install the command of the preset name ("" for
// an unknown preset).
func PresetInstall(name string) string { return presets[name].install }

// PresetNames lists the known presets, sorted.
func PresetNames() []string {
	names := make([]string, 0, len(presets))
	for n := range presets {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Resolve gives the command line to start the agent: the preset's, with Args
// appended, unless Command overrides it.
func (a ACP) Resolve() (command string, args []string) {
	if a.Command != "" {
		return a.Command, slices.Clone(a.Args)
	}
	p := presets[a.Preset]
	return p.command, append(slices.Clone(p.args), a.Args...)
}

// RunsSelf says the agent is built into zooid (the demo preset): its command
// is the daemon's own executable, not SelfCommand looked up on a PATH.
func (a ACP) RunsSelf() bool {
	return a.Command == "" && presets[a.Preset].self
}

// Environment is the variables the agent gets on top of the daemon's
// allowlist: the preset's own (unless Command overrides the preset), then
// Env, which wins.
func (a ACP) Environment() map[string]string {
	out := map[string]string{}
	if a.Command == "" {
		maps.Copy(out, presets[a.Preset].env)
	}
	maps.Copy(out, a.Env)
	return out
}

// Agent finds an agent by name.
func (c *Config) Agent(name string) (*Agent, bool) {
	for i := range c.Agents {
		if c.Agents[i].Name == name {
			return &c.Agents[i], true
		}
	}
	return nil, false
}

// WorkDir is where agent a runs: its configured dir, else its own directory
// under the state dir.
func (c *Config) WorkDir(a *Agent) string {
	if a.Dir != "" {
		return a.Dir
	}
	return filepath.Join(c.StateDir, "agents", a.Name)
}

// Secrets lists every token in the config; none of them may reach an agent.
func (c *Config) Secrets() []string {
	var out []string
	for _, t := range c.Transports {
		if t.Matrix != nil {
			out = append(out, t.Matrix.ASToken, t.Matrix.HSToken)
		}
		if t.HTTP != nil && t.HTTP.Token != "" {
			out = append(out, t.HTTP.Token)
		}
	}
	return out
}

// Transport finds a transport by name.
func (c *Config) Transport(name string) (*Transport, bool) {
	for i := range c.Transports {
		if c.Transports[i].Name == name {
			return &c.Transports[i], true
		}
	}
	return nil, false
}

// Error is one problem in a config file.
type Error struct {
	File string
	Line int
	// Path is the dotted key path, e.g. agents.agent-a.matrix.trigger.
	Path string
	Msg  string
}

func (e *Error) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	if e.Path == "" {
		return loc + ": " + e.Msg
	}
	return loc + ": " + e.Path + ": " + e.Msg
}

// ErrorList is every problem found in a file, in line order. Parse and Load
// return it as their error; use errors.As to get at the entries.
type ErrorList []*Error

func (l ErrorList) Error() string {
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "\n")
}

// Load reads, expands and validates the file at path, looking variables up
// in the process environment. It also checks what the daemon will find on
// disk: configured agent directories must exist, an existing run dir must be
// one nobody else can steer (rundir.Check), and an agent with a user of its
// own must be startable as it and unable to read the config, its secrets and
// the state dir (checkUsers), so that check refuses what run would.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading config: %w", err)
	}
	base := filepath.Dir(path)
	if abs, err := filepath.Abs(base); err == nil {
		base = abs
	}
	p := newParser(path, base, os.LookupEnv)
	cfg := p.parse(data)
	if cfg != nil {
		for _, a := range cfg.Agents {
			if a.Dir == "" {
				continue // the daemon creates the default one
			}
			st, err := os.Stat(a.Dir)
			switch {
			case err != nil:
				p.errorAt(p.dirLines[a.Name], "agents."+a.Name+".dir", "working directory: %v", err)
			case !st.IsDir():
				p.errorAt(p.dirLines[a.Name], "agents."+a.Name+".dir", "%s is not a directory", a.Dir)
			}
		}
		if cfg.RunDir != "" {
			if err := rundir.Check(cfg.RunDir); err != nil {
				p.errorAt(p.runDirLine, "run_dir", "%v", err)
			}
		}
		p.checkUsers(cfg)
		p.checkDocker(cfg)
		p.checkSandboxPaths(cfg)
	}
	if err := p.result(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// Parse validates data as zooid.yaml. filename is used in messages and its
// directory anchors relative paths; lookupEnv resolves ${VAR} (nil means
// every variable is unset).
func Parse(data []byte, filename string, lookupEnv func(string) (string, bool)) (*Config, error) {
	if lookupEnv == nil {
		lookupEnv = func(string) (string, bool) { return "", false }
	}
	base := filepath.Dir(filename)
	if abs, err := filepath.Abs(base); err == nil {
		base = abs
	}
	p := newParser(filename, base, lookupEnv)
	cfg := p.parse(data)
	if err := p.result(); err != nil {
		return nil, err
	}
	return cfg, nil
}
