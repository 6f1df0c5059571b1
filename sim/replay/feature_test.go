package replay_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/fakeagent"
	"github.com/zooid-dev/zooid/sim/replay"
	"github.com/zooid-dev/zooid/sim/steps"
	"github.com/zooid-dev/zooid/zooid/recording"
	"github.com/zooid-dev/zooid/zooid/trace"
)

// TestGeneratedFeaturesPass: a feature `zooid replay --feature` writes from a
// recording passes, several times over, on the code that made the
// recording — every recording in scenarios/ that carries a trace, among them
// ones killed while an agent was mid-turn (ops-midturn-traced.json, and
// ops-walkthrough-traced.json, the room scenarios/README.md's walk-through
// makes by hand, with a delegation), where the kill must wait for the turn
// to start as the recorded one did, and each event must wait for the turns
// the recorded daemon had started or ended before it.
func TestGeneratedFeaturesPass(t *testing.T) {
	if testing.Short() {
		t.Skip("plays every traced recording through the steps runner")
	}
	recs, err := filepath.Glob("../../scenarios/*.json")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var paths []string
	for _, path := range recs {
		rec, err := recording.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(rec.Trace) == 0 {
			continue // played without a trace, its feature is written by hand
		}
		f, err := replay.Feature(rec, replay.FeatureRef(path))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if strings.Contains(f, `played up to "`) && !strings.Contains(f, "has no label") {
			for _, line := range strings.Split(f, "\n") {
				if i := strings.Index(line, `played up to "`); i >= 0 && line[i+len(`played up to "`)] >= '0' && line[i+len(`played up to "`)] <= '9' {
					t.Errorf("%s: plays up to an index without saying the event has no label: %s", path, line)
				}
			}
		}
		out := filepath.Join(dir, strings.TrimSuffix(filepath.Base(path), ".json")+".feature")
		if err := os.WriteFile(out, []byte(f), 0o600); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, out)
	}
	if len(paths) < 7 {
		t.Fatalf("%d traced recordings in scenarios/, want the 7 shipped: %v", len(paths), paths)
	}
	var log bytes.Buffer
	if status := steps.Run(steps.Options{Paths: paths, Repeat: 3, Output: &log, TestingT: t}); status != 0 {
		t.Fatalf("generated features failed (status %d):\n%s", status, log.String())
	}
}

// A shrunk recording often ends with the event its restart follows: its
// feature must not end with a step playing the rest, for there is none, and
// the step fails ("the recording is already played past event 0").
func TestGeneratedFeatureEndsWithTheRecording(t *testing.T) {
	rec, err := recording.Load("../../scenarios/ops-midturn-traced.json")
	if err != nil {
		t.Fatal(err)
	}
	rec.Events = rec.Events[:1]
	f, err := replay.Feature(rec, "ends-at-restart.json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f, "the daemon is killed and started again") || strings.Contains(f, "is played\n") {
		t.Fatalf("want the kill as the last play step, and no play after it:\n%s", f)
	}
}

// TurnsBefore is what a played recording waits for before each event: on
// the walk-through's room, the bare reply "and its p99?" waits for coder's
// ended turn on the question; the mention of planner for coder's two ended
// turns; the mid-turn deploy comes after the delegation's three turns (planner's,
// coder's task, planner's on the result, which has no triggering event),
// all ended.
func TestTurnsBeforeFollowTheTrace(t *testing.T) {
	rec, err := recording.Load("../../scenarios/ops-walkthrough-traced.json")
	if err != nil {
		t.Fatal(err)
	}
	sc, err := replay.NewScript(rec, func(name string) id.UserID { return id.NewUserID(name, "localhost") })
	if err != nil {
		t.Fatal(err)
	}
	byText := func(text string) int {
		for i := range rec.Events {
			if rec.Text(i) == text {
				return i
			}
		}
		t.Fatalf("no event %q in the walk-through's recording", text)
		return -1
	}
	ask, p99, audit, deploy := byText("@coder is svc-a healthy?"), byText("and its p99?"), byText("@planner get svc-b audited"), byText("@coder deploy svc-a")
	task := byText("@coder audit svc-b")
	ended := func(agent string, trigger int) replay.RecordedTurn {
		return replay.RecordedTurn{Agent: agent, Trigger: trigger, Ended: true}
	}
	for _, c := range []struct {
		event int
		want  []replay.RecordedTurn
	}{
		{ask, nil},
		{p99, []replay.RecordedTurn{ended("coder", ask)}},
		{audit, []replay.RecordedTurn{ended("coder", ask), ended("coder", p99)}},
		{deploy, []replay.RecordedTurn{ended("coder", ask), ended("coder", p99), ended("planner", audit), ended("coder", task), ended("planner", -1)}},
	} {
		if got := sc.TurnsBefore(c.event); !slices.Equal(got, c.want) {
			t.Errorf("turns before event %d (%q): got %+v, want %+v", c.event, rec.Text(c.event), got, c.want)
		}
	}
}

// A recorded tool call naming one of the recording's rooms by alias names
// this run's alias of it when the played room maps aliases (a shared
// Synapse suffixes them per run); an alias of a room the recording does not
// have, and every alias without the mapping (zooid replay), stay as recorded.
func TestRecordedToolCallsNameThisRunsRooms(t *testing.T) {
	rec, err := recording.Load("../../scenarios/ops-walkthrough-traced.json")
	if err != nil {
		t.Fatal(err)
	}
	var prompt string
	for i, line := range rec.Trace {
		var r trace.Record
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		if r.Prompt != nil && r.Prompt.Agent == "planner" && prompt == "" {
			prompt = r.Prompt.Text
		}
		if r.Tool != nil && r.Tool.Agent == "planner" {
			r.Tool.Args = `{"tasks": [{"agent": "coder", "prompt": "audit svc-b, then say so in #ops:localhost, not #elsewhere:localhost"}]}`
			if rec.Trace[i], err = json.Marshal(r); err != nil {
				t.Fatal(err)
			}
		}
	}
	live := func(name string) id.UserID { return id.NewUserID(name, "localhost") }
	called := func(sc *replay.Script) string {
		turn, ok := sc.Respond("planner", fakeagent.Prompt{Text: prompt})
		if !ok {
			t.Fatal("planner's recorded turn did not answer its recorded prompt")
		}
		for _, a := range turn {
			if a.CallTool != "" {
				b, _ := json.Marshal(a.Args)
				return string(b)
			}
		}
		t.Fatalf("planner's recorded turn calls no tool: %+v", turn)
		return ""
	}
	mapped, err := replay.NewScript(rec, live)
	if err != nil {
		t.Fatal(err)
	}
	mapped.MapAliases(func(room string) id.RoomAlias { return id.RoomAlias(room + "-s7c2e:localhost") })
	if got, want := called(mapped), "say so in #ops-s7c2e:localhost, not #elsewhere:localhost"; !strings.Contains(got, want) {
		t.Errorf("with this run's aliases, planner called with %s, want it to hold %q", got, want)
	}
	plain, err := replay.NewScript(rec, live)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := called(plain), "say so in #ops:localhost, not #elsewhere:localhost"; !strings.Contains(got, want) {
		t.Errorf("without a mapping, planner called with %s, want it to hold %q", got, want)
	}
}
