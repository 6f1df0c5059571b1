package steps

import (
	"fmt"

	"github.com/zooid-dev/zooid/sim/replay"
	"github.com/zooid-dev/zooid/zooid/recording"
	"github.com/zooid-dev/zooid/zooid/trace"
)

// Recordings made for `zooid replay`: where they are saved, and when a recorded
// trace has settled.

// SaveRecordingsEnv names a directory where every recording a feature
// replays with `zooid replay` is also written.
const SaveRecordingsEnv = "ZOOID_TEST_SAVE_RECORDINGS"

// traceSettled says whether a recording's trace has caught up with the
// room: every recorded event routed, every prompt's turn ended and every
// post seen coming back as an event, every closed task reported.
func traceSettled(rec *recording.Recording) (bool, string) {
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
