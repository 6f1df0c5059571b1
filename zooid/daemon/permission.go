package daemon

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"

	acp "github.com/coder/acp-go-sdk"

	"github.com/zooid-dev/zooid/zooid/acpagent"
	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/mcpserver"
	"github.com/zooid-dev/zooid/zooid/tools"
)

// Zooid's own tools never wait on a permission prompt. Claude Code and
// gemini-cli ask their client (session/request_permission) before an MCP
// tool call; under the default `permission: deny` every Zooid tool call
// would be refused there, before it reached the daemon. The daemon grants
// requests for the tools of the MCP server it injected itself, whatever the
// agent's policy says for everything else.
//
// A request names its tool only through fields the adapter fills in, so the
// match is exact, per adapter, and on the fields a model cannot steer: the
// request's kind (which the adapter derives from the tool, never from its
// input) and its title as the adapter builds it for an MCP tool of the server
// named mcpserver.ServerName. A shell command whose text is a Zooid tool's
// name has the kind "execute" and is never taken for one
// (TestOwnToolRequests). codex asks only before MCP tools that may change
// something (zooid_send_message, the task tools), through an approval whose
// raw input names the server. Adapters that ask no permission for MCP tools
// (opencode, pi) need no rule; an agent started by a command that
// is no preset's adapter gets none either, since nothing says how it titles
// its requests, and its Zooid calls follow its `permission:`.

// ownTool says which Zooid tool a permission request is for, when it is one
// of the daemon's own, as the adapter presents it; ok is false otherwise.
func ownTool(adapter string, req acp.RequestPermissionRequest) (tool string, ok bool) {
	tc := req.ToolCall
	if tc.Title == nil {
		return "", false
	}
	title := *tc.Title
	kindOther := tc.Kind != nil && *tc.Kind == acp.ToolKindOther
	switch adapter {
	case "claude":
		// claude-agent-acp titles a tool it has no rule for by its name, and
		// Claude Code names MCP tools mcp__<server>__<tool>.
		name, found := strings.CutPrefix(title, "mcp__"+mcpserver.ServerName+"__")
		if !found || !kindOther {
			return "", false
		}
		tool = name
	case "gemini":
		// gemini-cli titles an MCP tool "<tool> (<server> MCP Server)" and
		// offers the "allow every tool of this server" option only for MCP
		// tools.
		name, found := strings.CutSuffix(title, " ("+mcpserver.ServerName+" MCP Server)")
		if !found || !kindOther || !offersOption(req, "proceed_always_server") {
			return "", false
		}
		tool = name
	case "codex":
		// codex asks before MCP tools that are not read-only, as an
		// elicitation: its raw input names the server it is for and the
		// kind of approval, and its message the tool.
		name, found := codexMCPApproval(title, tc.RawInput)
		if !found {
			return "", false
		}
		tool = name
	default:
		return "", false
	}
	for _, t := range tools.All() {
		if t.Name == tool {
			return tool, true
		}
	}
	return "", false
}

// codexMCPApproval reads codex-acp's approval of an MCP tool call (codex-acp
// 0.16.0: title "Approve MCP tool call", raw input {server_name, request:
// {_meta: {codex_approval_kind: "mcp_tool_call"}, message: "Allow the <server>
// MCP server to run tool \"<tool>\"?"}}) for the daemon's server, and
// names the tool.
func codexMCPApproval(title string, raw any) (string, bool) {
	if title != "Approve MCP tool call" {
		return "", false
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return "", false
	}
	var in struct {
		ServerName string `json:"server_name"`
		Request    struct {
			Meta struct {
				Kind string `json:"codex_approval_kind"`
			} `json:"_meta"`
			Message string `json:"message"`
		} `json:"request"`
	}
	if json.Unmarshal(b, &in) != nil || in.ServerName != mcpserver.ServerName || in.Request.Meta.Kind != "mcp_tool_call" {
		return "", false
	}
	rest, found := strings.CutPrefix(in.Request.Message, "Allow the "+mcpserver.ServerName+" MCP server to run tool \"")
	if !found {
		return "", false
	}
	name, found := strings.CutSuffix(rest, "\"?")
	if !found || strings.Contains(name, "\"") {
		return "", false
	}
	return name, true
}

func offersOption(req acp.RequestPermissionRequest, id acp.PermissionOptionId) bool {
	for _, o := range req.Options {
		if o.OptionId == id {
			return true
		}
	}
	return false
}

// adapterOf names the preset whose adapter an agent runs: its preset, or,
// for a command, the preset whose adapter has that program name (an operator
// may start claude-agent-acp by its path).
func adapterOf(a config.ACP) string {
	if a.Command == "" {
		return a.Preset
	}
	base := filepath.Base(a.Command)
	for _, p := range config.PresetNames() {
		if cmd, _ := (config.ACP{Preset: p}).Resolve(); cmd == base {
			return p
		}
	}
	return ""
}

// permissionPolicy decides an agent's permission requests: its own Zooid
// tools are allowed once; everything else as its `permission:` says, where
// allow also means once (an "always" answer would let the adapter skip the
// daemon for the rest of the session).
func permissionPolicy(a *config.Agent) func(context.Context, acp.RequestPermissionRequest) acp.RequestPermissionResponse {
	adapter := adapterOf(a.ACP)
	allow := a.Permission == config.PermissionAllow
	return func(_ context.Context, req acp.RequestPermissionRequest) acp.RequestPermissionResponse {
		if _, own := ownTool(adapter, req); own || allow {
			return acpagent.Allow(req)
		}
		return acpagent.Deny(req)
	}
}
