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
		{area: "script", pattern: `^([a-z0-9-]+)'s model will call (zooid_[a-z_]+)(?: with (\{.*\}))?$`,
			example: `scout's model will call zooid_send_message with {"room": "{#ops}", "text": "heads-up"}`,
			doc:     "Appends a tool call to a pi agent's model script (placeholders resolved now); each model request takes the script's next step.",
			fn:      w.stepModelCalls},
		{area: "script", pattern: `^([a-z0-9-]+)'s model will say "([^"]*)"$`,
			example: `scout's model will say "recent: {result}"`,
			doc:     "Appends a reply that ends the turn to a pi agent's model script; {result} becomes the text of the last tool result the model got, {prompt} the text of its last prompt.",
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
}

// piRoot finds the installed pi package: the feature suite runs in steps/,
// zooid sim at the repository root.
func piRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, piPackageDir)
		if _, err := os.Stat(filepath.Join(p, "package.json")); err == nil {
			if _, err := os.Stat(filepath.Join(p, "node_modules", ".bin", "pi-acp")); err != nil {
				return "", fmt.Errorf("pi-acp is not installed in %s: run scripts/setup.sh (npm ci there)", p)
			}
			return p, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("no %s above the working directory", piPackageDir)
		}
		dir = up
	}
}

func (w *world) stepRunsPi(list string) error {
	if w.started {
		return errors.New("pi agents must be declared before the first action (the daemon is already running)")
	}
	root, err := piRoot()
	if err != nil {
		return err
	}
	names := bareList(list)
	if len(names) == 0 {
		return fmt.Errorf("no agent named in %q", list)
	}
	for _, n := range names {
		a, err := w.agent(n)
		if err != nil {
			return err
		}
		if a.http {
			return fmt.Errorf("%s is bound to HTTP; pi agents here are Matrix agents", n)
		}
		a.pi = &piAgent{root: root, dir: filepath.Join(w.dir, "pi", n), script: filepath.Join(w.dir, "pi", n+".script")}
		if err := a.pi.prepare(); err != nil {
			return fmt.Errorf("preparing %s's pi directory: %w", n, err)
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
		"PATH":            filepath.Join(p.root, "node_modules", ".bin") + string(os.PathListSeparator) + os.Getenv("PATH"),
		piext.AgentDirEnv: p.dir,
		"FAUX_SCRIPT":     p.script,
		"PI_OFFLINE":      "1",
		// pi-acp asks npm for pi's latest version at session/new; offline, npm answers at once.
		"npm_config_offline": "true",
	}}
}

// hasPi says some agent of the scenario runs real pi.
func (w *world) hasPi() bool {
	for _, a := range w.agents {
		if a.pi != nil {
			return true
		}
	}
	return false
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
	return w.appendScript(agent, map[string]any{"call": tool, "args": a})
}

func (w *world) stepModelSays(agent, text string) error {
	return w.appendScript(agent, map[string]any{"say": text})
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

// piBarrier shows a pi agent is idle without prompting it (a new thread
// would be a new session, and pi-acp keeps one session per process): its
// model has taken every step of its script, and each reply the model gave
// (scripted.ts logs them beside the script) has been posted by the agent.
// Nothing is left that could make it post again.
func (w *world) piBarrier(ctx context.Context, agent string, a *agentDecl) error {
	return w.eventually(ctx, fmt.Sprintf("%s's model works through its script and its replies are posted", agent), func() (bool, string, error) {
		lines, err := readLines(a.pi.script)
		if err != nil {
			return false, "", err
		}
		pos := 0
		if b, err := os.ReadFile(a.pi.script + ".pos"); err == nil {
			_, _ = fmt.Sscanf(string(b), "%d", &pos)
		}
		if pos < len(lines) {
			return false, fmt.Sprintf("%d of %d script steps taken", pos, len(lines)), nil
		}
		saidLines, err := readLines(a.pi.script + ".said")
		if err != nil {
			return false, "", err
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
		for _, l := range saidLines {
			var said string
			if err := json.Unmarshal([]byte(l), &said); err != nil {
				return false, "", fmt.Errorf("%s.said: %w", a.pi.script, err)
			}
			i := slices.Index(posted, said)
			if i < 0 {
				return false, fmt.Sprintf("the model said %q, not posted yet", said), nil
			}
			posted = slices.Delete(posted, i, i+1)
		}
		return true, "", nil
	})
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
