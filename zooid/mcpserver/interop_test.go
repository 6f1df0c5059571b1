//go:build unix

package mcpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zooid-dev/zooid/internal/testdeps"

	"github.com/coder/acp-go-sdk"
	"github.com/mark3labs/mcp-go/mcp"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/busyroom"
	"github.com/zooid-dev/zooid/internal/childproc"
	"github.com/zooid-dev/zooid/zooid/tools"
)

// interopDir is the npm package holding the real MCP clients: the TypeScript
// SDK (client.mjs) and the inspector, whose CLI is a second, independent
// client (it is built on the SDK's v2 client packages). package.json pins vite
// (a web-UI dependency of the inspector the CLI never loads) below 8.4, whose
// optional dependency the registry here does not serve: npm install skips it
// but npm ci then refuses the lock file.
const interopDir = "testdata/interop"

// interopLimit is the page size the clients ask for; small, so every history
// tool has a second page in the seeded room.
const interopLimit = 5

// conversationTools is the exact tool list of an ordinary conversation
// session (behaviour §4): the seven read/post tools plus delegation.
var conversationTools = []string{
	tools.GetRecentThreads, tools.GetThreadHistory, tools.GetHistory, tools.GetMembers,
	tools.GetRoomInfo, tools.GetRooms, tools.SendMessage, tools.StartTaskThreads, tools.Handoff,
}

// interopReport is the JSON line client.mjs prints.
type interopReport struct {
	SDKVersion   string                     `json:"sdk_version"`
	Requested    string                     `json:"requested_protocol_version"`
	Protocol     string                     `json:"protocol_version"`
	ServerInfo   mcp.Implementation         `json:"server_info"`
	Capabilities map[string]json.RawMessage `json:"server_capabilities"`
	Instructions string                     `json:"instructions"`
	Tools        []struct {
		Name        string `json:"name"`
		Description string `json:"description"`
		InputSchema struct {
			Type                 string         `json:"type"`
			Properties           map[string]any `json:"properties"`
			AdditionalProperties *bool          `json:"additionalProperties"`
		} `json:"inputSchema"`
	} `json:"tools"`
	Calls []interopCall `json:"calls"`
}

type interopCall struct {
	Tool      string         `json:"tool"`
	Arguments map[string]any `json:"arguments"`
	IsError   bool           `json:"is_error"`
	Content   []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	Structured json.RawMessage `json:"structured"`
}

// text is the call's single text content.
func (c interopCall) text(t *testing.T) string {
	t.Helper()
	if len(c.Content) != 1 || c.Content[0].Type != "text" {
		t.Fatalf("%s: want one text content, got %+v", c.Tool, c.Content)
	}
	return c.Content[0].Text
}

// payload checks that a successful call carries the same JSON as text and as
// structured content, and returns it.
func (c interopCall) payload(t *testing.T) []byte {
	t.Helper()
	text := c.text(t)
	if c.IsError {
		t.Fatalf("%s %v: error result %q", c.Tool, c.Arguments, text)
	}
	if len(c.Structured) == 0 {
		t.Fatalf("%s: no structuredContent", c.Tool)
	}
	var fromText, fromStructured any
	if err := json.Unmarshal([]byte(text), &fromText); err != nil {
		t.Fatalf("%s: text content is not JSON: %v: %q", c.Tool, err, text)
	}
	if err := json.Unmarshal(c.Structured, &fromStructured); err != nil {
		t.Fatalf("%s: structured content: %v", c.Tool, err)
	}
	a, _ := json.Marshal(fromText)
	b, _ := json.Marshal(fromStructured)
	if !bytes.Equal(a, b) {
		t.Fatalf("%s: text %s != structured %s", c.Tool, a, b)
	}
	return b
}

// pinnedVersion is the exact version package.json asks for.
func pinnedVersion(t *testing.T, pkg string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(interopDir, "package.json"))
	if err != nil {
		t.Fatalf("reading package.json: %v", err)
	}
	var p struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatalf("parsing package.json: %v", err)
	}
	v := p.Dependencies[pkg]
	if v == "" {
		t.Fatalf("package.json does not depend on %s", pkg)
	}
	return v
}

// requireClients returns node's path once the interop packages are
// installed; without node or them the test follows internal/testdeps' rule.
// A package installed at another version than the lockfile pins fails.
func requireClients(t *testing.T, pkgs ...string) string {
	t.Helper()
	testdeps.Require(t, testdeps.NodePackages(interopDir))
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatal(err)
	}
	for _, pkg := range pkgs {
		want := pinnedVersion(t, pkg)
		raw, err := os.ReadFile(filepath.Join(interopDir, "node_modules", pkg, "package.json"))
		if err != nil {
			t.Fatalf("%s is not installed in %s (%v): run scripts/setup.sh (it runs npm ci there)", pkg, interopDir, err)
		}
		var got struct {
			Version string `json:"version"`
		}
		if err := json.Unmarshal(raw, &got); err != nil || got.Version != want {
			t.Fatalf("%s in %s/node_modules is %q, package.json pins %q: run scripts/setup.sh to reinstall", pkg, interopDir, got.Version, want)
		}
	}
	return node
}

// runCommand runs a program in interopDir and returns its stdout. It and
// everything it starts (node, the bridge) share a process group that is
// killed on timeout, so no child outlives the test.
func runCommand(t *testing.T, label string, prog string, timeout time.Duration, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Dir = interopDir
	cmd.SysProcAttr = childproc.SysProcAttr()
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	t.Logf("%s: %v", label, time.Since(start).Round(time.Millisecond))
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("timed out after %v: %w", timeout, err)
		}
		t.Fatalf("%s %s: %v\nstderr:\n%s\nstdout:\n%s", filepath.Base(prog), strings.Join(args, " "), err, stderr.String(), stdout.String())
	}
	if stderr.Len() > 0 {
		t.Logf("%s stderr:\n%s", label, stderr.String())
	}
	return stdout.Bytes()
}

// bridgeArgv is the command line an agent runs for a session/new stdio entry.
func bridgeArgv(t *testing.T, entry acp.McpServer) []string {
	t.Helper()
	if entry.Stdio == nil || entry.Stdio.Command == "" {
		t.Fatalf("no stdio entry: %+v", entry)
	}
	return append([]string{entry.Stdio.Command}, entry.Stdio.Args...)
}

// keysOf checks a JSON object's keys: every one of required, nothing outside
// required+optional.
func keysOf(t *testing.T, what string, obj map[string]json.RawMessage, required, optional []string) {
	t.Helper()
	for _, k := range required {
		if _, ok := obj[k]; !ok {
			t.Fatalf("%s lacks %q: %v", what, k, obj)
		}
	}
	for k := range obj {
		if !slices.Contains(required, k) && !slices.Contains(optional, k) {
			t.Fatalf("%s has unexpected field %q", what, k)
		}
	}
}

func decodeObj(t *testing.T, what string, raw []byte) map[string]json.RawMessage {
	t.Helper()
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatalf("%s is not a JSON object: %v: %s", what, err, raw)
	}
	return obj
}

// checkMessageShape checks one Message (or ThreadOverview) object against
// behaviour §3: required fields, agent_name exactly for agents, UTC RFC 3339
// times.
func checkMessageShape(t *testing.T, what string, raw []byte, overview bool) {
	t.Helper()
	obj := decodeObj(t, what, raw)
	required := []string{"id", "sender", "text", "timestamp", "is_agent"}
	if overview {
		required = append(required, "reply_count", "last_activity_at")
	}
	keysOf(t, what, obj, required, []string{"agent_name", "thread_id"})
	var m struct {
		Timestamp      string `json:"timestamp"`
		LastActivityAt string `json:"last_activity_at"`
		IsAgent        bool   `json:"is_agent"`
		AgentName      string `json:"agent_name"`
	}
	_ = json.Unmarshal(raw, &m)
	stamps := []string{m.Timestamp}
	if overview {
		stamps = append(stamps, m.LastActivityAt)
	}
	for _, s := range stamps {
		ts, err := time.Parse(time.RFC3339Nano, s)
		if err != nil || !strings.HasSuffix(s, "Z") || ts.Location() != time.UTC {
			t.Fatalf("%s: time %q is not RFC 3339 UTC (%v)", what, s, err)
		}
	}
	if _, has := obj["agent_name"]; has != m.IsAgent || (m.IsAgent && m.AgentName == "") {
		t.Fatalf("%s: agent_name %q with is_agent %v", what, m.AgentName, m.IsAgent)
	}
}

// checkPageShape checks a page object and the records in it, and that
// next_before is present exactly when has_more is true.
func checkPageShape(t *testing.T, what string, raw []byte, list string) {
	t.Helper()
	obj := decodeObj(t, what, raw)
	keysOf(t, what, obj, []string{list, "has_more"}, []string{"next_before"})
	var hasMore bool
	if err := json.Unmarshal(obj["has_more"], &hasMore); err != nil {
		t.Fatalf("%s: has_more: %v", what, err)
	}
	if _, has := obj["next_before"]; has != hasMore {
		t.Fatalf("%s: next_before present %v, has_more %v", what, has, hasMore)
	}
	var items []json.RawMessage
	if err := json.Unmarshal(obj[list], &items); err != nil {
		t.Fatalf("%s: %s is not an array: %v", what, list, err)
	}
	for i, it := range items {
		checkMessageShape(t, fmt.Sprintf("%s %s[%d]", what, list, i), it, list == "threads")
	}
}

// nextCall pops the next call of the report, which must be of tool.
func nextCall(t *testing.T, calls *[]interopCall, tool string) interopCall {
	t.Helper()
	if len(*calls) == 0 {
		t.Fatalf("client made no %s call", tool)
	}
	c := (*calls)[0]
	*calls = (*calls)[1:]
	if c.Tool != tool {
		t.Fatalf("next call is %s, want %s", c.Tool, tool)
	}
	return c
}

// TestInteropTypeScriptSDK drives the bridge with the official TypeScript MCP
// SDK (Client + StdioClientTransport), started from the session/new stdio
// entry as an agent would, and checks everything it saw against the seeded
// room.
func TestInteropTypeScriptSDK(t *testing.T) {
	const sdk = "@modelcontextprotocol/sdk"
	node := requireClients(t, sdk)
	w := newWorld(t, 60, 4, 2)
	w.start(t, w.HS.URL())
	entry := w.srv.StdioEntry(w.srv.Bind(w.caller("agent-a", w.Busy.RoomID), self(t)))

	args := []string{"client.mjs", "--limit", fmt.Sprint(interopLimit)}
	for _, e := range entry.Stdio.Env {
		args = append(args, "--env", e.Name+"="+e.Value)
	}
	args = append(append(args, "--"), bridgeArgv(t, entry)...)
	out := runCommand(t, "node client.mjs", node, 2*time.Minute, args...)
	var rep interopReport
	if err := json.Unmarshal(bytes.TrimSpace(out), &rep); err != nil {
		t.Fatalf("client output is not one JSON report: %v\n%s", err, out)
	}

	// Handshake.
	if want := pinnedVersion(t, sdk); rep.SDKVersion != want {
		t.Fatalf("client ran SDK %s, package.json pins %s", rep.SDKVersion, want)
	}
	// The server must accept the client's version when it knows it, and
	// otherwise offer its own latest (which this SDK must then accept).
	wantProtocol := rep.Requested
	if !slices.Contains(mcp.ValidProtocolVersions, wantProtocol) {
		wantProtocol = mcp.LATEST_PROTOCOL_VERSION
	}
	if rep.Protocol != wantProtocol {
		t.Fatalf("negotiated protocol %q for a client asking %q, want %q", rep.Protocol, rep.Requested, wantProtocol)
	}
	if rep.ServerInfo.Name != "zooid" || rep.ServerInfo.Version == "" {
		t.Fatalf("server info %+v", rep.ServerInfo)
	}
	if _, ok := rep.Capabilities["tools"]; !ok {
		t.Fatalf("server capabilities without tools: %v", rep.Capabilities)
	}
	if !strings.Contains(rep.Instructions, tools.GetRecentThreads) {
		t.Fatalf("instructions %q", rep.Instructions)
	}
	t.Logf("SDK %s negotiated protocol %s with %s %s", rep.SDKVersion, rep.Protocol, rep.ServerInfo.Name, rep.ServerInfo.Version)

	// tools/list: exactly the conversation tools, each with a strict schema.
	var names []string
	for _, tl := range rep.Tools {
		names = append(names, tl.Name)
		if tl.Description == "" || tl.InputSchema.Type != "object" || tl.InputSchema.AdditionalProperties == nil || *tl.InputSchema.AdditionalProperties {
			t.Fatalf("tool %s: description %q, input schema %+v", tl.Name, tl.Description, tl.InputSchema)
		}
	}
	if !slices.Equal(slices.Sorted(slices.Values(names)), slices.Sorted(slices.Values(conversationTools))) {
		t.Fatalf("tools/list of a conversation session:\n got %v\nwant %v", names, conversationTools)
	}

	calls := rep.Calls
	// zooid_get_recent_threads: the newest top-level entries, newest first.
	c := nextCall(t, &calls, tools.GetRecentThreads)
	raw := c.payload(t)
	checkPageShape(t, c.Tool, raw, "threads")
	recent := decodeAs[tools.ThreadPage](t, string(raw))
	wantRecent := w.Threads()
	if len(wantRecent) <= interopLimit {
		t.Fatalf("seeded room has %d top-level entries; needs more than %d to page", len(wantRecent), interopLimit)
	}
	if len(recent.Threads) != interopLimit || !recent.HasMore {
		t.Fatalf("recent threads: %d entries, has_more %v", len(recent.Threads), recent.HasMore)
	}
	for i, th := range recent.Threads {
		busyroom.CheckMessage(t, th.Message, wantRecent[i])
		if th.ReplyCount != wantRecent[i].Replies || th.LastActivityAt != busyroom.Stamp(wantRecent[i].LastTS) {
			t.Fatalf("entry %d: reply_count %d last %s, want %d %s", i, th.ReplyCount, th.LastActivityAt, wantRecent[i].Replies, busyroom.Stamp(wantRecent[i].LastTS))
		}
	}

	// zooid_get_thread_history on a thread from that first call, two pages.
	c = nextCall(t, &calls, tools.GetThreadHistory)
	root := id.EventID(fmt.Sprint(c.Arguments["thread_id"]))
	if !slices.ContainsFunc(recent.Threads, func(o tools.ThreadOverview) bool { return o.ID == root && o.ReplyCount > 0 }) {
		t.Fatalf("client read thread %s, not a thread with replies from zooid_get_recent_threads", root)
	}
	var replies []wantMsg
	var rootMsg wantMsg
	for _, m := range w.Want {
		switch {
		case m.ID == root:
			rootMsg = m
			rootMsg.Thread = root // set on the root itself in thread history
		case m.Thread == root:
			replies = append(replies, m)
		}
	}
	if len(replies) <= interopLimit {
		t.Fatalf("thread %s has %d replies; the seed needs more than %d to page", root, len(replies), interopLimit)
	}
	raw = c.payload(t)
	checkPageShape(t, c.Tool, raw, "messages")
	p := decodeAs[tools.MessagePage](t, string(raw))
	// The first page holds limit entries: the root, then the newest limit-1 replies.
	firstReplies := interopLimit - 1
	wantPage := append([]wantMsg{rootMsg}, replies[len(replies)-firstReplies:]...)
	if len(p.Messages) != len(wantPage) || p.HasMore != (len(replies) > firstReplies) {
		t.Fatalf("thread page 1: %d messages has_more %v, want %d", len(p.Messages), p.HasMore, len(wantPage))
	}
	for i := range wantPage {
		busyroom.CheckMessage(t, p.Messages[i], wantPage[i])
	}
	c = nextCall(t, &calls, tools.GetThreadHistory)
	if c.Arguments["before"] != p.NextBefore || c.Arguments["thread_id"] != string(root) {
		t.Fatalf("second thread page asked with %v, want before %q", c.Arguments, p.NextBefore)
	}
	raw = c.payload(t)
	checkPageShape(t, c.Tool, raw, "messages")
	p = decodeAs[tools.MessagePage](t, string(raw))
	older := replies[:len(replies)-firstReplies]
	wantPage = older[max(0, len(older)-interopLimit):]
	if len(p.Messages) != len(wantPage) || p.HasMore != (len(older) > interopLimit) {
		t.Fatalf("thread page 2: %d messages has_more %v, want %d", len(p.Messages), p.HasMore, len(wantPage))
	}
	for i := range wantPage {
		busyroom.CheckMessage(t, p.Messages[i], wantPage[i])
	}

	// zooid_get_history: the newest page, then the one before via next_before.
	c = nextCall(t, &calls, tools.GetHistory)
	raw = c.payload(t)
	checkPageShape(t, c.Tool, raw, "messages")
	p = decodeAs[tools.MessagePage](t, string(raw))
	n := len(w.Want)
	if !p.HasMore || len(p.Messages) != interopLimit {
		t.Fatalf("history page 1: %d messages, has_more %v", len(p.Messages), p.HasMore)
	}
	for i, m := range p.Messages {
		busyroom.CheckMessage(t, m, w.Want[n-interopLimit+i])
	}
	c = nextCall(t, &calls, tools.GetHistory)
	if c.Arguments["before"] != p.NextBefore {
		t.Fatalf("second history page asked with %v, want before %q", c.Arguments, p.NextBefore)
	}
	raw = c.payload(t)
	checkPageShape(t, c.Tool, raw, "messages")
	p = decodeAs[tools.MessagePage](t, string(raw))
	if !p.HasMore || len(p.Messages) != interopLimit {
		t.Fatalf("history page 2: %d messages, has_more %v", len(p.Messages), p.HasMore)
	}
	for i, m := range p.Messages {
		busyroom.CheckMessage(t, m, w.Want[n-2*interopLimit+i])
	}

	// zooid_get_members: the three joined members, agents marked.
	c = nextCall(t, &calls, tools.GetMembers)
	raw = c.payload(t)
	keysOf(t, c.Tool, decodeObj(t, c.Tool, raw), []string{"members"}, nil)
	var members struct {
		Members []json.RawMessage `json:"members"`
	}
	_ = json.Unmarshal(raw, &members)
	var memberIDs []id.UserID
	for i, mraw := range members.Members {
		keysOf(t, fmt.Sprintf("member %d", i), decodeObj(t, "member", mraw), []string{"id", "name", "is_agent"}, []string{"agent_name"})
		m := decodeAs[tools.Member](t, string(mraw))
		name, isAgent := busyroom.AgentOf(m.ID)
		if m.IsAgent != isAgent || m.AgentName != name || m.Name == "" {
			t.Fatalf("member %+v", m)
		}
		memberIDs = append(memberIDs, m.ID)
	}
	if want := []id.UserID{agentA, agentB, alice}; !slices.Equal(slices.Sorted(slices.Values(memberIDs)), want) {
		t.Fatalf("members %v, want %v", memberIDs, want)
	}

	// zooid_get_room_info: the bound room.
	c = nextCall(t, &calls, tools.GetRoomInfo)
	raw = c.payload(t)
	keysOf(t, c.Tool, decodeObj(t, c.Tool, raw), []string{"id", "name", "transport"}, nil)
	if ri := decodeAs[tools.RoomInfo](t, string(raw)); ri.ID != w.Busy.RoomID || ri.Name != "Busy room" || ri.Transport != "matrix" {
		t.Fatalf("room info %+v, want %s", ri, w.Busy.RoomID)
	}

	// zooid_get_rooms: the two rooms agent-a is in, not the secret one.
	c = nextCall(t, &calls, tools.GetRooms)
	raw = c.payload(t)
	keysOf(t, c.Tool, decodeObj(t, c.Tool, raw), []string{"rooms"}, nil)
	var rooms struct {
		Rooms []json.RawMessage `json:"rooms"`
	}
	_ = json.Unmarshal(raw, &rooms)
	var roomIDs []id.RoomID
	for i, rraw := range rooms.Rooms {
		keysOf(t, fmt.Sprintf("room %d", i), decodeObj(t, "room", rraw), []string{"id", "name", "transport"}, nil)
		roomIDs = append(roomIDs, decodeAs[tools.RoomInfo](t, string(rraw)).ID)
	}
	if want := []id.RoomID{w.Busy.RoomID, w.Other.RoomID}; !slices.Equal(slices.Sorted(slices.Values(roomIDs)), slices.Sorted(slices.Values(want))) {
		t.Fatalf("rooms %v, want %v", roomIDs, want)
	}

	// Model mistakes reach the SDK as error results, not JSON-RPC errors.
	for _, want := range []struct{ tool, prefix string }{
		{tools.GetHistory, tools.CodeInvalidArgument + ": "}, // an unknown property
		{tools.GetThreadHistory, tools.CodeNotFound + ": "},  // no such event
	} {
		c = nextCall(t, &calls, want.tool)
		if text := c.text(t); !c.IsError || !strings.HasPrefix(text, want.prefix) {
			t.Fatalf("%s %v: is_error %v, %q; want an error result %q…", c.Tool, c.Arguments, c.IsError, text, want.prefix)
		}
	}
	if len(calls) != 0 {
		t.Fatalf("unexpected extra calls: %+v", calls)
	}
}

// TestInteropInspectorCLI drives the bridge with the MCP inspector's CLI (a
// second, independent client implementation), started through npx from the
// installed package exactly as its docs show, against the bridge command of a
// session/new stdio entry.
func TestInteropInspectorCLI(t *testing.T) {
	const inspector = "@modelcontextprotocol/inspector"
	requireClients(t, inspector)
	npx, err := exec.LookPath("npx")
	if err != nil {
		t.Fatalf("node is on PATH but npx is not (%v): install npm with Node and run scripts/setup.sh", err)
	}
	w := newWorld(t, 20, 2, 1)
	w.start(t, w.HS.URL())
	entry := w.srv.StdioEntry(w.srv.Bind(w.caller("agent-a", w.Busy.RoomID), self(t)))
	inspect := func(method ...string) []byte {
		t.Helper()
		// --no and --offline: never install or ask a registry; the package must
		// come from node_modules. The bridge's own flags follow "--" so the
		// inspector does not take them for its own.
		args := append([]string{"--no", "--offline", "--", inspector, "--cli"}, method...)
		for _, e := range entry.Stdio.Env {
			args = append(args, "-e", e.Name+"="+e.Value)
		}
		return runCommand(t, "inspector "+strings.Join(method, " "), npx, 2*time.Minute, append(append(args, "--"), bridgeArgv(t, entry)...)...)
	}

	// --strict exits non-zero on error-severity tool-schema portability problems.
	out := inspect("--method", "tools/list", "--strict")
	var listed struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(out), &listed); err != nil {
		t.Fatalf("inspector output is not a tools/list result: %v\n%s", err, out)
	}
	var names []string
	for _, tl := range listed.Tools {
		names = append(names, tl.Name)
	}
	if !slices.Equal(slices.Sorted(slices.Values(names)), slices.Sorted(slices.Values(conversationTools))) {
		t.Fatalf("inspector tools/list:\n got %v\nwant %v", names, conversationTools)
	}

	// tools/call: two pages of history, the second through the cursor.
	call := func(args ...string) tools.MessagePage {
		t.Helper()
		method := []string{"--method", "tools/call", "--tool-name", tools.GetHistory}
		for _, a := range args {
			method = append(method, "--tool-arg", a)
		}
		out := inspect(method...)
		var res struct {
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
			StructuredContent json.RawMessage `json:"structuredContent"`
			IsError           bool            `json:"isError"`
		}
		if err := json.Unmarshal(bytes.TrimSpace(out), &res); err != nil {
			t.Fatalf("inspector output is not a tools/call result: %v\n%s", err, out)
		}
		c := interopCall{Tool: tools.GetHistory, IsError: res.IsError, Content: res.Content, Structured: res.StructuredContent}
		raw := c.payload(t)
		checkPageShape(t, c.Tool, raw, "messages")
		return decodeAs[tools.MessagePage](t, string(raw))
	}
	const limit = 3
	n := len(w.Want)
	p := call(fmt.Sprintf("limit=%d", limit))
	if !p.HasMore || len(p.Messages) != limit {
		t.Fatalf("history page 1: %d messages, has_more %v", len(p.Messages), p.HasMore)
	}
	for i, m := range p.Messages {
		busyroom.CheckMessage(t, m, w.Want[n-limit+i])
	}
	p = call(fmt.Sprintf("limit=%d", limit), "before="+p.NextBefore)
	if !p.HasMore || len(p.Messages) != limit {
		t.Fatalf("history page 2: %d messages, has_more %v", len(p.Messages), p.HasMore)
	}
	for i, m := range p.Messages {
		busyroom.CheckMessage(t, m, w.Want[n-2*limit+i])
	}
}
