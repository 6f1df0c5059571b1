package steps

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/zooid-dev/zooid/scenarios"
	"github.com/zooid-dev/zooid/sim/replay"
	"github.com/zooid-dev/zooid/zooid/trace"
)

// replaySteps record a room with the daemon's trace and replay it with
// `zooid replay` on a fresh fake homeserver.
func replaySteps(w *world) []stepDef {
	return []stepDef{
		{area: "setup", pattern: `^"(#[a-z0-9-]+)" is recorded with its trace as ([a-z0-9-]+)$`,
			example: `"#ops" is recorded with its trace as planner`,
			doc:     "Runs the recorder of `zooid record --trace` on the room as that agent's appservice user, once the trace has caught up (every event routed, every turn ended, every post seen back); later steps replay the recording.",
			fn:      w.stepRecordWithTrace},
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

// SaveRecordingsEnv names a directory where every recording a feature
// replays with `zooid replay` is also written.
const SaveRecordingsEnv = "ZOOID_TEST_SAVE_RECORDINGS"

func (w *world) stepRecordWithTrace(ctx context.Context, roomName, agent string) error {
	return w.record(ctx, roomName, agent, true)
}

// traceSettled says whether a recording's trace has caught up with the
// room: every recorded event routed, every prompt's turn ended and every
// post seen coming back as an event, every closed task reported.
func traceSettled(rec *scenarios.Recording) (bool, string) {
	tr, err := replay.RecordedTrace(rec)
	if err != nil {
		return false, err.Error()
	}
	// A daemon killed mid-turn never ends that turn: a start record
	// forgets the turns in flight.
	events, inFlight, open := 0, 0, 0
	seen := map[string]bool{}
	var posts []string
	for _, r := range tr.Rooms[0].Records {
		switch {
		case r.Event != nil:
			events++
			seen[string(r.Event.ID)] = true
		case r.Start != nil:
			inFlight = 0
		case r.Prompt != nil:
			inFlight++
		case r.TurnEnd != nil && inFlight > 0:
			inFlight--
		case r.Task != nil && r.Task.Step == trace.StepClosed:
			open++
		case r.Task != nil && r.Task.Step == trace.StepReported:
			open--
		case r.Post != nil && r.Post.ID != "":
			posts = append(posts, string(r.Post.ID))
		}
	}
	if events < len(rec.Events) {
		return false, fmt.Sprintf("the trace has routed %d of the %d recorded events", events, len(rec.Events))
	}
	if open > 0 {
		return false, fmt.Sprintf("%d closed tasks not yet reported", open)
	}
	if inFlight > 0 {
		return false, fmt.Sprintf("%d turns still running", inFlight)
	}
	for _, p := range posts {
		if !seen[p] {
			return false, "post " + p + " not yet seen back"
		}
	}
	return true, ""
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
