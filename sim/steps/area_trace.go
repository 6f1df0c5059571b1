package steps

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/sim/replay"
	"github.com/zooid-dev/zooid/zooid/recording"
	"github.com/zooid-dev/zooid/zooid/trace"
)

// The catalogue's "The daemon's trace" steps (area trace) and the step methods
// they run.

// traceSteps turn on the daemon's flight recorder and read back what it wrote.
func traceSteps(w *world) []stepDef {
	return []stepDef{
		{area: "trace", pattern: `^the trace of "(#[a-z0-9-]+)" shows "([^"]*)" waking (nobody|[a-z0-9-]+(?:(?:, | and )[a-z0-9-]+)*) \(([a-z_]+)\)$`,
			example: `the trace of "#ops" shows "can someone audit svc-a" waking agent-a (mention)`,
			doc:     "The routing decision on the message containing the text: exactly these agents woke, for that reason, each in the session of the message's thread (or nobody, and why); for an encrypted message a human sent, the one its step said stood for the text.",
			fn:      w.stepTraceWoke},
		{area: "trace", pattern: `^the trace of "(#[a-z0-9-]+)" records the decision on "([^"]*)" as (neither reset, recall nor task root|a recall of its thread|the task root of [a-z0-9-]+)$`,
			example: `the trace of "#ops" records the decision on "can you restart it?" as a recall of its thread`,
			doc:     "The rest of the routing decision on the message containing the text, exactly: neither reset, recall nor task root, its thread read back from the homeserver first, or the root of a journaled task of that assignee.",
			fn:      w.stepTraceDecision},
		{area: "trace", pattern: `^the trace of "(#[a-z0-9-]+)" records a reset of the thread of "([^"]*)"$`,
			example: `the trace of "#ops" records a reset of the thread of "how is svc-b?"`,
			doc:     "A /clear in the thread of the top-level message containing the text, decided as a reset that woke nobody.",
			fn:      w.stepTraceReset},
		{area: "trace", pattern: `^the trace of "(#[a-z0-9-]+)" records ([a-z0-9-]+) calling ([a-z_]+) and its result$`,
			example: `the trace of "#ops" records agent-a calling zooid_get_recent_threads and its result`,
			doc:     "A tool call of the agent, in one of its sessions, with its arguments and a non-empty result.",
			fn:      w.stepTraceTool},
		{area: "trace", pattern: `^the trace of "(#[a-z0-9-]+)" records ([a-z0-9-]+)'s task (admitted|refused|started|closed|reported)(?: ([a-z_]+))?$`,
			example: `the trace of "#ops" records coder's task closed complete`,
			doc:     "A task step of the agent's task (with the status, for closed), in the trace of the room.",
			fn:      w.stepTraceTask},
		{area: "trace", pattern: `^the trace of "(#[a-z0-9-]+)" records ([a-z0-9-]+)'s handoff to ([a-z0-9-]+) (started|refused|returned|woken)$`,
			example: `the trace of "#ops" records planner's handoff to coder returned`,
			doc:     "A zooid_handoff step (a task record whose step is handoff_<step>) from the caller to the callee, naming its thread (and, but for refused, its id), in the trace of the room.",
			fn:      w.stepTraceHandoff},
		{area: "trace", pattern: `^the trace of "(#[a-z0-9-]+)" records ([a-z0-9-]+) posting "([^"]*)"( once)?$`,
			example: `the trace of "#ops" records agent-a posting "on it" once`,
			doc:     "A post by the agent whose text contains the given text, with the event id it got. With once: exactly one such post record in the room's whole trace, counted when the first is found; put it after a step showing the daemon went past the point where a second would be written.",
			fn:      w.stepTracePost},
		{area: "trace", pattern: `^the trace of "(#[a-z0-9-]+)" records ([a-z0-9-]+) (crashed|timed_out|start_failed)$`,
			example: `the trace of "#ops" records agent-a crashed`,
			doc:     "An agent failure record of the agent, in one of its sessions.",
			fn:      w.stepTraceAgent},
		{area: "trace", pattern: `^the trace of "(#[a-z0-9-]+)" records ([a-z0-9-]+)'s turn ended$`,
			example: `the trace of "#ops" records planner's turn ended`,
			doc:     "A turn end record of the agent with the stop reason end_turn. The daemon writes it after its turn journal let the turn go, so a kill after this step does not answer that turn again at the next start (nor tell the new process of its thread).",
			fn:      w.stepTraceTurnEnded},
		{area: "trace", pattern: `^the trace of "(#[a-z0-9-]+)" records the daemon (starting|restarting)$`,
			example: `the trace of "#ops" records the daemon restarting`,
			doc:     "A start record naming the room's alias; restarting: one marked as a restart (the room's trace already held a run).",
			fn:      w.stepTraceStart},
		{area: "trace", pattern: `^the trace of "(#[a-z0-9-]+)" records ([a-z0-9-]+) prompted for the recorded event "([^"]+)"$`,
			example: `the trace of "#ops" records coder prompted for the recorded event "deploy"`,
			doc:     "Waits for a prompt record of the agent whose trigger is the played recording event with that label (or index): the daemon has started that turn, and a scripted agent has received its prompt. `zooid replay --feature` writes it before a recorded restart, so the kill lands where the recorded one did.",
			fn:      w.stepTracePromptedFor},
		{area: "trace", pattern: `^the recording holds "([^"]*)" (decrypted|in the clear)$`,
			example: `the recording holds "on it" decrypted`,
			doc:     "Exactly one event of the last recording has that body, and it is marked decrypted (it was end-to-end encrypted in the room) or not (it was sent in the clear).",
			fn:      w.stepRecordingHolds},
		{area: "trace", pattern: `^no secret appears in the recording$`,
			example: `no secret appears in the recording`,
			doc:     "None of the secrets (tokens, the humans' room keys, the agents' devices' pickle key) appears in the last recording as written to a file.",
			fn:      w.stepNoSecretInRecording},
		{area: "trace", pattern: `^no secret appears in the daemon's log$`,
			example: `no secret appears in the daemon's log`,
			doc:     "None of the secrets (tokens, the humans' room keys, the agents' devices' pickle key) appears in any line the in-process daemon logged, debug included, since the daemon began reading encrypted rooms (the log is kept whole from then on).",
			fn:      w.stepNoSecretInLog},
		{area: "trace", pattern: `^the daemon logs "([^"]*)"$`,
			example: `the daemon logs "a room key came after its message was given up on"`,
			doc:     "Waits until a line the in-process daemon logged since it began reading encrypted rooms holds exactly that text (the log is kept whole from then on).",
			fn:      w.stepDaemonLogs},
		{area: "trace", pattern: `^the daemon has logged nothing with "([^"]*)"$`,
			example: `the daemon has logged nothing with "duplicate olm message"`,
			doc:     "After a barrier for each agent, no line the in-process daemon logged since it began reading encrypted rooms holds the text.",
			fn:      w.stepDaemonNotLogged},
		{area: "trace", pattern: `^no secret appears in the trace$`,
			example: `no secret appears in the trace`,
			doc:     "No trace file holds the appservice tokens, a user's access token, or a session binding id of any agent.",
			fn:      w.stepTraceNoSecrets},

		// Recording a room with the daemon's trace and replaying it with `zooid
		// replay` on a fresh fake homeserver.
		{area: "trace", pattern: `^the recorded decision on "([^"]*)" is edited to wake (nobody|[a-z0-9-]+)$`,
			example: `the recorded decision on "and svc-b too" is edited to wake nobody`,
			doc:     "Edits the trace inside the last recording: the routing decision on the event containing the text now says it woke that agent (for a mention), or nobody (nobody_addressed).",
			fn:      w.stepEditDecision},
		{area: "trace", pattern: `^zooid replay of the recording exits (\d)$`,
			example: `zooid replay of the recording exits 0`,
			doc:     "Writes the last recording to a file and runs `zooid replay FILE` on it (a fresh fake homeserver and daemon, the agents scripted from the trace); its exit code is this (0 reproduced, 1 diverged, 2 bad input).",
			fn:      w.stepReplayExits},
		{area: "trace", pattern: `^the replay names one difference: the decision on "([^"]*)", want woke (nobody|[a-z0-9-]+), got woke (nobody|[a-z0-9-]+)$`,
			example: `the replay names one difference: the decision on "and svc-b too", want woke nobody, got woke planner`,
			doc:     "The last replay printed exactly one difference, in the routing of the event containing the text, with the recorded and today's woken agent.",
			fn:      w.stepReplayNames},
	}
}

func (w *world) stepTraceWoke(ctx context.Context, roomName, text, agents, why string) error {
	var want []string
	if agents != "nobody" {
		want = splitNames(agents)
	}
	rm, err := w.room(ctx, roomName)
	if err != nil {
		return err
	}
	enc, isEnc := w.encryptedPost(rm, text)
	_, err = w.traceRecord(ctx, roomName, fmt.Sprintf("the trace's decision on %q", text), func(r trace.Record) (bool, error) {
		e := r.Event
		// An encrypted event has no text to match: it is the one the harness
		// sent for it.
		if e == nil || !(strings.Contains(e.Text, text) || isEnc && e.ID == enc.id) {
			return false, nil
		}
		var got []string
		thread := e.Thread
		if thread == "" {
			thread = e.ID
		}
		for _, wk := range e.Woke {
			got = append(got, wk.Agent)
			if wk.Why != why {
				return false, fmt.Errorf("%s woke for %q, want %q", wk.Agent, wk.Why, why)
			}
			if wk.Thread != thread || !strings.HasSuffix(wk.Session, "|"+string(thread)) {
				return false, fmt.Errorf("%s woke in thread %s (session %s), want the message's thread %s", wk.Agent, wk.Thread, wk.Session, thread)
			}
		}
		if !slices.Equal(got, want) {
			return false, fmt.Errorf("event %s woke %v (nobody: %q), want %v", e.ID, got, e.Nobody, want)
		}
		if len(want) == 0 && e.Nobody != why {
			return false, fmt.Errorf("event %s woke nobody because %q, want %q", e.ID, e.Nobody, why)
		}
		return true, nil
	})
	return err
}

func (w *world) stepTraceDecision(ctx context.Context, roomName, text, as string) error {
	var want trace.Decision
	switch {
	case as == "a recall of its thread":
		want.Recall = true
	case strings.HasPrefix(as, "the task root of "):
		want.TaskRoot = strings.TrimPrefix(as, "the task root of ")
	}
	_, err := w.traceRecord(ctx, roomName, fmt.Sprintf("the trace's decision on %q", text), func(r trace.Record) (bool, error) {
		e := r.Event
		if e == nil || !strings.Contains(e.Text, text) {
			return false, nil
		}
		if e.Decision == nil || *e.Decision != want {
			return false, fmt.Errorf("event %s is decided as %s, want %s", e.ID, decisionText(e.Decision), decisionText(&want))
		}
		return true, nil
	})
	return err
}

func (w *world) stepTraceReset(ctx context.Context, roomName, text string) error {
	var root id.EventID
	_, err := w.traceRecord(ctx, roomName, fmt.Sprintf("a reset of the thread of %q in the trace", text), func(r trace.Record) (bool, error) {
		e := r.Event
		switch {
		case e == nil:
			return false, nil
		case root == "" && e.Thread == "" && strings.Contains(e.Text, text):
			root = e.ID
			return false, nil
		case root == "" || e.Thread != root || e.Decision == nil || !e.Decision.Reset:
			return false, nil
		}
		if len(e.Woke) > 0 || e.Nobody != trace.WhyReset || *e.Decision != (trace.Decision{Reset: true}) {
			return false, fmt.Errorf("the reset %s woke %v (nobody: %q), decided as %s", e.ID, e.Woke, e.Nobody, decisionText(e.Decision))
		}
		return true, nil
	})
	return err
}

// decisionText says what a trace's decision holds besides its wakes.
func decisionText(d *trace.Decision) string {
	switch s := d.String(); {
	case d == nil:
		return "nothing (no decision recorded)"
	case s == "":
		return "neither reset, recall nor task root"
	default:
		return s
	}
}

func (w *world) stepTraceTool(ctx context.Context, roomName, agent, tool string) error {
	_, err := w.traceRecord(ctx, roomName, fmt.Sprintf("%s's call of %s in the trace", agent, tool), func(r trace.Record) (bool, error) {
		t := r.Tool
		if t == nil || t.Agent != agent || t.Tool != tool {
			return false, nil
		}
		if !strings.HasPrefix(r.Session, agent+"|") || t.Args == "" || t.Result == "" || t.Error != "" {
			return false, fmt.Errorf("the call is recorded as session %q, args %q, result %q, error %q", r.Session, t.Args, t.Result, t.Error)
		}
		return true, nil
	})
	return err
}

func (w *world) stepTraceTask(ctx context.Context, roomName, agent, step, status string) error {
	_, err := w.traceRecord(ctx, roomName, fmt.Sprintf("%s's task %s in the trace", agent, step), func(r trace.Record) (bool, error) {
		t := r.Task
		if t == nil || t.Agent != agent || t.Step != step {
			return false, nil
		}
		if status != "" && t.Status != status {
			return false, fmt.Errorf("%s's task %s with status %q (reason %q), want %q", agent, step, t.Status, t.Reason, status)
		}
		if step != trace.StepRefused && step != trace.StepAdmitted && t.Thread == "" {
			return false, fmt.Errorf("%s's task %s names no thread", agent, step)
		}
		return true, nil
	})
	return err
}

func (w *world) stepTraceHandoff(ctx context.Context, roomName, caller, callee, step string) error {
	want := "handoff_" + step
	_, err := w.traceRecord(ctx, roomName, fmt.Sprintf("%s's handoff to %s %s in the trace", caller, callee, step), func(r trace.Record) (bool, error) {
		t := r.Task
		if t == nil || t.Step != want || t.Caller != caller || t.Agent != callee {
			return false, nil
		}
		if t.Thread == "" || (step != "refused" && t.Attempt == "") {
			return false, fmt.Errorf("%s's handoff to %s %s names thread %q, id %q", caller, callee, step, t.Thread, t.Attempt)
		}
		return true, nil
	})
	return err
}

func (w *world) stepTracePost(ctx context.Context, roomName, agent, text, once string) error {
	user, err := w.userID(agent)
	if err != nil {
		return err
	}
	isPost := func(r trace.Record) bool {
		return r.Post != nil && r.Post.Sender == user && strings.Contains(r.Post.Text, text)
	}
	_, err = w.traceRecord(ctx, roomName, fmt.Sprintf("%s's post %q in the trace", agent, text), func(r trace.Record) (bool, error) {
		if !isPost(r) {
			return false, nil
		}
		p := r.Post
		if p.ID == "" || p.TxnID == "" || p.Error != "" {
			return false, fmt.Errorf("the post is recorded with id %q, txn %q, error %q", p.ID, p.TxnID, p.Error)
		}
		return true, nil
	})
	if err != nil || once == "" {
		return err
	}
	r, err := w.room(ctx, roomName)
	if err != nil {
		return err
	}
	tr, err := trace.Read(w.traceDir)
	if err != nil {
		return fmt.Errorf("reading the trace: %w", err)
	}
	room, _ := tr.Room(r.id)
	var seqs []string
	for _, rec := range room.Records {
		if isPost(rec) {
			seqs = append(seqs, fmt.Sprintf("record %d (event %s, txn %s)", rec.Seq, rec.Post.ID, rec.Post.TxnID))
		}
	}
	if len(seqs) != 1 {
		return fmt.Errorf("the trace records %s posting %q %d times, want once: %s", agent, text, len(seqs), strings.Join(seqs, "; "))
	}
	return nil
}

func (w *world) stepTraceAgent(ctx context.Context, roomName, agent, what string) error {
	_, err := w.traceRecord(ctx, roomName, fmt.Sprintf("%s %s in the trace", agent, what), func(r trace.Record) (bool, error) {
		a := r.Agent
		if a == nil || a.Agent != agent || a.What != what {
			return false, nil
		}
		if !strings.HasPrefix(r.Session, agent+"|") {
			return false, fmt.Errorf("%s %s recorded in session %q", agent, what, r.Session)
		}
		return true, nil
	})
	return err
}

func (w *world) stepTraceTurnEnded(ctx context.Context, roomName, agent string) error {
	_, err := w.traceRecord(ctx, roomName, fmt.Sprintf("%s's turn ended in the trace", agent), func(r trace.Record) (bool, error) {
		te := r.TurnEnd
		if te == nil || te.Agent != agent {
			return false, nil
		}
		if te.Stop != "end_turn" {
			return false, fmt.Errorf("%s's turn %s ended with stop %q (error %q), want end_turn", agent, te.Turn, te.Stop, te.Error)
		}
		return true, nil
	})
	return err
}

func (w *world) stepTraceStart(ctx context.Context, roomName, which string) error {
	alias := string(w.names().alias(roomName))
	_, err := w.traceRecord(ctx, roomName, fmt.Sprintf("the daemon %s in the trace", which), func(r trace.Record) (bool, error) {
		st := r.Start
		if st == nil || st.Restart != (which == "restarting") {
			return false, nil
		}
		if st.Alias != alias {
			return false, fmt.Errorf("the start record names the room %q, want %q", st.Alias, alias)
		}
		return true, nil
	})
	return err
}

func (w *world) stepTraceNoSecrets(ctx context.Context) error {
	if w.traceDir == "" {
		return errors.New("the daemon keeps no trace; add: the daemon keeps a trace")
	}
	secrets := map[string]string{}
	bindings := 0
	for _, s := range w.secrets() {
		secrets[s] = "a token"
	}
	for _, an := range w.agentSeq {
		for _, s := range w.ctl.Sessions(an) {
			for _, m := range s.McpServers {
				if m.Stdio == nil {
					continue
				}
				if b := bindingOf(m.Stdio); b != "" {
					secrets[b] = an + "'s binding id"
					bindings++
				}
			}
		}
	}
	files := 0
	err := filepath.WalkDir(w.traceDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		files++
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for s, what := range secrets {
			if len(s) >= 8 && strings.Contains(string(b), s) {
				return fmt.Errorf("%s (%s…) appears in %s", what, s[:6], path)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if files == 0 {
		return fmt.Errorf("the trace directory %s holds no file", w.traceDir)
	}
	if bindings == 0 {
		return errors.New("no session binding id was seen to look for")
	}
	return nil
}

func (w *world) stepEditDecision(text, agent string) error {
	rec := w.recording
	if rec == nil {
		return errors.New("nothing has been recorded; use: \"#room\" is recorded with its trace as agent-a")
	}
	edited := 0
	for i, line := range rec.Trace {
		var r trace.Record
		if err := json.Unmarshal(line, &r); err != nil || r.Event == nil || !strings.Contains(r.Event.Text, text) {
			continue
		}
		if agent == "nobody" {
			r.Event.Woke, r.Event.Nobody = nil, trace.WhyNotNotified
		} else {
			thread := r.Event.Thread
			if thread == "" {
				thread = r.Event.ID
			}
			r.Event.Nobody = ""
			r.Event.Woke = []trace.Wake{{Agent: agent, Thread: thread, Session: agent + "|" + string(r.Room) + "|" + string(thread), Why: trace.WhyMention}}
		}
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		rec.Trace[i] = b
		edited++
	}
	if edited != 1 {
		return fmt.Errorf("%d events of the recorded trace contain %q, want exactly 1", edited, text)
	}
	return nil
}

func (w *world) stepReplayExits(ctx context.Context, code int) error {
	if w.recording == nil {
		return errors.New("nothing has been recorded; use: \"#room\" is recorded with its trace as agent-a")
	}
	path := filepath.Join(w.dir, fmt.Sprintf("recording-%d.json", w.stepSeq))
	var buf bytes.Buffer
	if err := w.recording.Write(&buf); err != nil {
		return err
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o600); err != nil {
		return fmt.Errorf("writing the recording: %w", err)
	}
	var out, errOut bytes.Buffer
	got := replay.Main([]string{path, "--wait", w.run.wait.String()}, &out, &errOut)
	w.replayOut = out.String()
	if d := os.Getenv(SaveRecordingsEnv); d != "" {
		// Keep what was replayed: this is how a feature run on fakehs or
		// Synapse produces a recording with its trace for scenarios/.
		if err := os.WriteFile(filepath.Join(d, fmt.Sprintf("replayed-%d.json", time.Now().UnixNano())), buf.Bytes(), 0o600); err != nil {
			return fmt.Errorf("saving the replayed recording in $%s: %w", SaveRecordingsEnv, err)
		}
	}
	if got != code {
		return fmt.Errorf("zooid replay exited %d, want %d\nstdout:\n%s\nstderr:\n%s", got, code, out.String(), errOut.String())
	}
	return nil
}

func (w *world) stepReplayNames(text, want, got string) error {
	var diffs []string
	for _, l := range strings.Split(strings.TrimSpace(w.replayOut), "\n") {
		if l != "" && !strings.HasPrefix(l, "diverged:") && !strings.HasPrefix(l, "note:") {
			diffs = append(diffs, l)
		}
	}
	if len(diffs) != 1 {
		return fmt.Errorf("the replay printed %d differences, want 1:\n%s", len(diffs), w.replayOut)
	}
	d := diffs[0]
	wantPart := "want woke " + want
	gotPart := "got woke " + got
	if !strings.Contains(d, ", routing: ") || !strings.Contains(d, fmt.Sprintf("%q", text)) && !strings.Contains(d, text) ||
		!strings.Contains(d, wantPart) || !strings.Contains(d, gotPart) {
		return fmt.Errorf("the difference %q does not name the routing decision on %q with %q and %q", d, text, wantPart, gotPart)
	}
	return nil
}

// stepTracePromptedFor waits until the daemon has started agent's turn on a
// played recording event. A kill step right after a play does not otherwise
// wait for the daemon to take up the event, so it could land before the turn
// the recorded daemon was killed in.
func (w *world) stepTracePromptedFor(ctx context.Context, roomName, agent, ref string) error {
	r, ok := w.rooms[roomName]
	if !ok || r.replay == nil {
		return fmt.Errorf("%s is not played from a recording", roomName)
	}
	i, err := recordedIndex(r.replay.rec, ref)
	if err != nil {
		return err
	}
	if i >= len(r.seeded) || r.seeded[i].id == "" {
		return fmt.Errorf("%s: recorded event %q is not played yet", roomName, ref)
	}
	eid := r.seeded[i].id
	var text string
	_, err = w.traceRecord(ctx, roomName, fmt.Sprintf("%s prompted for recorded event %q (%s) in the trace", agent, ref, eid), func(rec trace.Record) (bool, error) {
		p := rec.Prompt
		if p != nil && p.Agent == agent && p.Trigger == eid {
			text = p.Text
			return true, nil
		}
		return false, nil
	})
	if err != nil || w.runsReal(agent) || w.ctl == nil {
		return err
	}
	// The daemon traces a prompt as it sends it; a kill right after could
	// still beat its arrival at an agent that is starting. The recorded
	// agent had it, so wait until the scripted one has it too (the trace
	// keeps a long prompt's beginning).
	return w.eventually(ctx, fmt.Sprintf("%s receiving the prompt of recorded event %q", agent, ref), func() (bool, string, error) {
		ps := w.ctl.Prompts(agent)
		for _, p := range ps {
			if strings.HasPrefix(p.Text, text) {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d prompts, none starting %.60q", len(ps), text), nil
	})
}

// keptDaemonLog is every line the in-process daemon logged since the
// scenario began reading encrypted rooms, for the steps that read its log.
func (w *world) keptDaemonLog(ctx context.Context) (string, error) {
	if err := w.start(ctx); err != nil {
		return "", err
	}
	if w.tw().proc != nil {
		return "", fmt.Errorf("the daemon runs as its own process: its log is its log file's, which this step does not read")
	}
	log, ok := w.logs.wholeLog()
	if !ok {
		return "", fmt.Errorf("the daemon's log was not kept whole: this step follows \"the daemon reads encrypted rooms\"")
	}
	return log, nil
}

func (w *world) stepNoSecretInLog(ctx context.Context) error {
	log, err := w.keptDaemonLog(ctx)
	if err != nil {
		return err
	}
	if !strings.Contains(log, "agent device ready") {
		return fmt.Errorf("the kept log has no \"agent device ready\" line: it is not the log of a daemon with devices (%d bytes)", len(log))
	}
	for _, secret := range w.secrets() {
		if secret != "" && strings.Contains(log, secret) {
			return fmt.Errorf("a secret (%d bytes) appears in the daemon's log", len(secret))
		}
	}
	return nil
}

func (w *world) stepDaemonLogs(ctx context.Context, text string) error {
	return w.eventually(ctx, fmt.Sprintf("the daemon logging %q", text), func() (bool, string, error) {
		log, err := w.keptDaemonLog(ctx)
		if err != nil {
			return false, "", err
		}
		if strings.Contains(log, text) {
			return true, "", nil
		}
		return false, fmt.Sprintf("%d bytes logged, none with it", len(log)), nil
	})
}

func (w *world) stepDaemonNotLogged(ctx context.Context, text string) error {
	// Pushes and routing are in order per room: a barrier in each agent's
	// first room shows the daemon has handled what was sent before it.
	for _, a := range w.agentSeq {
		if err := w.barrier(ctx, a); err != nil {
			return err
		}
	}
	log, err := w.keptDaemonLog(ctx)
	if err != nil {
		return err
	}
	for line := range strings.Lines(log) {
		if strings.Contains(line, text) {
			return fmt.Errorf("the daemon logged %q:\n%s", text, strings.TrimSpace(line))
		}
	}
	return nil
}

func (w *world) stepRecordingHolds(text, how string) error {
	if w.recording == nil {
		return fmt.Errorf("no room was recorded yet")
	}
	var found []recording.Event
	var bodies []string
	for _, e := range w.recording.Events {
		body, _ := e.Content["body"].(string)
		bodies = append(bodies, fmt.Sprintf("%q (decrypted %t)", body, e.Decrypted))
		if body == text {
			found = append(found, e)
		}
	}
	if len(found) != 1 {
		return fmt.Errorf("the recording has %d events with body %q, want 1; it holds %s", len(found), text, strings.Join(bodies, ", "))
	}
	if want := how == "decrypted"; found[0].Decrypted != want {
		return fmt.Errorf("%q is marked decrypted %t, want %t", text, found[0].Decrypted, want)
	}
	return nil
}

func (w *world) stepNoSecretInRecording() error {
	if w.recording == nil {
		return fmt.Errorf("no room was recorded yet")
	}
	var buf bytes.Buffer
	if err := w.recording.Write(&buf); err != nil {
		return err
	}
	for _, secret := range w.secrets() {
		if secret != "" && strings.Contains(buf.String(), secret) {
			return fmt.Errorf("a secret (%d bytes) appears in the recording", len(secret))
		}
	}
	return nil
}
