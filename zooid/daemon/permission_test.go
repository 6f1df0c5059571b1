package daemon

import (
	"context"
	"testing"

	acp "github.com/coder/acp-go-sdk"

	"github.com/zooid-dev/zooid/zooid/acpagent"
	"github.com/zooid-dev/zooid/zooid/config"
)

// claudeOptions and geminiMCPOptions are the options the adapters of
// docs/agents.md offer, in their order (claude-agent-acp 0.23.1
// acp-agent.js canUseTool; gemini-cli 0.61 toPermissionOptions for "mcp").
var (
	claudeOptions = []acp.PermissionOption{
		{Kind: acp.PermissionOptionKindAllowAlways, Name: "Always Allow", OptionId: "allow_always"},
		{Kind: acp.PermissionOptionKindAllowOnce, Name: "Allow", OptionId: "allow"},
		{Kind: acp.PermissionOptionKindRejectOnce, Name: "Reject", OptionId: "reject"},
	}
	geminiMCPOptions = []acp.PermissionOption{
		{Kind: acp.PermissionOptionKindAllowAlways, Name: "Allow all server tools for this session", OptionId: "proceed_always_server"},
		{Kind: acp.PermissionOptionKindAllowAlways, Name: "Allow tool for this session", OptionId: "proceed_always_tool"},
		{Kind: acp.PermissionOptionKindAllowOnce, Name: "Allow", OptionId: "proceed_once"},
		{Kind: acp.PermissionOptionKindRejectOnce, Name: "Reject", OptionId: "cancel"},
	}
	geminiExecOptions = []acp.PermissionOption{
		{Kind: acp.PermissionOptionKindAllowAlways, Name: "Allow for this session", OptionId: "proceed_always"},
		{Kind: acp.PermissionOptionKindAllowOnce, Name: "Allow", OptionId: "proceed_once"},
		{Kind: acp.PermissionOptionKindRejectOnce, Name: "Reject", OptionId: "cancel"},
	}
)

func permReq(kind acp.ToolKind, title string, opts []acp.PermissionOption) acp.RequestPermissionRequest {
	return acp.RequestPermissionRequest{SessionId: "s1", Options: opts, ToolCall: acp.ToolCallUpdate{
		ToolCallId: "toolu_1", Kind: &kind, Title: &title,
	}}
}

// codexReq is codex-acp 0.16.0's approval of an MCP tool call, as it sent it
// for zooid_complete_task in features/real_agents.feature.
func codexReq(server, kind, message string) acp.RequestPermissionRequest {
	title := "Approve MCP tool call"
	return acp.RequestPermissionRequest{SessionId: "s1", Options: []acp.PermissionOption{
		{Kind: acp.PermissionOptionKindAllowOnce, Name: "Allow", OptionId: "approved"},
		{Kind: acp.PermissionOptionKindAllowAlways, Name: "Allow for this session", OptionId: "approved-for-session"},
		{Kind: acp.PermissionOptionKindAllowAlways, Name: "Allow and don't ask again", OptionId: "approved-always"},
		{Kind: acp.PermissionOptionKindRejectOnce, Name: "Cancel", OptionId: "cancel"},
	}, ToolCall: acp.ToolCallUpdate{ToolCallId: "call_worker_0", Title: &title, RawInput: map[string]any{
		"id": "mcp_tool_call_approval_call_worker_0", "server_name": server, "turn_id": "t1",
		"request": map[string]any{"_meta": map[string]any{"codex_approval_kind": kind}, "message": message, "mode": "form"},
	}}}
}

// TestOwnToolRequests holds the match of the daemon's own tools to the shapes
// each adapter gives them, and refuses every look-alike a model could steer:
// a shell command spelled like a Zooid tool, another MCP server's tool of the
// same name, a Zooid-looking name that is no tool of the daemon's.
func TestOwnToolRequests(t *testing.T) {
	cases := []struct {
		name    string
		adapter string
		req     acp.RequestPermissionRequest
		want    string // the tool, or "" for not the daemon's own
	}{
		{"claude: a Zooid tool", "claude", permReq(acp.ToolKindOther, "mcp__zooid__zooid_get_room_info", claudeOptions), "zooid_get_room_info"},
		{"claude: task completion", "claude", permReq(acp.ToolKindOther, "mcp__zooid__zooid_complete_task", claudeOptions), "zooid_complete_task"},
		{"claude: a shell command spelled like one", "claude", permReq(acp.ToolKindExecute, "mcp__zooid__zooid_get_room_info", claudeOptions), ""},
		{"claude: another server's tool of the same name", "claude", permReq(acp.ToolKindOther, "mcp__other__zooid_get_room_info", claudeOptions), ""},
		{"claude: no tool of the daemon's", "claude", permReq(acp.ToolKindOther, "mcp__zooid__zooid_run_shell", claudeOptions), ""},
		{"claude: a bare tool name", "claude", permReq(acp.ToolKindOther, "zooid_get_room_info", claudeOptions), ""},
		{"gemini: a Zooid tool", "gemini", permReq(acp.ToolKindOther, "zooid_get_members (zooid MCP Server)", geminiMCPOptions), "zooid_get_members"},
		{"gemini: without the MCP options", "gemini", permReq(acp.ToolKindOther, "zooid_get_members (zooid MCP Server)", geminiExecOptions), ""},
		{"gemini: a shell command spelled like one", "gemini", permReq(acp.ToolKindExecute, "zooid_get_members (zooid MCP Server)", geminiExecOptions), ""},
		{"gemini: another server", "gemini", permReq(acp.ToolKindOther, "zooid_get_members (other MCP Server)", geminiMCPOptions), ""},
		{"gemini shape under claude", "claude", permReq(acp.ToolKindOther, "zooid_get_members (zooid MCP Server)", geminiMCPOptions), ""},
		{"a command that is no preset's adapter", "", permReq(acp.ToolKindOther, "mcp__zooid__zooid_get_room_info", claudeOptions), ""},
		{"codex: a Zooid tool", "codex", codexReq("zooid", "mcp_tool_call", `Allow the zooid MCP server to run tool "zooid_complete_task"?`), "zooid_complete_task"},
		{"codex: another server", "codex", codexReq("other", "mcp_tool_call", `Allow the other MCP server to run tool "zooid_complete_task"?`), ""},
		{"codex: another server claiming zooid's message", "codex", codexReq("other", "mcp_tool_call", `Allow the zooid MCP server to run tool "zooid_complete_task"?`), ""},
		{"codex: not an MCP tool approval", "codex", codexReq("zooid", "exec", `Allow the zooid MCP server to run tool "zooid_complete_task"?`), ""},
		{"codex: no tool of the daemon's", "codex", codexReq("zooid", "mcp_tool_call", `Allow the zooid MCP server to run tool "zooid_rm"?`), ""},
		{"codex shape under claude", "claude", codexReq("zooid", "mcp_tool_call", `Allow the zooid MCP server to run tool "zooid_complete_task"?`), ""},
		{"claude shape under codex", "codex", permReq(acp.ToolKindOther, "mcp__zooid__zooid_get_room_info", claudeOptions), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := ownTool(c.adapter, c.req)
			if ok != (c.want != "") || got != c.want {
				t.Fatalf("ownTool(%q, %q) = %q, %v; want %q", c.adapter, *c.req.ToolCall.Title, got, ok, c.want)
			}
		})
	}
	// Without a kind the request says nothing of where the tool came from.
	req := permReq(acp.ToolKindOther, "mcp__zooid__zooid_get_room_info", claudeOptions)
	req.ToolCall.Kind = nil
	if tool, ok := ownTool("claude", req); ok {
		t.Fatalf("a request without a kind was taken for %s", tool)
	}
}

// TestPermissionPolicy: under the default deny, the agent's own Zooid tools
// are allowed once and a shell command is rejected; under allow, everything
// is allowed once, never "always" (claude-agent-acp lists Always Allow
// first).
func TestPermissionPolicy(t *testing.T) {
	selected := func(resp acp.RequestPermissionResponse) string {
		if resp.Outcome.Selected == nil {
			return "cancelled"
		}
		return string(resp.Outcome.Selected.OptionId)
	}
	zooidCall := permReq(acp.ToolKindOther, "mcp__zooid__zooid_get_room_info", claudeOptions)
	shell := permReq(acp.ToolKindExecute, "touch pwned", claudeOptions)
	cases := []struct {
		name   string
		agent  config.Agent
		req    acp.RequestPermissionRequest
		option string
	}{
		{"deny: a Zooid tool", config.Agent{ACP: config.ACP{Preset: "claude"}, Permission: config.PermissionDeny}, zooidCall, "allow"},
		{"deny: a shell command", config.Agent{ACP: config.ACP{Preset: "claude"}, Permission: config.PermissionDeny}, shell, "reject"},
		{"allow: a shell command, once", config.Agent{ACP: config.ACP{Preset: "claude"}, Permission: config.PermissionAllow}, shell, "allow"},
		{"deny: claude-agent-acp by its path", config.Agent{ACP: config.ACP{Command: "/opt/node/bin/claude-agent-acp"}, Permission: config.PermissionDeny}, zooidCall, "allow"},
		{"deny: a custom agent", config.Agent{ACP: config.ACP{Command: "./my-agent"}, Permission: config.PermissionDeny}, zooidCall, "reject"},
		{"deny: gemini's MCP request", config.Agent{ACP: config.ACP{Preset: "gemini"}, Permission: config.PermissionDeny},
			permReq(acp.ToolKindOther, "zooid_get_room_info (zooid MCP Server)", geminiMCPOptions), "proceed_once"},
		{"deny: codex's MCP approval", config.Agent{ACP: config.ACP{Preset: "codex"}, Permission: config.PermissionDeny},
			codexReq("zooid", "mcp_tool_call", `Allow the zooid MCP server to run tool "zooid_send_message"?`), "approved"},
		{"deny: gemini's shell", config.Agent{ACP: config.ACP{Preset: "gemini"}, Permission: config.PermissionDeny},
			permReq(acp.ToolKindExecute, "rm -rf /", geminiExecOptions), "cancel"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp := permissionPolicy(&c.agent)(context.Background(), c.req)
			if got := selected(resp); got != c.option {
				t.Fatalf("selected %q, want %q", got, c.option)
			}
			if want := c.option == "allow" || c.option == "proceed_once" || c.option == "approved"; acpagent.Granted(c.req, resp) != want {
				t.Fatalf("granted = %v, want %v", !want, want)
			}
		})
	}
}
