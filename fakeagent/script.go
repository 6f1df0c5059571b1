// Package fakeagent is a real ACP agent program whose behaviour is scripted by
// the test world over a control socket, plus the test-side Controller that
// scripts it and records what it saw.
//
// The agent runs as a child process exactly like a real agent
// (`zooid fake-agent --control SOCKET --agent NAME`, or a test binary
// re-executing itself, see ExecIfRequested). It never reads test files: every
// prompt turn is fetched from the controller, and every observation (prompts,
// sessions, tool results, cancels, permission outcomes) is reported back.
package fakeagent

import (
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// DefaultReply is what an agent says when no turn is queued for it.
const DefaultReply = "ok"

// Turn is the script of one prompt turn: its actions run in order.
type Turn []Action

// Action is one step of a turn. Set fields run in this order: Wait, Say,
// Chunks, ListTools, CallTool, Reach, Permission, ReadFile, Dial, Run, Crash, Hang, Stop.
type Action struct {
	// Say sends one agent_message_chunk.
	Say string `json:"say,omitempty"`
	// Chunks sends one agent_message_chunk per element.
	Chunks []string `json:"chunks,omitempty"`
	// CallTool calls this MCP tool with Args on the session's MCP servers.
	CallTool string         `json:"call_tool,omitempty"`
	Args     map[string]any `json:"args,omitempty"`
	// Repeat makes CallTool run this many times in a row (zero: once), each
	// reported; benchmarks use it to time calls without a turn per call.
	Repeat int `json:"repeat,omitempty"`
	// Raw makes CallTool bypass the agent's MCP client: the agent starts a
	// bridge of its own from the session's first MCP server entry,
	// initializes it with hand-written JSON-RPC lines, then times each call
	// from its tools/call line written to the bridge's stdin until the
	// answer's line is read from its stdout. No ACP tool-call updates are
	// sent, and the results are reported after the last call, so Elapsed is
	// the bridge and what is behind it, not the agent's client or the
	// harness.
	Raw bool `json:"raw,omitempty"`
	// Stop ends the turn now with this stop reason.
	Stop acp.StopReason `json:"stop,omitempty"`
	// Crash makes the process exit with status 3 mid-turn.
	Crash bool `json:"crash,omitempty"`
	// Hang blocks the turn until session/cancel arrives; it then ends cancelled.
	Hang bool `json:"hang,omitempty"`
	// Wait sleeps (cancellable) before the other fields run.
	Wait time.Duration `json:"wait,omitempty"`
	// UntilReleased blocks (cancellable) until the controller releases the
	// agent, before the other fields run: a barrier, where Wait is a guess.
	UntilReleased bool `json:"until_released,omitempty"`
	// ListTools runs tools/list on every MCP server and reports the names.
	ListTools bool `json:"list_tools,omitempty"`
	// Reach tries, from the agent process, each target (see Try) and
	// reports what the kernel answered (ReachResult).
	Reach []string `json:"reach,omitempty"`
	// Permission sends session/request_permission for a tool call with this
	// title (options allow_once "allow" and reject_once "reject") and reports
	// the outcome.
	Permission string `json:"permission,omitempty"`
	// ReadFile reads this file where the agent runs (inside its container,
	// say /proc/self/mountinfo) and reports its content as a Probe.
	ReadFile string `json:"read_file,omitempty"`
	// Dial connects to this unix socket, as an agent trying another agent's
	// socket would, and reports whether it could as a Probe.
	Dial string `json:"dial,omitempty"`
	// Run starts this command (argv; the program found on the agent's
	// PATH) in the agent's working directory with its environment, as an
	// agent runs a tool, and reports its combined output as a Probe.
	Run []string `json:"run,omitempty"`
}

// ReadFile reports the content of a file as the agent sees it.
func ReadFile(path string) Action { return Action{ReadFile: path} }

// Dial reports whether the agent can connect to the unix socket at path.
func Dial(path string) Action { return Action{Dial: path} }

// RunTool reports what the command argv printed, run as the agent runs a
// tool (a child of the agent process, in its working directory).
func RunTool(argv ...string) Action { return Action{Run: argv} }

// Probe is what a ReadFile, Dial or Run action found where the agent runs.
type Probe struct {
	SessionID acp.SessionId `json:"session_id"`
	// Op is "read_file", "dial" or "run"; Path its argument (a command's
	// argv joined by spaces).
	Op   string `json:"op"`
	Path string `json:"path"`
	// Out is the file's content (read_file) or the command's output (run);
	// Err why it failed, "" when it worked.
	Out string `json:"out,omitempty"`
	Err string `json:"err,omitempty"`
}

// WaitUntilReleased blocks the turn until Controller.Release(agent).
func WaitUntilReleased() Action { return Action{UntilReleased: true} }

// Say sends text as one message chunk.
func Say(text string) Action { return Action{Say: text} }

// SayInChunks sends each part as its own message chunk, in order.
func SayInChunks(parts ...string) Action { return Action{Chunks: parts} }

// CallTool calls an MCP tool by name.
func CallTool(name string, args map[string]any) Action { return Action{CallTool: name, Args: args} }

// Stop ends the turn with the given stop reason.
func Stop(reason acp.StopReason) Action { return Action{Stop: reason} }

// Crash exits the agent process with status 3.
func Crash() Action { return Action{Crash: true} }

// Hang blocks until the turn is cancelled.
func Hang() Action { return Action{Hang: true} }

// Wait sleeps for d, or until the turn is cancelled.
func Wait(d time.Duration) Action { return Action{Wait: d} }

// Reach tries each target from the agent process (see Try).
func Reach(targets ...string) Action { return Action{Reach: targets} }

// ListTools lists the tools of every MCP server of the session.
func ListTools() Action { return Action{ListTools: true} }

// AskPermission requests permission for a tool call with this title.
func AskPermission(title string) Action { return Action{Permission: title} }

// Prompt is one session/prompt the agent received.
type Prompt struct {
	SessionID acp.SessionId `json:"session_id"`
	Text      string        `json:"text"`
	At        time.Time     `json:"at"`
}

// SessionInfo is what one session/new contained, plus the agent process that
// received it.
type SessionInfo struct {
	SessionID  acp.SessionId   `json:"session_id"`
	Cwd        string          `json:"cwd"`
	McpServers []acp.McpServer `json:"mcp_servers"`
	// Env and Argv are the agent process's environment and argv at start,
	// Wd its working directory then (the process's own, which the daemon
	// sets apart from the cwd it names in session/new).
	Env  []string `json:"env"`
	Argv []string `json:"argv"`
	Pid  int      `json:"pid"`
	Wd   string   `json:"wd"`
}

// ToolResult is the outcome of one CallTool action.
type ToolResult struct {
	SessionID acp.SessionId  `json:"session_id"`
	Tool      string         `json:"tool"`
	Args      map[string]any `json:"args"`
	// IsError is the tool result's isError flag.
	IsError bool `json:"is_error"`
	// Text joins the text contents of the result.
	Text       string `json:"text"`
	Structured any    `json:"structured,omitempty"`
	// Err is a protocol-level error (no such tool, MCP failure); empty on success.
	Err string `json:"err,omitempty"`
	// InvalidParams says Err is the server's JSON-RPC "invalid params"
	// (-32602), which MCP answers for a tool the server does not offer; a
	// broken bridge or transport fails otherwise.
	InvalidParams bool `json:"invalid_params,omitempty"`
	// Elapsed is how long the MCP call took as the agent saw it: the request
	// written to its bridge's stdin until the answer was read back.
	Elapsed time.Duration `json:"elapsed"`
}

// Closed is one session/close the agent was sent.
type Closed struct {
	SessionID acp.SessionId `json:"session_id"`
}

// Cancel is one session/cancel the agent received.
type Cancel struct {
	SessionID acp.SessionId `json:"session_id"`
	At        time.Time     `json:"at"`
}

// PermissionResult is the client's answer to one Permission action.
type PermissionResult struct {
	SessionID acp.SessionId `json:"session_id"`
	Title     string        `json:"title"`
	// Outcome is the selected option id ("allow", "reject") or "cancelled";
	// "error: ..." when the request failed.
	Outcome string `json:"outcome"`
}

// MCPError is a failure to start or initialize one MCP server of a session.
type MCPError struct {
	SessionID acp.SessionId `json:"session_id"`
	Server    string        `json:"server"`
	Err       string        `json:"err"`
}

// ReachResult is the outcome of one Reach attempt.
type ReachResult struct {
	// Path is the target as given (see Try).
	Path string `json:"path"`
	// Err is the error's text, "" when the attempt succeeded.
	Err string `json:"err,omitempty"`
	// EACCES says the kernel refused with permission denied.
	EACCES bool `json:"eacces,omitempty"`
	// EPERM says the kernel refused with operation not permitted (ptrace
	// and signals are refused so).
	EPERM bool `json:"eperm,omitempty"`
}

// Refused says the kernel refused the attempt (EACCES or EPERM).
func (r ReachResult) Refused() bool { return r.EACCES || r.EPERM }
