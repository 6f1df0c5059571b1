package steps

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"maunium.net/go/mautrix"

	"github.com/zooid-dev/zooid/fakeagent"
	"github.com/zooid-dev/zooid/internal/childproc"
	"github.com/zooid-dev/zooid/zooid/handshake"
	"github.com/zooid-dev/zooid/zooid/trace"
)

// What the fake agents were prompted with: barriers that settle an agent, its
// sessions, the secrets it must never see, and its MCP bindings and processes.

// bracePlaceholder is a placeholder written in braces inside free text.
var bracePlaceholder = regexp.MustCompile(`\{([#@$][^{}"\n]*)\}`)

// waitPrompted waits for a prompt containing text.
func (w *world) waitPrompted(ctx context.Context, agent, text string) error {
	return w.waitPromptedWithin(ctx, w.waitBound(), agent, text)
}

// waitPromptedWithin is waitPrompted with a bound of its own.
func (w *world) waitPromptedWithin(ctx context.Context, bound time.Duration, agent, text string) error {
	return w.eventuallyWithin(ctx, bound, fmt.Sprintf("%s prompted with %q", agent, text), func() (bool, string, error) {
		if w.runsReal(agent) {
			return w.modelPrompted(agent, text) > 0, w.promptsSeen(agent), nil
		}
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
			uid := w.agentUser(b.agent)
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
	_, err := w.awaitTraceRecord(ctx, b.post.room, fmt.Sprintf("the trace ends %s's barrier turn %s", b.agent, turn), func(rec trace.Record) (bool, error) {
		return rec.Kind == trace.KindTurnEnd && rec.TurnEnd != nil && rec.TurnEnd.Turn == turn, nil
	})
	return err
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
	if w.runsReal(agent) {
		got = w.modelPrompted(agent, text)
	} else {
		for _, p := range w.ctl.Prompts(agent) {
			if strings.Contains(p.Text, text) {
				got++
			}
		}
	}
	if got != want {
		return fmt.Errorf("%s was prompted %d times with %q, want %d; %s", agent, got, text, want, w.promptsSeen(agent))
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

// secrets are every token of the scenario an agent must never see.
func (w *world) secrets() []string {
	s := []string{w.lease.reg.AppToken, w.lease.reg.ServerToken}
	for _, h := range w.humans {
		s = append(s, h.cli.AccessToken)
		if h.dev != nil {
			// The room keys the human's device sent with, which the
			// agents' devices hold too.
			s = append(s, h.dev.RoomKeys()...)
		}
	}
	// The key the agents' devices' accounts and sessions are encrypted
	// with at rest, in every spelling a log or dump might use.
	if key, err := os.ReadFile(filepath.Join(w.stateDir(), "e2ee", "pickle.key")); err == nil && len(key) > 0 {
		s = append(s, string(key), hex.EncodeToString(key), base64.StdEncoding.EncodeToString(key), base64.RawStdEncoding.EncodeToString(key))
	}
	return s
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
	all, err := childproc.Processes()
	if err != nil {
		return nil, err
	}
	children := map[int][]int{}
	for _, p := range all {
		children[p.PPID] = append(children[p.PPID], p.PID)
	}
	tree := map[int]string{}
	for todo := []int{root}; len(todo) > 0; todo = todo[1:] {
		pid := todo[0]
		cmdline := childproc.Cmdline(pid)
		if cmdline == "" {
			continue // ended meanwhile
		}
		tree[pid] = cmdline
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
