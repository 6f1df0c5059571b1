package steps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/zooid-dev/zooid/internal/netjail"
	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/piext"
	"github.com/zooid-dev/zooid/zooid/zevent"
)

// Real pi agents: the daemon starts pi-acp on the `pi` preset, exactly as for
// an operator, and pi-acp starts pi, which loads the Zooid extension the
// daemon installed and a test-only model provider (zooid/piext/testdata/pi/
// scripted.ts) that works through a script these steps write. The npm
// packages come from scripts/setup.sh (npm ci with the committed lockfile).

// piPackageDir is where the pinned pi and pi-acp are installed, relative to
// the repository root.
const piPackageDir = "zooid/piext/testdata/pi"

// piWait bounds the waits of pi scenarios: a real pi takes seconds to start
// (node, TypeScript extensions), many more on a loaded 2-core machine.
const piWait = 120 * time.Second

func piSteps(w *world) []stepDef {
	return []stepDef{
		{area: "setup", pattern: `^([a-z0-9, -]+?) runs? real pi$`,
			example: `scout and worker run real pi`,
			doc:     "Runs declared agents on the pi preset: the real pi-acp and pi of zooid/piext/testdata/pi, with a scripted model (the `'s model will` steps); waits in scenarios with pi agents are 120 s.",
			fn:      w.stepRunsPi},
		{area: "script", pattern: `^([a-z0-9-]+)'s model will call ([A-Za-z][A-Za-z0-9_]*)(?: with (\{.*\}))?$`,
			example: `scout's model will call zooid_send_message with {"room": "{#ops}", "text": "heads-up"}`,
			doc:     "Appends a tool call to a real agent's model script (placeholders resolved now); each of its turn's model requests takes the script's next step. Zooid's tools by their own names (the model double finds the name the agent offers them under, such as Claude Code's mcp__zooid__…); other tools by the agent's name for them (Bash).",
			fn:      w.stepModelCalls},
		{area: "script", pattern: `^([a-z0-9-]+)'s model will say "([^"]*)"$`,
			example: `scout's model will say "recent: {result}"`,
			doc:     "Appends a reply that ends the turn to a real agent's model script; {result} becomes the text of the last tool result the model got, {prompt} the text of its last prompt.",
			fn:      w.stepModelSays},
		{area: "posts", pattern: `^([a-z0-9-]+) has started a task for ([a-z0-9-]+): "([^"]+)"$`,
			example: `scout has started a task for worker: "check the svc-a logs"`,
			doc:     "Waits for a task root posted by the agent in one of its rooms, naming that assignee in dev.zooid.thread_start, whose body contains the text; task steps can name it by that text from then on.",
			fn:      w.stepStartedTask},
		{area: "posts", pattern: `^([a-z0-9-]+) posts a notice containing "([^"]*)" in the thread$`,
			example: `scout posts a notice containing "svc-a deploy failed" in the thread`,
			doc:     "Waits for exactly one m.notice from the agent in the current thread whose body contains the text.",
			fn:      w.stepPostsContaining},
	}
}

// piAgent is what the harness keeps for an agent that runs real pi.
type piAgent struct {
	root   string // the installed pi package (piPackageDir)
	dir    string // its PI_CODING_AGENT_DIR
	script string // the model script (JSON lines), see scripted.ts
	path   string // its PATH: the pinned packages (behind the jail's shim, as root)
}

func (w *world) stepRunsPi(list string) error {
	agents, err := w.matrixAgents(list)
	if err != nil {
		return err
	}
	root, err := repoPackage(piPackageDir, "pi-acp")
	if err != nil {
		return err
	}
	for _, a := range agents {
		n := a.name
		a.pi = &piAgent{root: root, dir: filepath.Join(w.dir, "pi", n), script: filepath.Join(w.dir, "pi", n+".script")}
		if err := a.pi.prepare(); err != nil {
			return fmt.Errorf("preparing %s's pi directory: %w", n, err)
		}
		a.pi.path = filepath.Join(root, "node_modules", ".bin") + string(os.PathListSeparator) + os.Getenv("PATH")
		if netjail.Supported() {
			// pi's model is in-process (scripted.ts): nothing to forward.
			shims, err := w.jailShim(n, "pi-acp", a.pi.path, "")
			if err != nil {
				return fmt.Errorf("jailing %s: %w", n, err)
			}
			a.pi.path = shims + string(os.PathListSeparator) + a.pi.path
		}
	}
	// Real pi turns take seconds; the fake agent's 10 s would time them out.
	w.turnTimeout = max(w.turnTimeout, piWait)
	return nil
}

// prepare gives the agent's pi directory the scripted model and the
// settings that select it, before the daemon starts; the daemon adds its own
// extension beside them.
func (p *piAgent) prepare() error {
	ext := filepath.Join(p.dir, "extensions")
	if err := os.MkdirAll(ext, 0o700); err != nil {
		return err
	}
	src, err := os.ReadFile(filepath.Join(p.root, "scripted.ts"))
	if err != nil {
		return err
	}
	files := map[string]string{
		filepath.Join(ext, "scripted.ts"): string(src),
		// The faux provider needs no key, but pi-acp refuses session/new
		// unless some provider has one configured.
		filepath.Join(p.dir, "auth.json"):     `{"faux": {"type": "api_key", "key": "faux"}}`,
		filepath.Join(p.dir, "settings.json"): `{"defaultProvider": "faux", "defaultModel": "faux-1", "quietStartup": true}`,
		p.script:                              "",
	}
	for path, s := range files {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// acp is a pi agent's acp entry in zooid.yaml: the pi preset, as an operator
// writes it, with the pinned packages' bin directory on its PATH and its own
// pi directory.
func (p *piAgent) acp() config.ACP {
	return config.ACP{Preset: "pi", Env: map[string]string{
		"PATH":            p.path,
		piext.AgentDirEnv: p.dir,
		"FAUX_SCRIPT":     p.script,
		"PI_OFFLINE":      "1",
		// pi-acp asks npm for pi's latest version at session/new; offline, npm answers at once.
		"npm_config_offline": "true",
	}}
}

// appendScript adds one step to a pi agent's model script.
func (w *world) appendScript(agent string, step map[string]any) error {
	a, err := w.agent(agent)
	if err != nil {
		return err
	}
	if a.pi == nil {
		return fmt.Errorf("%s does not run real pi; say so first: %s runs real pi", agent, agent)
	}
	line, err := json.Marshal(step)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(a.pi.script, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func (w *world) stepModelCalls(ctx context.Context, agent, tool, args string) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	a, err := w.toolArgs(agent, args)
	if err != nil {
		return err
	}
	return w.scriptStep(agent, tool, a, "")
}

func (w *world) stepModelSays(agent, text string) error {
	return w.scriptStep(agent, "", nil, text)
}

func (w *world) stepPostsContaining(ctx context.Context, agent, text string) error {
	if w.thread == nil {
		return fmt.Errorf("there is no current thread yet")
	}
	return w.waitPost(ctx, agent, w.thread.room, fmt.Sprintf("a notice containing %q", text), w.thread.root,
		func(m seenMsg) bool { return strings.Contains(m.body, text) })
}

// stepStartedTask finds a task a pi agent's model started (the harness made
// no call itself, so it learns of the task from the room) and records it as
// task steps know tasks.
func (w *world) stepStartedTask(ctx context.Context, caller, assignee, prompt string) error {
	a, err := w.agent(caller)
	if err != nil {
		return err
	}
	if err := w.start(ctx); err != nil {
		return err
	}
	uid := w.names().agent(caller)
	var t *taskRef
	err = w.eventually(ctx, fmt.Sprintf("a task root from %s for %s with %q", caller, assignee, prompt), func() (bool, string, error) {
		var seen []string
		for _, rn := range a.rooms {
			r, err := w.room(ctx, rn)
			if err != nil {
				return false, "", err
			}
			msgs, err := w.readRaw(ctx, r)
			if err != nil {
				return false, "", err
			}
			for _, m := range msgs {
				ts, ok := zevent.ThreadStartOf(m.ev)
				if !ok || m.ev.Sender != uid {
					continue
				}
				body, _ := m.content["body"].(string)
				seen = append(seen, fmt.Sprintf("%s for %s: %q", r.name, ts.Assignee, body))
				if ts.Assignee != assignee || !strings.Contains(body, prompt) {
					continue
				}
				t = &taskRef{caller: caller, agent: assignee, prompt: prompt, notify: ts.Notify, thread: m.ev.ID, room: r}
				for _, p := range w.posts {
					if p.id == ts.Parent.ThreadRoot {
						t.origin = p
					}
				}
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("task roots from %s: %v", caller, seen), nil
	})
	if err != nil {
		return err
	}
	w.tw().tasks = append(w.tw().tasks, t)
	return nil
}

// readLines reads the non-empty lines of a file; a missing file has none.
func readLines(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out, nil
}
