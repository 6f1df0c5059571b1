package steps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/zooid-dev/zooid/internal/testdeps"
	"github.com/zooid-dev/zooid/modeldouble"
	"github.com/zooid-dev/zooid/sim/standin"
	"github.com/zooid-dev/zooid/zooid/config"
)

// Real agents: the daemon starts a preset's real adapter (Claude Code
// through claude-agent-acp, gemini-cli, …), exactly as for an operator, with
// the default permission policy; only the model is scripted. Each agent's
// model API is the scenario's model double (modeldouble), reached through
// the agent's own environment, and the `'s model will` steps write its
// script. The adapters come from scripts/setup.sh (npm ci in
// adaptersPackageDir).

// adaptersPackageDir is where the pinned adapters of the claude, codex,
// gemini and opencode presets are installed, relative to the repository root.
const adaptersPackageDir = "zooid/daemon/testdata/adapters"

// adapterBins are the directories of adaptersPackageDir holding the
// adapters' commands: npm's bin links, and opencode's native binary, whose
// package declares no bin.
var adapterBins = []string{
	filepath.Join("node_modules", ".bin"),
	filepath.Join("node_modules", "opencode-linux-x64-baseline", "bin"),
}

// realPreset is a preset whose real adapter these steps can run against the
// model double.
type realPreset struct {
	// pkg is the npm package directory (from the repository root) that
	// pins the adapter.
	pkg string
	// wire points the agent at the double: its environment, and files it
	// writes under the agent's HOME.
	wire func(md *modeldouble.Server, a wireTarget) (map[string]string, error)
}

// wireTarget is the agent a preset's wiring points at the double.
type wireTarget struct {
	agent string
	home  string // its HOME: the adapter's settings, sessions and logs
	// stateDir is the daemon's state dir, where a pi agent's default pi
	// directory lives.
	stateDir string
}

// realPresets are the presets these steps can run for real.
var realPresets = map[string]realPreset{
	"claude":   {adaptersPackageDir, wireClaude},
	"gemini":   {adaptersPackageDir, wireGemini},
	"codex":    {adaptersPackageDir, wireCodex},    // real_codex.go
	"opencode": {adaptersPackageDir, wireOpencode}, // real_opencode.go
	"pi":       {piPackageDir, wirePi},             // real_pi.go
}

func wireClaude(md *modeldouble.Server, a wireTarget) (map[string]string, error) {
	return map[string]string{
		"ANTHROPIC_BASE_URL": md.BaseURL(a.agent, modeldouble.Anthropic),
		"ANTHROPIC_API_KEY":  "modeldouble",
		// No update checks, telemetry or other traffic of Claude Code's own.
		"DISABLE_TELEMETRY": "1", "DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
	}, nil
}

func wireGemini(md *modeldouble.Server, a wireTarget) (map[string]string, error) {
	// Usage statistics go to Google (Clearcut) unless the user's settings
	// turn them off; the environment has no switch for them.
	settings := `{"privacy": {"usageStatisticsEnabled": false}, "telemetry": {"enabled": false},` +
		` "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false}}`
	if err := writeHomeFile(a.home, ".gemini/settings.json", settings); err != nil {
		return nil, err
	}
	return map[string]string{
		"GOOGLE_GEMINI_BASE_URL":   md.BaseURL(a.agent, modeldouble.Gemini),
		"GEMINI_API_KEY":           "modeldouble",
		"GEMINI_TELEMETRY_ENABLED": "false",
	}, nil
}

func (w *world) modelScript(agent string) (*modeldouble.Script, error) {
	a, err := w.agent(agent)
	if err != nil {
		return nil, err
	}
	if a.real == nil {
		return nil, fmt.Errorf("%s runs no real agent against the model double; say first: %s runs real claude", agent, agent)
	}
	return w.model.Script(agent), nil
}

// modelResult waits for the first model request of a real agent carrying a
// result of tool that check accepts.
func (w *world) modelResult(ctx context.Context, agent, tool, what string, check func(modeldouble.API, modeldouble.ToolResult) (bool, string)) error {
	if _, err := w.modelScript(agent); err != nil {
		return err
	}
	return w.eventually(ctx, fmt.Sprintf("%s's model reading %s", agent, what), func() (bool, string, error) {
		var seen []string
		for _, r := range w.model.Requests(agent) {
			for _, res := range r.ToolResults {
				if res.Name != tool && !strings.HasSuffix(res.Name, "_"+tool) {
					continue
				}
				ok, why := check(r.API, res)
				if ok {
					return true, "", nil
				}
				seen = append(seen, why)
			}
		}
		if len(seen) == 0 {
			return false, fmt.Sprintf("no result of %s in %d model requests", tool, len(w.model.Requests(agent))), nil
		}
		return false, strings.Join(seen, "; "), nil
	})
}

// resultObject is the JSON object a tool result's text carries, as each
// agent passes it to its model: as it is (Claude Code), wrapped in
// <untrusted_context> tags (gemini-cli), or after a "Wall time: …
// Output:" preamble as MCP content parts, [{"type": "text", "text": "{…}"}]
// (codex).
func resultObject(text string) (map[string]any, bool) {
	for i := 0; i < len(text); i++ {
		if text[i] != '{' && text[i] != '[' {
			continue
		}
		var v any
		if json.NewDecoder(strings.NewReader(text[i:])).Decode(&v) != nil {
			continue
		}
		parts, isList := v.([]any)
		if obj, ok := v.(map[string]any); ok {
			parts = []any{obj}
			if inner, ok := contentText(obj); ok {
				return resultObject(inner)
			}
			if !isList {
				return obj, true
			}
		}
		for _, p := range parts {
			if m, ok := p.(map[string]any); ok {
				if inner, ok := contentText(m); ok {
					return resultObject(inner)
				}
			}
		}
	}
	return nil, false
}

// contentText reads an MCP text content part, {"type": "text", "text": …}.
func contentText(m map[string]any) (string, bool) {
	t, ok := m["text"].(string)
	return t, ok && m["type"] == "text" && len(m) == 2
}

// zooidToolName reads an offered tool's name as Zooid's own: zooid_x itself
// or an agent's prefixed form of it (mcp__zooid__zooid_x).
func zooidToolName(offered string) (string, bool) {
	if i := strings.LastIndex(offered, "zooid_"); i >= 0 && (i == 0 || offered[i-1] == '_') {
		return offered[i:], true
	}
	return "", false
}

// writeHomeFile writes a file of an agent's settings under its HOME.
func writeHomeFile(home, rel, content string) error {
	p := filepath.Join(home, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(content), 0o600)
}

// realAgent is what the harness keeps for an agent that runs a preset's real
// adapter against the model double.
type realAgent struct {
	preset string
	home   string // its HOME: the adapter's settings, sessions and logs
	env    map[string]string
}

// jailShim writes a directory holding command as a script that runs the
// real command (found on path) under netjail with forward (the model
// double's address; "" for none) forwarded, to go first on the agent's PATH:
// the daemon still starts the preset's command by its name, and everything
// the adapter starts (Claude Code, the Zooid bridge) inherits the namespace.
// An adapter that reaches for anything but its model double then fails at
// once.
func (w *world) jailShim(agent, command, path, forward string) (string, error) {
	real, err := lookPathIn(command, path)
	if err != nil {
		return "", err
	}
	exe, err := standin.Path()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(w.dir, "jail", agent)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	fwd := ""
	if forward != "" {
		fwd = "--forward " + forward + " "
	}
	script := fmt.Sprintf("#!/bin/sh\nexec %s netjail %s-- %s \"$@\"\n", shellQuote(exe), fwd, shellQuote(real))
	return dir, os.WriteFile(filepath.Join(dir, command), []byte(script), 0o700)
}

// lookPathIn finds an executable on a PATH list.
func lookPathIn(command, path string) (string, error) {
	for _, d := range filepath.SplitList(path) {
		p := filepath.Join(d, command)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s is not on %s", command, path)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// realAgentPackages applies internal/testdeps' rule to the npm packages the
// real agents' scenarios run (the adapters and pi): err is nil when both are
// installed, and otherwise says what is missing; fail says the run asked for
// them (CI=true, ZOOID_TEST_NODE=1).
func realAgentPackages() (err error, fail bool) {
	for _, rel := range []string{adaptersPackageDir, piPackageDir} {
		dir, derr := repoDir(rel)
		if derr != nil {
			dir = rel // outside the repository: the probe says it is missing
		}
		if err, fail := testdeps.NodePackages(dir).Missing(); err != nil {
			return err, fail
		}
	}
	return nil, false
}

// repoDir finds a directory of the repository (rel, from its root) above the
// working directory.
func repoDir(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(filepath.Join(p, "package.json")); err == nil {
			return p, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("no %s above the working directory", rel)
		}
		dir = up
	}
}

// repoPackage finds an npm package directory of the repository (rel, from
// the repository root) one of whose adapterBins holds bin: the feature suite
// runs in steps/, zooid sim at the repository root.
func repoPackage(rel, bin string) (string, error) {
	p, err := repoDir(rel)
	if err != nil {
		return "", err
	}
	for _, b := range adapterBins {
		if _, err := os.Stat(filepath.Join(p, b, bin)); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s is not installed in %s: run scripts/setup.sh (npm ci there)", bin, p)
}

// matrixAgents finds the declared Matrix agents a step names, as a list
// ("a and b"), before the daemon starts: a real agent is configured into
// the daemon's zooid.yaml.
func (w *world) matrixAgents(list string) ([]*agentDecl, error) {
	if w.started {
		return nil, errors.New("real agents must be declared before the first action (the daemon is already running)")
	}
	names := bareList(list)
	if len(names) == 0 {
		return nil, fmt.Errorf("no agent named in %q", list)
	}
	var out []*agentDecl
	for _, n := range names {
		a, err := w.agent(n)
		if err != nil {
			return nil, err
		}
		if a.http {
			return nil, fmt.Errorf("%s is bound to HTTP; real agents here are Matrix agents", n)
		}
		out = append(out, a)
	}
	return out, nil
}

// modelDouble starts the scenario's model double on first use. It is closed
// with the scenario, after the daemon, and a script the agents and the
// scenario disagreed on (a turn with no step left, a tool not offered)
// fails the scenario then.
func (w *world) modelDouble() (*modeldouble.Server, error) {
	if w.model != nil {
		return w.model, nil
	}
	md, err := modeldouble.Start(modeldouble.WithLogger(w.log.With("component", "modeldouble")))
	if err != nil {
		return nil, fmt.Errorf("starting the model double: %w", err)
	}
	w.model = md
	w.closers = append(w.closers, func() error {
		err := md.Close()
		var misses []string
		for _, n := range w.agentSeq {
			if a := w.agents[n]; a.real != nil {
				misses = append(misses, md.Script(n).Misses()...)
			}
		}
		if len(misses) > 0 {
			err = errors.Join(err, fmt.Errorf("the model double's scripts: %s", strings.Join(misses, "; ")))
		}
		return err
	})
	return md, nil
}

// acp is a real agent's acp entry in zooid.yaml: the preset, as an operator
// writes it, with the pinned adapters on its PATH and its model API pointed
// at the double. Its permission policy is left at the default.
func (r *realAgent) acp() config.ACP {
	return config.ACP{Preset: r.preset, Env: r.env}
}

// hasRealAgents says some agent of the scenario runs a preset's real
// adapter, whose start and turns take seconds.
func (w *world) hasRealAgents() bool {
	for _, a := range w.agents {
		if a.real != nil {
			return true
		}
	}
	return false
}

// scriptStep appends one step to a real agent's model script: a tool call
// (call, with args) or a reply that ends the turn (say).
func (w *world) scriptStep(agent string, call string, args map[string]any, say string) error {
	sc, err := w.modelScript(agent)
	if err != nil {
		return err
	}
	if call == "" {
		sc.Say(say)
		return nil
	}
	b, err := json.Marshal(args)
	if err != nil {
		return err
	}
	sc.Call(call, string(b))
	return nil
}

// modelBarrier shows a real agent is idle without prompting it (a new
// thread would be a new session): its model has taken every step of its
// script, and each reply the model gave has been posted by the agent.
// Nothing is left that could make it post again.
func (w *world) modelBarrier(ctx context.Context, agent string, a *agentDecl) error {
	return w.eventually(ctx, fmt.Sprintf("%s's model works through its script and its replies are posted", agent), func() (bool, string, error) {
		sc := w.model.Script(agent)
		taken, total := sc.Taken()
		said := sc.Said()
		if taken < total {
			return false, fmt.Sprintf("%d of %d script steps taken", taken, total), nil
		}
		var posted []string
		for _, rn := range a.rooms {
			r, err := w.room(ctx, rn)
			if err != nil {
				return false, "", err
			}
			msgs, err := w.readRoom(ctx, r, 3)
			if err != nil {
				return false, "", err
			}
			mine, _ := w.fromAgent(msgs, agent)
			for _, m := range mine {
				posted = append(posted, m.body)
			}
		}
		for _, s := range said {
			i := slices.Index(posted, s)
			if i < 0 {
				return false, fmt.Sprintf("the model said %q, not posted yet", s), nil
			}
			posted = slices.Delete(posted, i, i+1)
		}
		return true, "", nil
	})
}

// realWait bounds the waits of scenarios with real agents: a real adapter
// takes seconds to start (node, its own settings and extensions), many more
// on a loaded 2-core machine.
const realWait = 120 * time.Second
