package steps

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/zooid-dev/zooid/fakeagent"
	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/sandbox"
)

// The catalogue's "What agents can reach" steps (area sandbox) and the step
// methods they run.

func sandboxSteps(w *world) []stepDef {
	return []stepDef{
		{area: "sandbox", pattern: `^agents run without a sandbox$`,
			example: `agents run without a sandbox`,
			doc:     "Sets every agent's zooid.yaml sandbox to none: each runs with everything the daemon's user can reach (without the step, every local agent is held by Landlock).",
			fn:      w.stepUnsandboxed},
		{area: "sandbox", pattern: `^([a-z0-9-]+) tries to reach what the daemon keeps from it$`,
			example: `agent-a tries to reach what the daemon keeps from it`,
			doc:     "Wakes the agent in its current thread with a turn in which its own process tries to read zooid.yaml, the state dir and every file and other agent's directory in it, the run dir and every other agent's working directory; to open the cursor key for writing; to connect to every other agent's socket; and to ptrace and signal the daemon's process and every other agent's live one. Waits for its reports.",
			fn:      w.stepReachDaemons},
		{area: "sandbox", pattern: `^([a-z0-9-]+) tries to reach its own files and the system's$`,
			example: `agent-a tries to reach its own files and the system's`,
			doc:     "The same, trying its own: reading and writing its working directory and (sandboxed) its temp dir, connecting to its own socket, reading /etc/passwd, listing /usr/bin.",
			fn:      w.stepReachOwn},
		{area: "sandbox", pattern: `^every reach of ([a-z0-9-]+) was refused$`,
			example: `every reach of agent-a was refused`,
			doc:     "Each attempt of its last reach step was refused by the kernel (EACCES or EPERM), as far as this kernel's Landlock holds it: another agent's socket from ABI 9 (before, that socket's peer check refuses the session instead: zooid/mcpserver TestOnlyTheAgentAndItsDescendantsAreServed), signals from ABI 6.",
			fn:      w.stepAllRefused},
		{area: "sandbox", pattern: `^every reach of ([a-z0-9-]+) succeeded$`,
			example: `every reach of agent-b succeeded`,
			doc:     "Each attempt of its last reach step succeeded; a ptrace only where the machine allows one without a sandbox (root, or Yama's ptrace_scope 0 or absent).",
			fn:      w.stepAllReached},
		{area: "sandbox", pattern: `^([a-z0-9-]+) runs a tool it writes in its working directory$`,
			example: `agent-a runs a tool it writes in its working directory`,
			doc:     "Wakes the agent with a turn in which it starts a shell that writes a script into the agent's working directory and runs it, as an agent runs a tool: the script lists /usr/bin, writes a file in its TMPDIR, reads it back and prints its working directory. Waits for the output.",
			fn:      w.stepRunsTool},
		{area: "sandbox", pattern: `^the tool of ([a-z0-9-]+) ran$`,
			example: `the tool of agent-a ran`,
			doc:     "Its last tool exited 0 having done all of it, in the agent's working directory.",
			fn:      w.stepToolRan},
	}
}

// What a reach attempt tries, for what the kernel's Landlock can refuse.
const (
	reachFile        = "file"         // open, list or write a path
	reachOtherSocket = "other socket" // connect to another agent's socket
	reachSignal      = "signal"
	reachPtrace      = "ptrace"
)

// reachTry is one attempt of a reach step and what came of it.
type reachTry struct {
	kind string
	res  fakeagent.ReachResult
}

func (w *world) stepUnsandboxed() error {
	if w.started {
		return errors.New("the sandbox must be chosen before the first action (the daemon is already running)")
	}
	w.unsandboxed = true
	return nil
}

// sandboxOf is a scripted agent's zooid.yaml sandbox: none when the scenario
// says so, else no type (the default, Landlock), with the controller's
// socket directory writable so the agent reaches its controller on a kernel
// that guards unix sockets (Landlock ABI 9).
func (w *world) sandboxOf(a *agentDecl) *config.Sandbox {
	if a.real != nil {
		return nil // the default, nothing more
	}
	mode := ""
	if w.unsandboxed {
		mode = sandbox.None
	}
	return &config.Sandbox{Mode: mode, Write: []string{filepath.Dir(w.ctl.Socket())}}
}

// daemonPid is the daemon's process: this one, or the child it runs as.
func (w *world) daemonPid() int {
	if p := w.tw().proc; p != nil {
		return p.Pid()
	}
	return os.Getpid()
}

func (w *world) stepReachDaemons(ctx context.Context, agent string) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	if _, err := w.agent(agent); err != nil {
		return err
	}
	state := w.stateDir()
	var tries []reachTry
	add := func(kind, target string) {
		tries = append(tries, reachTry{kind: kind, res: fakeagent.ReachResult{Path: target}})
	}
	add(reachFile, filepath.Join(w.dir, "zooid.yaml"))
	add(reachFile, state)
	add(reachFile, "write:"+filepath.Join(state, "cursor.key"))
	err := filepath.WalkDir(state, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(state, path)
		parts := strings.Split(filepath.ToSlash(rel), "/")
		switch {
		case path == state:
		case len(parts) == 2 && (parts[0] == "agents" || parts[0] == "pi" || parts[0] == "tmp"):
			// An agent's own directories under the state dir are its own.
			if parts[1] != agent {
				add(reachFile, path)
			}
			return filepath.SkipDir
		case !d.IsDir():
			add(reachFile, path)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("listing the state dir: %w", err)
	}
	add(reachFile, filepath.Join(w.dir, "run"))
	for _, other := range w.agentSeq {
		if other == agent {
			continue
		}
		add(reachFile, filepath.Join(w.dir, "agents", other))
		if !w.agents[other].http {
			add(reachOtherSocket, filepath.Join(w.dir, "run", other, "zooid.sock"))
		}
		if ss := w.ctl.Sessions(other); len(ss) > 0 {
			pid := ss[len(ss)-1].Pid
			add(reachPtrace, fmt.Sprintf("ptrace:%d", pid))
			add(reachSignal, fmt.Sprintf("signal:%d", pid))
		}
	}
	add(reachPtrace, fmt.Sprintf("ptrace:%d", w.daemonPid()))
	add(reachSignal, fmt.Sprintf("signal:%d", w.daemonPid()))
	return w.reach(ctx, agent, tries)
}

func (w *world) stepReachOwn(ctx context.Context, agent string) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	a, err := w.agent(agent)
	if err != nil {
		return err
	}
	work := filepath.Join(w.dir, "agents", agent)
	targets := []string{work, "write:" + filepath.Join(work, "reach-probe"), "/etc/passwd", "/usr/bin"}
	if !a.http {
		targets = append(targets, filepath.Join(w.dir, "run", agent, "zooid.sock"))
	}
	if !w.unsandboxed {
		targets = append(targets, "write:"+filepath.Join(w.stateDir(), "tmp", agent, "reach-probe"))
	}
	var tries []reachTry
	for _, t := range targets {
		tries = append(tries, reachTry{kind: reachFile, res: fakeagent.ReachResult{Path: t}})
	}
	return w.reach(ctx, agent, tries)
}

// reach runs one turn of agent that tries each target and records what
// its process reported.
func (w *world) reach(ctx context.Context, agent string, tries []reachTry) error {
	targets := make([]string, len(tries))
	for i, t := range tries {
		targets[i] = t.res.Path
	}
	before := len(w.ctl.Reaches(agent))
	if err := w.agentTurn(ctx, agent, fakeagent.Turn{fakeagent.Reach(targets...), fakeagent.Stop("end_turn")}); err != nil {
		return err
	}
	wctx, cancel := w.waitCtx(ctx)
	defer cancel()
	got, err := w.ctl.WaitReaches(wctx, agent, before+len(tries))
	if err != nil {
		return fmt.Errorf("%s trying to reach %d targets: %w; %s", agent, len(tries), err, w.promptsSeen(agent))
	}
	for i := range tries {
		tries[i].res = got[before+i]
	}
	w.reaches[agent] = tries
	return nil
}

// agentTurn wakes a scripted agent in its current thread (opening one with
// a mention if it has none) with turn queued for it.
func (w *world) agentTurn(ctx context.Context, agent string, turn fakeagent.Turn) error {
	a, err := w.agent(agent)
	if err != nil {
		return err
	}
	if a.real != nil {
		return fmt.Errorf("%s runs a real adapter; these steps script the scripted agent", agent)
	}
	f := w.focus[agent]
	if f == nil {
		if len(a.rooms) == 0 {
			return fmt.Errorf("%s is bound to no room, so no message can wake it", agent)
		}
		if err := w.stepAnswering(ctx, agent, a.rooms[0]); err != nil {
			return err
		}
		f = w.focus[agent]
	}
	// The turn queued next must be consumed by the wake below, not by the
	// message the agent is still answering.
	if err := w.waitPrompted(ctx, agent, f.core); err != nil {
		return err
	}
	w.ctl.Queue(agent, turn)
	w.stepSeq++
	_, err = w.say(ctx, f.sender, f.room.name, fmt.Sprintf("@%s go on (%d)", agent, w.stepSeq), f.root, true)
	return err
}

func (w *world) lastReaches(agent string) ([]reachTry, error) {
	tries := w.reaches[agent]
	if len(tries) == 0 {
		return nil, fmt.Errorf("%s has tried to reach nothing; a reach step comes first", agent)
	}
	return tries, nil
}

func (w *world) stepAllRefused(agent string) error {
	tries, err := w.lastReaches(agent)
	if err != nil {
		return err
	}
	abi := sandbox.ABI()
	var bad []string
	for _, t := range tries {
		switch {
		case t.kind == reachOtherSocket && abi < 9, t.kind == reachSignal && abi < 6:
			continue // this kernel's Landlock does not hold it (zooid check says so)
		case !t.res.Refused():
			bad = append(bad, fmt.Sprintf("%s (%s)", t.res.Path, orOK(t.res.Err)))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s reached, on a kernel with Landlock ABI %d: %s", agent, abi, strings.Join(bad, "; "))
	}
	return nil
}

func (w *world) stepAllReached(agent string) error {
	tries, err := w.lastReaches(agent)
	if err != nil {
		return err
	}
	var bad []string
	for _, t := range tries {
		if t.kind == reachPtrace && !ptraceAllowedHere() {
			continue
		}
		if t.res.Err != "" {
			bad = append(bad, fmt.Sprintf("%s: %s", t.res.Path, t.res.Err))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s was refused: %s", agent, strings.Join(bad, "; "))
	}
	return nil
}

func orOK(err string) string {
	if err == "" {
		return "it worked"
	}
	return err
}

// ptraceAllowedHere says an unsandboxed process may ptrace another of its
// uid that is not its descendant: root may, and anyone where Yama's
// ptrace_scope is 0 or Yama is absent.
func ptraceAllowedHere() bool {
	if os.Geteuid() == 0 {
		return true
	}
	b, err := os.ReadFile("/proc/sys/kernel/yama/ptrace_scope")
	return err != nil || strings.TrimSpace(string(b)) == "0"
}

// toolScript is what the tool step's agent runs: a script it writes into
// its working directory and starts, which uses the system's programs and
// its temp dir.
const toolScript = `printf '#!/bin/sh\nset -e\nls /usr/bin >/dev/null\nmkdir -p "${TMPDIR:-/tmp}/tool-$$"\necho made > "${TMPDIR:-/tmp}/tool-$$/out"\ncat "${TMPDIR:-/tmp}/tool-$$/out"\necho "ran in $(pwd)"\n' > ./tool.sh && chmod +x ./tool.sh && ./tool.sh`

func (w *world) stepRunsTool(ctx context.Context, agent string) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	before := len(w.ctl.Probes(agent))
	if err := w.agentTurn(ctx, agent, fakeagent.Turn{fakeagent.RunTool("/bin/sh", "-c", toolScript), fakeagent.Stop("end_turn")}); err != nil {
		return err
	}
	wctx, cancel := w.waitCtx(ctx)
	defer cancel()
	got, err := w.ctl.WaitProbes(wctx, agent, before+1)
	if err != nil {
		return fmt.Errorf("%s running a tool: %w; %s", agent, err, w.promptsSeen(agent))
	}
	w.tool[agent] = got[before]
	return nil
}

func (w *world) stepToolRan(agent string) error {
	pr, ok := w.tool[agent]
	if !ok {
		return fmt.Errorf("%s has run no tool; the tool step comes first", agent)
	}
	want := []string{"made", "ran in " + filepath.Join(w.dir, "agents", agent)}
	for _, s := range want {
		if !strings.Contains(pr.Out, s) {
			return fmt.Errorf("%s's tool printed %q (err %q); want %q in it", agent, pr.Out, pr.Err, s)
		}
	}
	if pr.Err != "" {
		return fmt.Errorf("%s's tool failed: %s: %s", agent, pr.Err, pr.Out)
	}
	return nil
}
