package piext_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zooid-dev/zooid/internal/testdeps"

	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/mcpserver"
	"github.com/zooid-dev/zooid/zooid/piext"
	"github.com/zooid-dev/zooid/zooid/tools"
)

func TestInstallWritesReplacesAndLeavesOthersAlone(t *testing.T) {
	dir := t.TempDir()
	ext := filepath.Join(dir, "extensions")
	if err := os.MkdirAll(ext, 0o700); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(ext, "mine.ts")
	if err := os.WriteFile(other, []byte("export default function () {}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	src, version := piext.Source()

	wrote, err := piext.Install(dir, nil)
	if err != nil || !wrote {
		t.Fatalf("first install: wrote %v, err %v; want a write", wrote, err)
	}
	got, _ := os.ReadFile(filepath.Join(ext, piext.FileName))
	if string(got) != string(src) {
		t.Fatal("installed file differs from Source()")
	}
	if first, _, _ := strings.Cut(string(got), "\n"); first != "// zooid-extension-version: "+version {
		t.Fatalf("header %q, want version %s", first, version)
	}

	if wrote, err := piext.Install(dir, nil); err != nil || wrote {
		t.Fatalf("same version again: wrote %v, err %v; want no write", wrote, err)
	}

	stale := "// zooid-extension-version: 0000000000000000\nexport default function () {}\n"
	if err := os.WriteFile(filepath.Join(ext, piext.FileName), []byte(stale), 0o600); err != nil {
		t.Fatal(err)
	}
	if wrote, err := piext.Install(dir, nil); err != nil || !wrote {
		t.Fatalf("older version: wrote %v, err %v; want a replacement", wrote, err)
	}
	if got, _ := os.ReadFile(filepath.Join(ext, piext.FileName)); string(got) != string(src) {
		t.Fatal("older version was not replaced")
	}

	if got, _ := os.ReadFile(other); string(got) != "export default function () {}\n" {
		t.Fatalf("another extension was touched: %q", got)
	}
	entries, _ := os.ReadDir(ext)
	if len(entries) != 2 {
		t.Fatalf("extensions dir holds %d entries, want mine.ts and zooid.ts only", len(entries))
	}

	foreign := "export default function () {}\n"
	if err := os.WriteFile(filepath.Join(ext, piext.FileName), []byte(foreign), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := piext.Install(dir, nil); err == nil || !strings.Contains(err.Error(), "is not Zooid's") {
		t.Fatalf("a zooid.ts that is not ours: err %v, want a refusal", err)
	}
	if got, _ := os.ReadFile(filepath.Join(ext, piext.FileName)); string(got) != foreign {
		t.Fatal("a zooid.ts that is not ours was overwritten")
	}
}

// TestInstallStaysInsideTheAgentDir: an agent with a user of its own owns its
// pi directory, which a daemon running as root writes into. A symlink planted
// there is not followed out of it.
func TestInstallStaysInsideTheAgentDir(t *testing.T) {
	for _, c := range []struct{ name, link, target string }{
		{"extensions is a link out", "extensions", ""},
		{"zooid.ts is a link out", filepath.Join("extensions", piext.FileName), piext.FileName},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, outside := t.TempDir(), t.TempDir()
			target := filepath.Join(outside, c.target)
			if c.target != "" {
				if err := os.WriteFile(target, []byte("// zooid-extension-version: 0\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.MkdirAll(filepath.Join(dir, "extensions"), 0o700); err != nil {
				t.Fatal(err)
			}
			if c.link == "extensions" {
				os.Remove(filepath.Join(dir, "extensions"))
			}
			if err := os.Symlink(target, filepath.Join(dir, c.link)); err != nil {
				t.Fatal(err)
			}
			_, err := piext.Install(dir, nil)
			if err == nil || !strings.Contains(err.Error(), "path escapes from parent") {
				t.Fatalf("Install through %s -> %s: err %v, want a refusal to leave the directory", c.link, target, err)
			}
			entries, _ := os.ReadDir(outside)
			for _, e := range entries {
				if e.Name() != c.target {
					t.Errorf("Install wrote %s outside the agent dir", e.Name())
				}
			}
			if c.target != "" {
				if got, _ := os.ReadFile(target); string(got) != "// zooid-extension-version: 0\n" {
					t.Errorf("the file outside was rewritten: %q", got)
				}
			}
		})
	}
}

// rooms is a tools.Rooms answering from fixed data: the pi tests are about the
// path from pi to the daemon's socket, not about reading rooms.
type rooms struct{ room id.RoomID }

const roomText = "the build is green on main"

func (r rooms) RecentThreads(context.Context, tools.Caller, int, string) (tools.ThreadPage, error) {
	return tools.ThreadPage{Threads: []tools.ThreadOverview{{
		Message:        tools.Message{ID: "$root", Sender: "@alice:zooid.test", Text: roomText, Timestamp: "2026-01-01T00:00:00Z"},
		LastActivityAt: "2026-01-01T00:00:00Z",
	}}}, nil
}
func (r rooms) ThreadHistory(context.Context, tools.Caller, id.EventID, int, string) (tools.MessagePage, error) {
	return tools.MessagePage{Messages: []tools.Message{}}, nil
}
func (r rooms) History(context.Context, tools.Caller, int, string) (tools.MessagePage, error) {
	return tools.MessagePage{Messages: []tools.Message{}}, nil
}
func (r rooms) Members(context.Context, tools.Caller) ([]tools.Member, error) { return nil, nil }
func (r rooms) RoomInfo(context.Context, tools.Caller) (tools.RoomInfo, error) {
	return tools.RoomInfo{ID: r.room, Name: "Room", Transport: "matrix"}, nil
}
func (r rooms) Rooms(context.Context, tools.Caller) ([]tools.RoomInfo, error) { return nil, nil }
func (r rooms) Send(context.Context, tools.Caller, string, id.EventID, string) (tools.SendResult, error) {
	return tools.SendResult{EventID: "$sent"}, nil
}

const room = id.RoomID("!room:zooid.test")

// daemon is a real MCP server listening on agent "pi-agent"'s socket.
func daemon(t *testing.T) (*mcpserver.Server, string) {
	t.Helper()
	srv, err := mcpserver.New(mcpserver.Options{Rooms: rooms{room}, BridgeCommand: []string{"unused"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	sock, err := srv.ListenAgent("pi-agent")
	if err != nil {
		t.Fatal(err)
	}
	return srv, sock
}

// agentProcess is this test process as the binding's agent process: the
// socket serves only it and its descendants (the pi it starts, which runs the
// extension), as the daemon binds to the pi agent it starts.
func agentProcess() mcpserver.Process {
	p, err := mcpserver.ProcessOf(os.Getpid())
	if err != nil {
		panic(err)
	}
	return p
}

// bind binds a session of kind under ACP session id acp.
func bind(srv *mcpserver.Server, kind tools.SessionKind, acp string) string {
	bid := srv.Bind(tools.Caller{Agent: "pi-agent", UserID: "@pi:zooid.test", Transport: "matrix", Room: room, Rooms: []id.RoomID{room}, Kind: kind, SessionKey: "pi-agent/" + acp}, agentProcess())
	srv.BindACPSession(bid, acp)
	return bid
}

// mcpTools lists the tools over the socket as an MCP client, naming the
// session by its ACP session id like the extension does.
func mcpTools(t *testing.T, sock, acp string) []map[string]any {
	t.Helper()
	nc, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
	sc := bufio.NewScanner(nc)
	sc.Buffer(nil, 16<<20)
	send := func(v any) {
		b, _ := json.Marshal(v)
		if _, err := nc.Write(append(b, '\n')); err != nil {
			t.Fatal(err)
		}
	}
	read := func() map[string]any {
		if !sc.Scan() {
			t.Fatalf("socket closed: %v", sc.Err())
		}
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	send(map[string]any{"zooid_acp_session": acp})
	if w := read(); w["zooid_ok"] != true {
		t.Fatalf("welcome %v", w)
	}
	send(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "test", "version": "0"}}})
	read()
	send(map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"})
	send(map[string]any{"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
	res := read()["result"].(map[string]any)
	var out []map[string]any
	for _, x := range res["tools"].([]any) {
		out = append(out, x.(map[string]any))
	}
	return out
}

// piBin is the bin directory of the pinned pi packages, which holds the Node
// they need (npm's node package: pi 1.6 needs Node 22.19 or newer, newer than
// a machine's own Node may be).
const piBin = "testdata/pi/node_modules/.bin"

// node is the pinned Node of testdata/pi; without the packages installed the
// test follows internal/testdeps' rule.
func node(t *testing.T) string {
	t.Helper()
	testdeps.Require(t, testdeps.NodePackages("testdata/pi"))
	p, err := filepath.Abs(filepath.Join(piBin, "node"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the pi extension tests need the Node of testdata/pi (run scripts/setup.sh, which runs npm ci there): %v", err)
	}
	return p
}

// TestParityWithMCP proves that the tools the generated extension registers
// and activates for a session are the tools the MCP server lists for the same
// kind of session: names, descriptions and input schemas.
func TestParityWithMCP(t *testing.T) {
	srv, sock := daemon(t)
	extFile := filepath.Join(t.TempDir(), "zooid.mjs")
	src, _ := piext.Source()
	if err := os.WriteFile(extFile, src, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []tools.SessionKind{tools.Conversation, tools.TaskAssignee, tools.TaskThreadMember} {
		t.Run(kind.String(), func(t *testing.T) {
			acp := "acp-" + kind.String()
			bind(srv, kind, acp)
			want := mcpTools(t, sock, acp)

			cmd := exec.Command(node(t), "testdata/parity.mjs", extFile, acp, "then-unreachable")
			cmd.Env = append(os.Environ(), piext.SocketEnv+"="+sock)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("node: %v\n%s", err, errText(err))
			}
			var got struct {
				Registered []struct {
					Name, Label, Description string
					Parameters               any
				}
				Active      []string
				ActiveAfter []string
			}
			if err := json.Unmarshal(out, &got); err != nil {
				t.Fatalf("parity output %s: %v", out, err)
			}
			if len(got.Registered) != len(tools.All()) {
				t.Fatalf("registered %d tools, want all %d (gating activates, it does not register)", len(got.Registered), len(tools.All()))
			}
			byName := map[string]int{}
			for i, r := range got.Registered {
				byName[r.Name] = i
			}
			wantActive := []string{"read", "bash"}
			for _, w := range want {
				name := w["name"].(string)
				wantActive = append(wantActive, name)
				i, ok := byName[name]
				if !ok {
					t.Fatalf("MCP lists %s; the extension does not register it", name)
				}
				r := got.Registered[i]
				if r.Description != w["description"] {
					t.Fatalf("%s description:\n pi  %q\n mcp %q", name, r.Description, w["description"])
				}
				if !reflect.DeepEqual(r.Parameters, w["inputSchema"]) {
					t.Fatalf("%s schema:\n pi  %v\n mcp %v", name, r.Parameters, w["inputSchema"])
				}
				if r.Label != w["title"] && r.Label != annotationTitle(w) {
					t.Fatalf("%s label %q, MCP title %v", name, r.Label, w["title"])
				}
			}
			if !reflect.DeepEqual(got.Active, wantActive) {
				t.Fatalf("active tools %v, want %v (the MCP list for a %s session, after pi's own)", got.Active, wantActive, kind)
			}
			// The daemon gone before the next prompt: the session keeps the
			// list it last read, never all ten.
			if !reflect.DeepEqual(got.ActiveAfter, wantActive) {
				t.Fatalf("with the daemon unreachable, active tools %v, want the last list read %v", got.ActiveAfter, wantActive)
			}
		})
	}
}

// TestRoleChangeTakesEffectNextTurn: the extension reads the role before each
// prompt (before_agent_start), so a SetKind between prompts changes the active
// tools of the next one.
func TestRoleChangeTakesEffectNextTurn(t *testing.T) {
	srv, sock := daemon(t)
	extFile := filepath.Join(t.TempDir(), "zooid.mjs")
	src, _ := piext.Source()
	if err := os.WriteFile(extFile, src, 0o600); err != nil {
		t.Fatal(err)
	}
	acp := "acp-role-change"
	bid := bind(srv, tools.Conversation, acp)
	active := func() []string {
		cmd := exec.Command(node(t), "testdata/parity.mjs", extFile, acp)
		cmd.Env = append(os.Environ(), piext.SocketEnv+"="+sock)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("node: %v\n%s", err, errText(err))
		}
		var got struct{ Active []string }
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		return got.Active
	}
	if a := active(); !contains(a, tools.StartTaskThreads) || contains(a, tools.CompleteTask) {
		t.Fatalf("conversation: active %v", a)
	}
	srv.SetKind(bid, tools.TaskAssignee)
	if a := active(); contains(a, tools.StartTaskThreads) || !contains(a, tools.CompleteTask) {
		t.Fatalf("after SetKind(TaskAssignee): active %v", a)
	}
}

func annotationTitle(w map[string]any) any {
	if a, ok := w["annotations"].(map[string]any); ok {
		return a["title"]
	}
	return nil
}

func errText(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// piRun is one real pi run: the faux model calls tool with args, then says
// what the tool returned.
type piRun struct {
	events []map[string]any
	stderr string
}

// offered is the tool list the faux model was given.
func (r piRun) offered(t *testing.T) []string {
	t.Helper()
	for _, line := range strings.Split(r.stderr, "\n") {
		if rest, ok := strings.CutPrefix(line, "FAUX_TOOLS "); ok {
			var names []string
			if err := json.Unmarshal([]byte(rest), &names); err != nil {
				t.Fatal(err)
			}
			return names
		}
	}
	t.Fatalf("the faux model was never asked; stderr:\n%s", r.stderr)
	return nil
}

// toolEnd is the tool_execution_end event of the run's one tool call.
func (r piRun) toolEnd(t *testing.T) (text string, isError bool) {
	t.Helper()
	for _, e := range r.events {
		if e["type"] != "tool_execution_end" {
			continue
		}
		res, _ := e["result"].(map[string]any)
		var parts []string
		for _, c := range res["content"].([]any) {
			parts = append(parts, c.(map[string]any)["text"].(string))
		}
		return strings.Join(parts, "\n"), e["isError"] == true
	}
	t.Fatalf("no tool_execution_end event; stderr:\n%s", r.stderr)
	return "", false
}

// runPi runs `pi --offline -p --mode json` with the faux model and the
// generated extension, as session acp (a session file with that id, since
// pi-acp's ACP session id is pi's session id).
func runPi(t *testing.T, sock, acp, tool string) piRun {
	return runPiArgs(t, sock, acp, tool, "{}")
}

func runPiArgs(t *testing.T, sock, acp, tool, args string) piRun {
	t.Helper()
	node(t)
	bin, err := filepath.Abs(filepath.Join(piBin, "pi"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("pi is not installed (run scripts/setup.sh, which runs npm ci in zooid/piext/testdata/pi): %v", err)
	}
	agentDir := t.TempDir()
	if _, err := piext.Install(agentDir, nil); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	session := filepath.Join(t.TempDir(), "session.jsonl")
	header := fmt.Sprintf(`{"type":"session","version":3,"id":%q,"timestamp":"2026-01-01T00:00:00.000Z","cwd":%q}`+"\n", acp, work)
	if err := os.WriteFile(session, []byte(header), 0o600); err != nil {
		t.Fatal(err)
	}
	faux, _ := filepath.Abs("testdata/pi/faux.ts")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--offline", "-p", "--mode", "json", "--session", session,
		"--provider", "faux", "--model", "faux-1", "-e", faux, "what is going on?")
	cmd.Dir = work
	// pi's shebang asks PATH for node: the pinned one comes first.
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"), piext.AgentDirEnv+"="+agentDir, piext.SocketEnv+"="+sock, "FAUX_TOOL="+tool, "FAUX_ARGS="+args)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pi: %v\n%s", err, stderr.String())
	}
	run := piRun{stderr: stderr.String()}
	for _, line := range strings.Split(string(out), "\n") {
		var e map[string]any
		if json.Unmarshal([]byte(line), &e) == nil {
			run.events = append(run.events, e)
		}
	}
	return run
}

// TestPiCallsTheDaemon runs a real pi (offline, faux model) with the installed
// extension against a real daemon socket.
func TestPiCallsTheDaemon(t *testing.T) {
	srv, sock := daemon(t)

	t.Run("conversation reads the room", func(t *testing.T) {
		t.Parallel()
		acp := "5f0c7a52-0000-4000-8000-000000000001"
		bind(srv, tools.Conversation, acp)
		run := runPi(t, sock, acp, tools.GetRecentThreads)
		text, isErr := run.toolEnd(t)
		if isErr || !strings.Contains(text, `"text":"`+roomText+`"`) {
			t.Fatalf("zooid_get_recent_threads in pi: error %v, %s", isErr, text)
		}
		offered := run.offered(t)
		if !contains(offered, tools.StartTaskThreads) || contains(offered, tools.CompleteTask) {
			t.Fatalf("a conversation session offered %v, want %s and not %s", offered, tools.StartTaskThreads, tools.CompleteTask)
		}
	})
	t.Run("assignee is offered complete_task", func(t *testing.T) {
		t.Parallel()
		acp := "5f0c7a52-0000-4000-8000-000000000002"
		bind(srv, tools.TaskAssignee, acp)
		run := runPi(t, sock, acp, tools.GetRoomInfo)
		if text, isErr := run.toolEnd(t); isErr || !strings.Contains(text, `"id":"`+string(room)+`"`) {
			t.Fatalf("zooid_get_room_info in pi: error %v, %s", isErr, text)
		}
		offered := run.offered(t)
		if contains(offered, tools.StartTaskThreads) || !contains(offered, tools.CompleteTask) {
			t.Fatalf("an assignee session offered %v, want %s and not %s", offered, tools.CompleteTask, tools.StartTaskThreads)
		}
	})
	t.Run("unbound session", func(t *testing.T) {
		t.Parallel()
		run := runPi(t, sock, "5f0c7a52-0000-4000-8000-00000000dead", tools.GetRecentThreads)
		text, isErr := run.toolEnd(t)
		if !isErr || !strings.HasPrefix(text, "forbidden: this pi session (5f0c7a52-0000-4000-8000-00000000dead) is not bound to a Zooid room session") {
			t.Fatalf("unbound: error %v, %q", isErr, text)
		}
		// The role could not be read before the first prompt: the tools every
		// kind of session has, neither task tool.
		var always []string
		for _, tl := range tools.All() {
			if tl.Gating == tools.Always {
				always = append(always, tl.Name)
			}
		}
		var zooid []string
		for _, n := range run.offered(t) {
			if strings.HasPrefix(n, "zooid_") {
				zooid = append(zooid, n)
			}
		}
		if !slices.Equal(sortedCopy(zooid), sortedCopy(always)) {
			t.Fatalf("unreadable role offered the Zooid tools %v, want the tools every session kind has %v", zooid, always)
		}
	})
	t.Run("daemon not running", func(t *testing.T) {
		t.Parallel()
		gone := filepath.Join(t.TempDir(), "gone.sock")
		run := runPi(t, gone, "5f0c7a52-0000-4000-8000-000000000003", tools.GetRecentThreads)
		text, isErr := run.toolEnd(t)
		if !isErr || text != "unavailable: the Zooid daemon is not running (nothing listens on "+gone+")" {
			t.Fatalf("no daemon: error %v, %q", isErr, text)
		}
	})
	t.Run("refused call", func(t *testing.T) {
		t.Parallel()
		acp := "5f0c7a52-0000-4000-8000-000000000004"
		bind(srv, tools.Conversation, acp)
		run := runPiArgs(t, sock, acp, tools.GetThreadHistory, `{"thread_id":"nope"}`)
		text, isErr := run.toolEnd(t)
		if !isErr || text != `invalid_argument: thread_id "nope" is not an event id (they start with $)` {
			t.Fatalf("a call the daemon refuses: error %v, %q", isErr, text)
		}
	})
	t.Run("gated tool", func(t *testing.T) {
		t.Parallel()
		acp := "5f0c7a52-0000-4000-8000-000000000005"
		bind(srv, tools.Conversation, acp)
		run := runPi(t, sock, acp, tools.CompleteTask)
		text, isErr := run.toolEnd(t)
		// Gating deactivated the tool, so pi refuses it before the daemon would.
		if !isErr || text != "Tool "+tools.CompleteTask+" not found" {
			t.Fatalf("complete_task from a conversation: error %v, %q", isErr, text)
		}
	})
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}
