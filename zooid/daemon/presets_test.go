package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zooid-dev/zooid/internal/testdeps"

	acp "github.com/coder/acp-go-sdk"

	"github.com/zooid-dev/zooid/zooid/acpagent"
	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/mcpserver"
	"github.com/zooid-dev/zooid/zooid/tools"
)

// adaptersDir holds the adapters of the claude, codex, gemini and opencode
// presets at the versions docs/agents.md names (package-lock.json there);
// scripts/setup.sh installs them.
const adaptersDir = "testdata/adapters"

// presetCase is how far a preset's real adapter can go on a machine with no
// model key and no network but the loopback.
type presetCase struct {
	name   string // the subtest; default the preset
	preset string
	// env keeps the adapter off the network where it has a switch for it,
	// and gives placeholder keys where session/new refuses to start without
	// one (no model is ever asked: these tests send no prompt).
	env map[string]string
	// offline says why the test goes no further than session/new and the
	// MCP handshake.
	offline string
	// untrusted: the adapter must not connect the MCP server at all.
	untrusted bool
	// listsInSessionNew: the adapter lists the tools before it answers
	// session/new, which the untrusted case relies on as its barrier.
	listsInSessionNew bool
}

var presetCases = []presetCase{
	{preset: "claude", env: map[string]string{
		"DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
	}, offline: "a prompt needs Anthropic's API (a key and its network)"},
	{preset: "codex", env: map[string]string{
		// codex-acp answers session/new with auth_required until the client
		// calls authenticate; acpagent does, with the env_var method whose
		// variable is set.
		"CODEX_API_KEY": "placeholder-offline", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
	}, offline: "a prompt needs OpenAI's API (a key and its network)"},
	{preset: "gemini", env: map[string]string{
		// session/new refuses without a key; the trust the gemini preset sets
		// (GEMINI_CLI_TRUST_WORKSPACE) is what lets it connect MCP servers.
		"GEMINI_API_KEY": "placeholder-offline", "GEMINI_TELEMETRY_ENABLED": "false",
	}, offline: "a prompt needs Google's Gemini API (a key and its network)", listsInSessionNew: true},
	{name: "gemini-untrusted", preset: "gemini", env: map[string]string{
		// Why the gemini preset sets the trust: without it gemini starts, opens
		// the session and never connects the zooid server.
		"GEMINI_API_KEY": "placeholder-offline", "GEMINI_TELEMETRY_ENABLED": "false", "GEMINI_CLI_TRUST_WORKSPACE": "false",
	}, untrusted: true},
	{preset: "opencode", env: map[string]string{
		"OPENCODE_DISABLE_MODELS_FETCH": "true", "OPENCODE_DISABLE_AUTOUPDATE": "true",
		"OPENCODE_DISABLE_LSP_DOWNLOAD": "true", "OPENCODE_DISABLE_DEFAULT_PLUGINS": "true", "OPENCODE_DISABLE_SHARE": "true",
	}, offline: "a prompt needs a model provider (a key and its network)"},
}

// TestPresetAdapters starts each preset's real adapter as the daemon does
// (the preset's command and arguments, the daemon's agent environment with
// the pinned adapters' bin directory first on PATH), runs initialize, then
// session/new with the Zooid MCP server entry of a real MCP server socket,
// and waits until the adapter's MCP client has listed the tools through the
// bridge on that socket. All four adapters connect their MCP servers at
// session start. Without the adapters' packages the test follows
// internal/testdeps' rule; one adapter missing from them is a failure.
func TestPresetAdapters(t *testing.T) {
	testdeps.Require(t, testdeps.NodePackages(adaptersDir))
	root, err := filepath.Abs(adaptersDir)
	if err != nil {
		t.Fatal(err)
	}
	// opencode is its native binary's package, which declares no bin.
	bins := []string{filepath.Join(root, "node_modules", ".bin"), filepath.Join(root, "node_modules", "opencode-linux-x64-baseline", "bin")}
	found := func(command string) error {
		var err error
		for _, b := range bins {
			if _, err = os.Stat(filepath.Join(b, command)); err == nil {
				return nil
			}
		}
		return err
	}
	for _, pc := range presetCases {
		name := pc.name
		if name == "" {
			name = pc.preset
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			command, _ := config.ACP{Preset: pc.preset}.Resolve()
			if err := found(command); err != nil {
				t.Fatalf("the %s preset's adapter is not installed (%v): run scripts/setup.sh (npm ci in %s)", pc.preset, err, adaptersDir)
			}
			listed := &recordWatch{msg: "tools listed", agent: pc.preset, seen: make(chan struct{})}
			srv := newPresetServer(t, listed)
			if _, err := srv.ListenAgent(pc.preset); err != nil {
				t.Fatal(err)
			}

			home, work := t.TempDir(), t.TempDir()
			cfg := config.ACP{Preset: pc.preset, Env: map[string]string{
				"PATH": strings.Join(append(bins, os.Getenv("PATH")), string(os.PathListSeparator)),
				"HOME": home,
			}}
			for k, v := range pc.env {
				cfg.Env[k] = v
			}
			// As openAgent starts an agent.
			command, args := cfg.Resolve()
			spec := acpagent.Spec{Command: command, Args: args, Env: agentEnv(nil, cfg), Dir: work}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			start := time.Now()
			conn, err := acpagent.Start(ctx, spec, acpagent.Options{Logger: testLogger(t)})
			if err != nil {
				t.Fatalf("initialize: %v", err)
			}
			t.Cleanup(func() { _ = conn.Close() })
			initialized := time.Since(start)
			proc, err := mcpserver.ProcessOf(conn.Pid())
			if err != nil {
				t.Fatal(err)
			}
			binding := srv.Bind(tools.Caller{Agent: pc.preset, Transport: "matrix", Kind: tools.Conversation}, proc)
			sess, err := conn.NewSession(ctx, work, []acp.McpServer{srv.StdioEntry(binding)})
			if err != nil {
				t.Fatalf("session/new with the zooid MCP server: %v", err)
			}
			opened := time.Since(start)
			if pc.untrusted {
				// gemini connects its MCP servers inside session/new (the trusted
				// run sees tools/list before the answer), so its answer is the
				// barrier: a list after it would be too late to count anyway.
				select {
				case <-listed.seen:
					t.Fatalf("%s listed the tools in a folder it does not trust", pc.preset)
				default:
				}
				t.Logf("%s in an untrusted folder: session/new after %s, and no tools/list on the daemon's socket", pc.preset, opened.Round(time.Millisecond))
				return
			}
			if pc.listsInSessionNew {
				select {
				case <-listed.seen:
				default:
					t.Errorf("%s answered session/new before listing the tools: gemini-untrusted's barrier does not hold", pc.preset)
				}
			}
			select {
			case <-listed.seen:
			case <-ctx.Done():
				t.Fatalf("session %s opened, but the adapter's MCP client never listed the tools on the daemon's socket", sess.ID())
			}
			t.Logf("%s (%s %s): initialize after %s, session/new after %s, tools/list on the daemon's socket after %s; no further offline: %s",
				pc.preset, command, strings.Join(args, " "), initialized.Round(time.Millisecond), opened.Round(time.Millisecond),
				time.Since(start).Round(time.Millisecond), pc.offline)
		})
	}
}

// newPresetServer starts an MCP server whose bridge is this test binary
// (TestMain) and whose debug records go to watch.
func newPresetServer(t *testing.T, watch *recordWatch) *mcpserver.Server {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Unix socket paths are short (108 bytes); t.TempDir can be long.
	dir, err := os.MkdirTemp("", "zpreset")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	srv, err := mcpserver.New(mcpserver.Options{
		RunDir:        filepath.Join(dir, "run"),
		Logger:        slog.New(watch),
		BridgeCommand: []string{exe, "mcp"},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	return srv
}

// testLogger sends an adapter's log (its stderr, line by line) to the test log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// recordWatch is a slog handler that closes seen at the first record with
// message msg and attribute agent=agent.
type recordWatch struct {
	msg, agent string
	seen       chan struct{}
	once       sync.Once
}

func (w *recordWatch) Enabled(context.Context, slog.Level) bool { return true }

func (w *recordWatch) Handle(_ context.Context, r slog.Record) error {
	if r.Message != w.msg {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "agent" && a.Value.String() == w.agent {
			w.once.Do(func() { close(w.seen) })
			return false
		}
		return true
	})
	return nil
}

func (w *recordWatch) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *recordWatch) WithGroup(string) slog.Handler      { return w }
