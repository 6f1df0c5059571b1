package replay_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/zooid-dev/zooid/sim/replay"
	"github.com/zooid-dev/zooid/sim/testbin"
	"github.com/zooid-dev/zooid/zooid/recording"
	"github.com/zooid-dev/zooid/zooid/trace"
)

// TestMain runs the tests, then removes the stand-in (sim/standin) the
// replay's daemon started the scripted agents (`fake-agent …`) and their
// MCP bridge (`mcp …`) as.
func TestMain(m *testing.M) { testbin.Main(m) }

// busy is a recording made by features/replay.feature on fakehs: mentions,
// a thread with a bare reply, a task fan-out and a daemon restart.
const busy = "../../scenarios/busy-ops-traced.json"

// crashed is a recording made by features/replay.feature on fakehs where the
// harness's SIGKILL landed after planner's reply to a barrier was routed
// and its turn traced as ended, before the daemon had marked either done: the
// next start routed the reply's event again (redelivered from the inbox) and
// re-posted the reply (same txn id, same event). CI saw this replay diverge
// with "missing: post … ok" (stop 9).
const crashed = "../../scenarios/ops-crash-traced.json"

// restarted is the recording features/regression_restart.feature plays: a
// bare reply in a thread after a daemon restart, which routing recalls.
const restarted = "../../scenarios/ops-restart-traced.json"

func replayMain(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := replay.Main(args, &out, &errOut)
	return code, out.String() + errOut.String()
}

func TestRecordingThatReproducesExitsZero(t *testing.T) {
	code, out := replayMain(t, busy)
	if code != replay.ExitReproduced {
		t.Fatalf("zooid replay %s exited %d, want 0:\n%s", busy, code, out)
	}
	if !strings.HasPrefix(out, "reproduced: ") {
		t.Fatalf("output %q does not say reproduced", out)
	}
}

// editDecision rewrites the routing decision on the event whose text
// contains text, in a copy of rec's trace.
func editDecision(t testing.TB, rec *recording.Recording, text string, f func(*trace.Event)) {
	t.Helper()
	n := 0
	for i, line := range rec.Trace {
		var r trace.Record
		if err := json.Unmarshal(line, &r); err != nil || r.Event == nil || !strings.Contains(r.Event.Text, text) {
			continue
		}
		f(r.Event)
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		rec.Trace[i] = b
		n++
	}
	if n != 1 {
		t.Fatalf("%d trace events contain %q, want 1", n, text)
	}
}

func writeRecording(t *testing.T, rec *recording.Recording) string {
	t.Helper()
	var buf bytes.Buffer
	if err := rec.Write(&buf); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "edited.json")
	if err := os.WriteFile(p, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestEditedRoutingDecisionExitsOneAndIsNamed(t *testing.T) {
	rec, err := recording.Load(busy)
	if err != nil {
		t.Fatal(err)
	}
	editDecision(t, rec, "and svc-b too", func(e *trace.Event) {
		e.Woke, e.Nobody = nil, trace.WhyNotNotified
	})
	code, out := replayMain(t, writeRecording(t, rec))
	if code != replay.ExitDiverged {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "diverged: 1 differences") {
		t.Fatalf("want a header and exactly one difference, got:\n%s", out)
	}
	d := lines[1]
	for _, want := range []string{"#ops:localhost, routing: event $", "from @mia:localhost", `"and svc-b too"`, "want woke nobody (nobody_addressed); got woke planner (addressee"} {
		if !strings.Contains(d, want) {
			t.Errorf("difference %q lacks %q", d, want)
		}
	}
}

// Run is the engine shrink and --html build on: the Result carries both
// traces and the diff.
func TestRunReturnsBothTracesAndTheDiff(t *testing.T) {
	rec, err := recording.Load(busy)
	if err != nil {
		t.Fatal(err)
	}
	editDecision(t, rec, "is svc-c up?", func(e *trace.Event) {
		e.Woke[0].Agent = "planner"
	})
	res, err := replay.Run(context.Background(), rec, replay.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Reproduced() || len(res.Diff) == 0 {
		t.Fatalf("an edited decision reproduced: %+v", res)
	}
	if res.Diff[0].Stream != "routing" || !strings.Contains(res.Diff[0].What, "want woke planner (mention") || !strings.Contains(res.Diff[0].What, "got woke coder (mention") {
		t.Errorf("first difference %v, want the routing of \"is svc-c up?\" planner vs coder", res.Diff[0])
	}
	if len(res.Want.Rooms) != 1 || len(res.Got.Rooms) != 1 || len(res.Got.Rooms[0].Records) == 0 {
		t.Fatalf("want one room each side with records: want %d rooms, got %d rooms", len(res.Want.Rooms), len(res.Got.Rooms))
	}
	if res.Pushed == 0 {
		t.Error("no event was pushed")
	}
}

// decideAll gives every event record of rec's trace the decision today's
// daemon would write on it: {} but for the events whose text contains a key
// of special.
func decideAll(t *testing.T, rec *recording.Recording, special map[string]trace.Decision) {
	t.Helper()
	met := map[string]bool{}
	for i, line := range rec.Trace {
		var r trace.Record
		if err := json.Unmarshal(line, &r); err != nil || r.Event == nil {
			continue
		}
		r.Event.Decision = &trace.Decision{}
		for text, d := range special {
			if r.Event.Text != "" && strings.Contains(r.Event.Text, text) {
				*r.Event.Decision = d
				met[text] = true
			}
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		rec.Trace[i] = b
	}
	if len(met) != len(special) {
		t.Fatalf("the trace has events for %v of %d special decisions", met, len(special))
	}
}

// A recording whose trace holds the router's whole decision is compared on
// all of it: the task root noted, the thread recalled after a restart.
func TestRecordedDecisionsAreComparedWhole(t *testing.T) {
	rec, err := recording.Load(busy)
	if err != nil {
		t.Fatal(err)
	}
	decideAll(t, rec, map[string]trace.Decision{"audit svc-a": {TaskRoot: "coder"}})
	if code, out := replayMain(t, writeRecording(t, rec)); code != replay.ExitReproduced {
		t.Fatalf("with its decisions, %s exited %d, want 0:\n%s", busy, code, out)
	}
	decideAll(t, rec, map[string]trace.Decision{})
	code, out := replayMain(t, writeRecording(t, rec))
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != replay.ExitDiverged || len(lines) != 2 || !strings.Contains(lines[1], `"@zs-coder:localhost audit svc-a": want woke coder (task_assignee`) ||
		!strings.HasSuffix(lines[1], "; task root of coder") {
		t.Fatalf("with the task root left out of its decision, exit %d, want 1 and one difference naming the task root:\n%s", code, out)
	}

	rec, err = recording.Load(restarted)
	if err != nil {
		t.Fatal(err)
	}
	decideAll(t, rec, map[string]trace.Decision{"and svc-b?": {Recall: true}})
	if code, out := replayMain(t, writeRecording(t, rec)); code != replay.ExitReproduced {
		t.Fatalf("with its decisions, %s exited %d, want 0:\n%s", restarted, code, out)
	}
}

func TestBadInputExitsTwo(t *testing.T) {
	dir := t.TempDir()
	broken := filepath.Join(dir, "broken.json")
	if err := os.WriteFile(broken, []byte(`{"version": 2, "members": [`), 0o600); err != nil {
		t.Fatal(err)
	}
	rec, err := recording.Load(busy)
	if err != nil {
		t.Fatal(err)
	}
	// edit writes the recording with trace line i replaced by line.
	edit := func(i int, line string) string {
		t.Helper()
		r, err := recording.Load(busy)
		if err != nil {
			t.Fatal(err)
		}
		r.Trace = append(r.Trace[:i:i], json.RawMessage(line))
		return writeRecording(t, r)
	}
	badTrace := edit(1, `{"seq": 1}`)
	room := `"room":"` + roomOf(t, rec) + `"`
	unknownKind := edit(2, `{"seq":2,"kind":"telepathy",`+room+`}`)
	cutShort := edit(2, `{"seq":2,"kind":"event",`+room+`}`)
	badHeader := edit(0, `{"format":"zooid-trace","version":99,"segment":1}`)
	// The trace's lines are named by their line in the file: the header
	// is line 1 of the trace and comes after the events.
	fileLine := regexp.MustCompile(`edited\.json:[0-9]+: trace line [0-9]+: `)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no file", nil, "usage: zooid replay FILE"},
		{"missing file", []string{filepath.Join(dir, "nope.json")}, "no such file"},
		{"broken json", []string{broken}, "broken.json:1:"},
		{"no trace", []string{"../../scenarios/deploy-review.json"}, "carries no trace"},
		{"bad trace line", []string{badTrace}, "trace line 2: a trace record has a kind"},
		{"unknown trace kind", []string{unknownKind}, `trace line 3: unknown trace record kind "telepathy"`},
		{"trace cut short", []string{cutShort}, `trace line 3: a "event" record without its "event" field`},
		{"bad trace header", []string{badHeader}, "trace line 1: trace format version 99"},
		{"unknown flag", []string{"--nope", busy}, "flag provided but not defined"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out := replayMain(t, tc.args...)
			if code != replay.ExitBadInput || !strings.Contains(out, tc.want) {
				t.Fatalf("exit %d, want 2 with %q; output:\n%s", code, tc.want, out)
			}
			if strings.Contains(tc.want, "trace line") && !fileLine.MatchString(out) {
				t.Fatalf("the error names no file line (%s); output:\n%s", fileLine, out)
			}
		})
	}
}

// TestACrashsSecondRecordsOfOneEventAreOneEvent: the room saw planner's "ok"
// once; the recording's two event records and two post records of it are
// one event to compare, as today's daemon, stopped cleanly, writes one.
func TestACrashsSecondRecordsOfOneEventAreOneEvent(t *testing.T) {
	rec, err := recording.Load(crashed)
	if err != nil {
		t.Fatal(err)
	}
	events, posts := map[string]int{}, map[string]int{}
	for _, line := range rec.Trace {
		var r trace.Record
		if json.Unmarshal(line, &r) != nil {
			continue
		}
		switch {
		case r.Event != nil:
			events[string(r.Event.ID)]++
		case r.Post != nil:
			posts[string(r.Post.ID)]++
		}
	}
	const ok = "$ENloOE239iynewsFP_jJMQczHYRYIusWfDLryAm88Yk"
	if events[ok] != 2 || posts[ok] != 2 {
		t.Fatalf("the recording holds %d event and %d post records of %s, want 2 and 2 (the crash's redelivery)", events[ok], posts[ok], ok)
	}
	want, err := replay.RecordedTrace(rec)
	if err != nil {
		t.Fatal(err)
	}
	events, posts = map[string]int{}, map[string]int{}
	for _, r := range want.Rooms[0].Records {
		switch {
		case r.Event != nil:
			events[string(r.Event.ID)]++
		case r.Post != nil:
			posts[string(r.Post.ID)]++
		}
	}
	if events[ok] != 1 || posts[ok] != 1 {
		t.Fatalf("the trace to compare holds %d event and %d post records of %s, want 1 and 1", events[ok], posts[ok], ok)
	}
	code, out := replayMain(t, crashed)
	if code != replay.ExitReproduced {
		t.Fatalf("zooid replay %s exited %d, want 0:\n%s", crashed, code, out)
	}
}

// roomOf is the room id of the recording's trace.
func roomOf(t *testing.T, rec *recording.Recording) string {
	t.Helper()
	var h struct {
		Room string `json:"room"`
	}
	if err := json.Unmarshal(rec.Trace[0], &h); err != nil || h.Room == "" {
		t.Fatalf("the recording's trace header names no room: %v", err)
	}
	return h.Room
}
