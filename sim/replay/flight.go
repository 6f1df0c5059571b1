package replay

import (
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/trace"
)

// inFlight is what the daemon of a replay still owes its trace, as far as
// the trace itself says: turns prompted and not ended, sessions woken and
// not yet prompted, tasks admitted and not yet reported, events sent to it
// and posts it made that it has not yet traced as events. When none is
// left, the daemon has nothing more to write until it is sent something:
// a barrier still short of records then waits for what will not come.
// Unknown work (a session woken twice that gets one prompt) only keeps it
// from looking idle, so a barrier falls back to its Wait.
type inFlight struct {
	turns  map[string]int // session → prompts not yet ended
	wakes  map[string]int // session → wakes not yet prompted
	tasks  map[string]bool
	unseen map[id.EventID]int // sent or posted, not yet an event record: 1; seen first: -1
}

func (f *inFlight) init() {
	if f.turns == nil {
		f.turns, f.wakes, f.tasks, f.unseen = map[string]int{}, map[string]int{}, map[string]bool{}, map[id.EventID]int{}
	}
}

// observe accounts for one record of the run's trace.
func (f *inFlight) observe(rec trace.Record) {
	f.init()
	switch {
	case rec.Event != nil:
		f.seen(rec.Event.ID)
		for _, w := range rec.Event.Woke {
			f.wakes[w.Session]++
		}
	case rec.Prompt != nil:
		f.turns[rec.Session]++
		if f.wakes[rec.Session] > 0 {
			f.wakes[rec.Session]--
		}
	case rec.TurnEnd != nil:
		if f.turns[rec.Session] > 0 {
			f.turns[rec.Session]--
		}
	case rec.Post != nil && rec.Post.ID != "":
		f.sent(rec.Post.ID)
	case rec.Task != nil:
		switch rec.Task.Step {
		case trace.StepAdmitted, trace.StepStarted, trace.StepClosed:
			f.tasks[rec.Task.Attempt] = true
		default: // refused, failed, reported: nothing more comes of it
			f.tasks[rec.Task.Attempt] = false
		}
	}
}

// sent notes an event the trace will record when the daemon receives it.
func (f *inFlight) sent(ev id.EventID) {
	f.init()
	if f.unseen[ev] < 0 { // the record came first
		delete(f.unseen, ev)
		return
	}
	f.unseen[ev] = 1
}

func (f *inFlight) seen(ev id.EventID) {
	if f.unseen[ev] > 0 {
		delete(f.unseen, ev)
		return
	}
	f.unseen[ev] = -1
}

// restarted forgets the turns and wakes of a daemon that was stopped: what
// it cut short it never ends, and the new one's recovery prompts anew.
func (f *inFlight) restarted() {
	f.init()
	clear(f.turns)
	clear(f.wakes)
}

// idle says whether nothing is in flight.
func (f *inFlight) idle() bool {
	f.init()
	for _, n := range f.turns {
		if n > 0 {
			return false
		}
	}
	for _, n := range f.wakes {
		if n > 0 {
			return false
		}
	}
	for _, open := range f.tasks {
		if open {
			return false
		}
	}
	for _, n := range f.unseen {
		if n > 0 {
			return false
		}
	}
	return true
}
