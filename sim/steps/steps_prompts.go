package steps

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/zooid-dev/zooid/zooid/handshake"

	acp "github.com/coder/acp-go-sdk"
	"github.com/cucumber/godog"
	"maunium.net/go/mautrix"

	"github.com/zooid-dev/zooid/fakeagent"
	"github.com/zooid-dev/zooid/zooid/trace"
)

func promptSteps(w *world) []stepDef {
	return []stepDef{
		{area: "prompts", pattern: `^([a-z0-9-]+) is prompted with "([^"]*)"$`,
			example: `agent-a is prompted with "can someone audit svc-a"`,
			doc:     "Waits until one of the agent's prompts contains the text.",
			fn:      w.stepPrompted},
		{area: "prompts", pattern: `^([a-z0-9-]+)'s prompt with "([^"]*)" is exactly:$`,
			example: `agent-a's prompt with "can someone audit svc-a" is exactly:`,
			doc:     "Waits for the prompt containing the text and compares it whole with the doc string, in which {placeholder} in braces is replaced as in tool arguments (`{#ops}`, `{#ops:alias}`, `{@ori}`, `{$thread}`, `{$task:audit svc-a}`).",
			fn:      w.stepPromptExactly},
		{area: "prompts", pattern: `^([a-z0-9-]+) is prompted (once|twice|\d+ times) with "([^"]*)"$`,
			example: `agent-a is prompted once with "can someone audit svc-a"`,
			doc:     "After a barrier, exactly that many of the agent's prompts contain the text.",
			fn:      w.stepPromptedTimes},
		{area: "prompts", pattern: `^([a-z0-9-]+) is not prompted with "([^"]*)"$`,
			example: `agent-b is not prompted with "can someone audit svc-a"`,
			doc:     "After a barrier, none of the agent's prompts contain the text.",
			fn:      w.stepNotPrompted},
		{area: "prompts", pattern: `^([a-z0-9-]+) is prompted with "([^"]*)" in the same session as "([^"]*)"$`,
			example: `agent-a is prompted with "and svc-b" in the same session as "audit svc-a"`,
			doc:     "Waits for the first prompt, then checks it went to the session of the earlier one.",
			fn:      w.stepSameSession},
		{area: "prompts", pattern: `^([a-z0-9-]+) is prompted with "([^"]*)" in a new session$`,
			example: `agent-a is prompted with "start over" in a new session`,
			doc:     "Waits for the prompt and checks its session received no earlier prompt.",
			fn:      w.stepNewSession},
		{area: "prompts", pattern: `^([a-z0-9-]+) has had (\d+) sessions?$`,
			example: `agent-a has had 2 sessions`,
			doc:     "Waits until the agent has received that many session/new, and checks there are no more.",
			fn:      w.stepSessions},
		{area: "prompts", pattern: `^([a-z0-9-]+)'s session/new offers the zooid MCP server over stdio$`,
			example: `agent-a's session/new offers the zooid MCP server over stdio`,
			doc:     "The agent's latest session/new has exactly one MCP server: stdio, this executable's `mcp` subcommand.",
			fn:      w.stepSessionNewMCP},
		{area: "prompts", pattern: `^no secret appears in ([a-z0-9-]+)'s environment, arguments or session/new$`,
			example: `no secret appears in agent-a's environment, arguments or session/new`,
			doc:     "Neither the appservice tokens nor any user's access token occur in the agent process's env or argv, or in what session/new carried; and the session's binding id (handed to the bridge in `$ZOOID_BINDING`) is in the argv (`/proc/<pid>/cmdline`) of neither the agent process nor any live descendant of it, once its bridge runs.",
			fn:      w.stepNoSecrets},
		{area: "prompts", pattern: `^([a-z0-9-]+) sees exactly the tools ([a-z_, ]+)$`,
			example: `agent-a sees exactly the tools zooid_get_recent_threads, zooid_get_history and zooid_send_message`,
			doc:     "The latest tools/list the agent made holds exactly these tools, in any order.",
			fn:      w.stepSeesTools},
		{area: "prompts", pattern: `^([a-z0-9-]+) does not see (zooid_[a-z_]+)$`,
			example: `agent-a does not see zooid_complete_task`,
			doc:     "The latest tools/list the agent made lacks the tool.",
			fn:      w.stepNotSeesTool},
	}
}

func (w *world) stepPrompted(ctx context.Context, agent, text string) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	if _, err := w.agent(agent); err != nil {
		return err
	}
	return w.waitPrompted(ctx, agent, text)
}

// bracePlaceholder is a placeholder written in braces inside free text.
var bracePlaceholder = regexp.MustCompile(`\{([#@$][^{}"\n]*)\}`)

func (w *world) stepPromptExactly(ctx context.Context, agent, text string, doc *godog.DocString) error {
	if err := w.stepPrompted(ctx, agent, text); err != nil {
		return err
	}
	var errs []error
	want := bracePlaceholder.ReplaceAllStringFunc(doc.Content, func(m string) string {
		v, err := w.placeholder(agent, m[1:len(m)-1])
		if err != nil {
			errs = append(errs, err)
			return m
		}
		return fmt.Sprint(v)
	})
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	got, _ := w.promptWith(agent, text)
	if got.Text != want {
		return fmt.Errorf("%s's prompt with %q is\n%s\nwant\n%s", agent, text, got.Text, want)
	}
	return nil
}

// waitPrompted waits for a prompt containing text.
func (w *world) waitPrompted(ctx context.Context, agent, text string) error {
	return w.eventually(ctx, fmt.Sprintf("%s prompted with %q", agent, text), func() (bool, string, error) {
		_, ok := w.promptWith(agent, text)
		return ok, w.promptsSeen(agent), nil
	})
}

// promptWith is the first prompt of agent containing text.
func (w *world) promptWith(agent, text string) (fakeagent.Prompt, bool) {
	for _, p := range w.ctl.Prompts(agent) {
		if strings.Contains(p.Text, text) {
			return p, true
		}
	}
	return fakeagent.Prompt{}, false
}

// barrierMarker is in every barrier mention; the fake agents answer prompts
// carrying it without consuming a scripted turn.
const barrierMarker = "harness-barrier"

// barrier proves the daemon has handled everything sent so far for agent: a
// new top-level mention goes to the agent's first room, and the agent must be
// prompted with it. Pushes and routing are in order, so earlier events are done.
// The barrier opens a session of its own; sessionsOf leaves those out.
func (w *world) barrier(ctx context.Context, agent string) error {
	a, err := w.agent(agent)
	if err != nil {
		return err
	}
	if len(a.rooms) == 0 {
		return fmt.Errorf("%s is bound to no room, so nothing can show it is idle", agent)
	}
	if a.real != nil {
		return w.modelBarrier(ctx, agent, a)
	}
	thread, focus := w.thread, w.focus[agent]
	defer func() { w.thread, w.focus[agent] = thread, focus }()
	w.stepSeq++
	p, err := w.say(ctx, w.humanSeq[0], a.rooms[0], fmt.Sprintf("@%s %s %d", agent, barrierMarker, w.stepSeq), "", true)
	if err != nil {
		return err
	}
	if err := w.waitPrompted(ctx, agent, p.core); err != nil {
		return err
	}
	w.barriers = append(w.barriers, barrierSent{agent: agent, post: p})
	return nil
}

// barrierSent is a barrier mention the agent was prompted with.
type barrierSent struct {
	agent string
	post  *post
}

// settleBarriers waits until every barrier mention sent so far has the
// agent's answer in its thread. A barrier only waits for the prompt, so its
// own turn may still be running when the next step starts; a kill that
// lands in that turn records a turn the scenario never asked for (cut by
// the kill, its answer sent from the outbox after the restart), which then
// shows in the trace and in what a replay of it can reproduce.
func (w *world) settleBarriers(ctx context.Context) error {
	for len(w.barriers) > 0 {
		b := w.barriers[0]
		err := w.eventually(ctx, fmt.Sprintf("%s answers the barrier %q", b.agent, b.post.core), func() (bool, string, error) {
			// The barrier's thread, not the room's newest page: a scenario
			// may bury the answer under hundreds of other events.
			reader := w.humans[w.humanSeq[0]]
			uid := w.names().agent(b.agent)
			n, from := 0, ""
			for range 20 {
				resp, err := reader.cli.GetRelations(ctx, b.post.room.id, b.post.id, &mautrix.ReqGetRelations{From: from, Limit: 100})
				if err != nil {
					return false, "", err
				}
				for _, e := range resp.Chunk {
					if e.Sender == uid {
						return true, "", nil
					}
				}
				n += len(resp.Chunk)
				if from = resp.NextBatch; from == "" {
					break
				}
			}
			return false, fmt.Sprintf("%d events related to the barrier, none from %s", n, uid), nil
		})
		if err != nil {
			return err
		}
		if err := w.settleBarrierTurn(ctx, b); err != nil {
			return err
		}
		w.barriers = w.barriers[1:]
	}
	return nil
}

// settleBarrierTurn waits, when the daemon keeps a trace, until the trace
// ends the barrier's turn. Its answer can be readable on the homeserver
// before the daemon's send returns (Synapse answers the reader first), and a
// kill in that gap leaves a recorded trace with a post but no turn end: a
// turn cut by a kill the scenario never asked for, which replay cannot match.
func (w *world) settleBarrierTurn(ctx context.Context, b barrierSent) error {
	if w.traceDir == "" {
		return nil
	}
	turn := string(b.post.id)
	return w.eventually(ctx, fmt.Sprintf("the trace ends %s's barrier turn %s", b.agent, turn), func() (bool, string, error) {
		tr, err := trace.Read(w.traceDir)
		if err != nil {
			return false, err.Error(), nil
		}
		room, ok := tr.Room(b.post.room.id)
		if !ok {
			return false, "no trace of the barrier's room yet", nil
		}
		for _, rec := range room.Records {
			if rec.Kind == trace.KindTurnEnd && rec.TurnEnd != nil && rec.TurnEnd.Turn == turn {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d records, no turn end for %s", len(room.Records), turn), nil
	})
}

// times parses once, twice, "3 times".
func times(s string) int {
	switch s {
	case "once":
		return 1
	case "twice":
		return 2
	}
	var n int
	_, _ = fmt.Sscanf(s, "%d", &n)
	return n
}

func (w *world) countPrompts(ctx context.Context, agent, text string, want int) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	if want > 0 {
		if err := w.waitPrompted(ctx, agent, text); err != nil {
			return err
		}
	}
	if err := w.barrier(ctx, agent); err != nil {
		return err
	}
	got := 0
	for _, p := range w.ctl.Prompts(agent) {
		if strings.Contains(p.Text, text) {
			got++
		}
	}
	if got != want {
		return fmt.Errorf("%s was prompted %d times with %q, want %d; %s", agent, got, text, want, w.promptsSeen(agent))
	}
	return nil
}

func (w *world) stepPromptedTimes(ctx context.Context, agent, n, text string) error {
	return w.countPrompts(ctx, agent, text, times(n))
}

func (w *world) stepNotPrompted(ctx context.Context, agent, text string) error {
	return w.countPrompts(ctx, agent, text, 0)
}

func (w *world) stepSameSession(ctx context.Context, agent, text, earlier string) error {
	if err := w.stepPrompted(ctx, agent, text); err != nil {
		return err
	}
	p, _ := w.promptWith(agent, text)
	e, ok := w.promptWith(agent, earlier)
	if !ok {
		return fmt.Errorf("%s was never prompted with %q; %s", agent, earlier, w.promptsSeen(agent))
	}
	if p.SessionID != e.SessionID {
		return fmt.Errorf("%s got %q in session %s but %q in session %s; %s", agent, text, string(p.SessionID), earlier, string(e.SessionID), w.promptsSeen(agent))
	}
	return nil
}

func (w *world) stepNewSession(ctx context.Context, agent, text string) error {
	if err := w.stepPrompted(ctx, agent, text); err != nil {
		return err
	}
	ps := w.ctl.Prompts(agent)
	for i, p := range ps {
		if !strings.Contains(p.Text, text) {
			continue
		}
		for _, q := range ps[:i] {
			if q.SessionID == p.SessionID {
				return fmt.Errorf("%s got %q in session %s, which already had %q; %s", agent, text, string(p.SessionID), q.Text, w.promptsSeen(agent))
			}
		}
		return nil
	}
	return nil
}

func (w *world) stepSessions(ctx context.Context, agent string, n int) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	err := w.eventually(ctx, fmt.Sprintf("%s has %d sessions", agent, n), func() (bool, string, error) {
		got := len(w.sessionsOf(agent))
		return got >= n, fmt.Sprintf("%d sessions", got), nil
	})
	if err != nil {
		return err
	}
	// A session opened late (a duplicate wake) must still be caught.
	if err := w.barrier(ctx, agent); err != nil {
		return err
	}
	if got := len(w.sessionsOf(agent)); got != n {
		return fmt.Errorf("%s has had %d sessions, want %d; %s", agent, got, n, w.promptsSeen(agent))
	}
	return nil
}

// sessionsOf is the agent's session/new requests, less the sessions barriers
// opened (each barrier is a new thread, so its session holds only the barrier).
func (w *world) sessionsOf(agent string) []fakeagent.SessionInfo {
	probe := map[acp.SessionId]bool{}
	for _, p := range w.ctl.Prompts(agent) {
		if strings.Contains(p.Text, barrierMarker) {
			probe[p.SessionID] = true
		}
	}
	var out []fakeagent.SessionInfo
	for _, s := range w.ctl.Sessions(agent) {
		if !probe[s.SessionID] {
			out = append(out, s)
		}
	}
	return out
}

// lastSession waits for the agent's first session/new and returns the latest.
func (w *world) lastSession(ctx context.Context, agent string) (fakeagent.SessionInfo, error) {
	if err := w.start(ctx); err != nil {
		return fakeagent.SessionInfo{}, err
	}
	err := w.eventually(ctx, agent+" opens a session", func() (bool, string, error) {
		return len(w.ctl.Sessions(agent)) > 0, "no session/new yet", nil
	})
	if err != nil {
		return fakeagent.SessionInfo{}, err
	}
	ss := w.ctl.Sessions(agent)
	return ss[len(ss)-1], nil
}

func (w *world) stepSessionNewMCP(ctx context.Context, agent string) error {
	s, err := w.lastSession(ctx, agent)
	if err != nil {
		return err
	}
	raw, _ := json.Marshal(s.McpServers)
	if len(s.McpServers) != 1 || s.McpServers[0].Stdio == nil {
		return fmt.Errorf("%s's session/new mcpServers = %s, want one stdio entry", agent, raw)
	}
	st := s.McpServers[0].Stdio
	exe, err := childExe()
	if err != nil {
		return err
	}
	if st.Command != exe || len(st.Args) == 0 || st.Args[0] != "mcp" {
		return fmt.Errorf("%s's zooid MCP entry runs %q %q, want %q mcp …", agent, st.Command, st.Args, exe)
	}
	return nil
}

// secrets are every token of the scenario an agent must never see.
func (w *world) secrets() []string {
	s := []string{w.lease.reg.AppToken, w.lease.reg.ServerToken}
	for _, h := range w.humans {
		s = append(s, h.cli.AccessToken)
	}
	return s
}

func (w *world) stepNoSecrets(ctx context.Context, agent string) error {
	if _, err := w.lastSession(ctx, agent); err != nil {
		return err
	}
	for _, s := range w.ctl.Sessions(agent) {
		where := map[string]string{
			"environment": strings.Join(s.Env, "\n"),
			"arguments":   strings.Join(s.Argv, " "),
			"session/new": mustJSON(struct {
				Cwd string
				M   []acp.McpServer
			}{s.Cwd, s.McpServers}),
		}
		for place, text := range where {
			for _, secret := range w.secrets() {
				if secret != "" && strings.Contains(text, secret) {
					return fmt.Errorf("a token (%s…) appears in %s's %s", secret[:min(6, len(secret))], agent, place)
				}
			}
		}
	}
	return w.bindingsOffArgv(ctx, agent)
}

// bindingOf is the session binding id a zooid MCP entry hands its bridge.
func bindingOf(e *acp.McpServerStdio) string {
	for _, v := range e.Env {
		if v.Name == handshake.BindingEnv {
			return v.Value
		}
	}
	return ""
}

// bindingsOffArgv checks the real processes: no binding id of the agent's
// latest session is in the argv (/proc/<pid>/cmdline, readable by any process
// of the uid) of the agent process or any of its descendants, the running
// bridge included. It waits until that bridge is running, so the check saw it.
func (w *world) bindingsOffArgv(ctx context.Context, agent string) error {
	s, err := w.lastSession(ctx, agent)
	if err != nil {
		return err
	}
	var bindings []string
	for _, m := range s.McpServers {
		if m.Stdio != nil {
			if b := bindingOf(m.Stdio); b != "" {
				bindings = append(bindings, b)
			}
		}
	}
	if len(bindings) == 0 {
		return fmt.Errorf("%s's session/new hands its bridge no binding in $%s", agent, handshake.BindingEnv)
	}
	return w.eventually(ctx, agent+"'s bridge runs with no binding in any argv", func() (bool, string, error) {
		tree, err := processTree(s.Pid)
		if err != nil {
			return false, "", err
		}
		bridges := 0
		for pid, argv := range tree {
			for _, b := range bindings {
				if strings.Contains(argv, b) {
					return false, "", fmt.Errorf("%s's binding id appears in the arguments of process %d (%q)", agent, pid, argv)
				}
			}
			if strings.Contains(argv, " mcp --socket ") {
				bridges++
			}
		}
		return bridges > 0, fmt.Sprintf("%d processes under %s's pid %d, no bridge among them", len(tree), agent, s.Pid), nil
	})
}

// processTree is the argv of pid and of every live descendant of it, read
// from /proc.
func processTree(root int) (map[int]string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // ended meanwhile
		}
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(f[1]); err == nil {
			children[ppid] = append(children[ppid], pid)
		}
	}
	tree := map[int]string{}
	for todo := []int{root}; len(todo) > 0; todo = todo[1:] {
		pid := todo[0]
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue // ended meanwhile
		}
		tree[pid] = strings.ReplaceAll(strings.TrimRight(string(cmdline), "\x00"), "\x00", " ")
		todo = append(todo, children[pid]...)
	}
	if _, ok := tree[root]; !ok {
		return nil, fmt.Errorf("agent process %d is not running", root)
	}
	return tree, nil
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return string(b)
}

// lastToolList waits for the agent to have listed its tools at least once.
func (w *world) lastToolList(ctx context.Context, agent string) ([]string, error) {
	if err := w.start(ctx); err != nil {
		return nil, err
	}
	err := w.eventually(ctx, agent+" lists its tools", func() (bool, string, error) {
		return len(w.ctl.ToolLists(agent)) > 0, "no tools/list yet", nil
	})
	if err != nil {
		return nil, err
	}
	ls := w.ctl.ToolLists(agent)
	return ls[len(ls)-1], nil
}

func (w *world) stepSeesTools(ctx context.Context, agent, list string) error {
	got, err := w.lastToolList(ctx, agent)
	if err != nil {
		return err
	}
	want := bareList(list)
	g, wn := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(wn)
	if !slices.Equal(g, wn) {
		return fmt.Errorf("%s sees tools %v, want exactly %v", agent, g, wn)
	}
	return nil
}

func (w *world) stepNotSeesTool(ctx context.Context, agent, tool string) error {
	got, err := w.lastToolList(ctx, agent)
	if err != nil {
		return err
	}
	if slices.Contains(got, tool) {
		return fmt.Errorf("%s sees %s among %v", agent, tool, got)
	}
	return nil
}
