package e2ee

import (
	"sync"
	"time"

	"maunium.net/go/mautrix/id"
)

// lateKeys remembers the room sessions whose events Decrypt gave up on, so
// that a room key which comes after all is logged with how late it came.
// That line is what tells an operator, or a failed test's log, that the
// homeserver delivers room keys later than the wait (raise it, or look at
// the homeserver's load) rather than never (the sender never shared it, or
// the homeserver lost it: Synapse drops to-device messages in an appservice
// transaction it had to retry, element-hq/synapse#14710). Until the key
// comes, the session's later events are not waited for again
// (Devices.decryptGivenUp), and the devices' inboxes are read for it a few
// times (Devices.watchLateKey).
type lateKeys struct {
	mu    sync.Mutex
	by    map[lateKey]givenUp
	order []lateKey // oldest first, for the bound
	// asked is how many times each session's key was asked of its sender
	// (Devices.askForKey), emptied when it reaches lateKeysKept.
	asked map[lateKey]int
}

type lateKey struct {
	room    id.RoomID
	session id.SessionID
}

// givenUp is the first event of a session Decrypt gave up on, and when its
// wait for the key began.
type givenUp struct {
	event   id.EventID
	waiting time.Time
}

// lateKeysKept bounds the sessions remembered: past it the oldest is
// forgotten, so a room full of undecryptable messages costs a fixed amount.
const lateKeysKept = 256

// gaveUp notes that Decrypt gave up on event, of room's session, whose wait
// began at waiting, and says whether the session is newly noted: one already
// noted keeps its first event.
func (l *lateKeys) gaveUp(room id.RoomID, session id.SessionID, event id.EventID, waiting time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := lateKey{room, session}
	if _, ok := l.by[k]; ok {
		return false
	}
	if l.by == nil {
		l.by = map[lateKey]givenUp{}
	}
	if len(l.order) == lateKeysKept {
		delete(l.by, l.order[0])
		l.order = l.order[1:]
	}
	l.by[k] = givenUp{event: event, waiting: waiting}
	l.order = append(l.order, k)
	return true
}

// givenUpOn says whether an event of room's session was given up on and
// its key has not come since, and which event that was.
func (l *lateKeys) givenUpOn(room id.RoomID, session id.SessionID) (givenUp, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	g, ok := l.by[lateKey{room, session}]
	return g, ok
}

// arrived forgets room's session and says whether an event of it was given
// up on: each late key is reported once, whichever agent's device stores it
// first.
func (l *lateKeys) arrived(room id.RoomID, session id.SessionID) (givenUp, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := lateKey{room, session}
	g, ok := l.by[k]
	if !ok {
		return givenUp{}, false
	}
	delete(l.by, k)
	for i, o := range l.order {
		if o == k {
			l.order = append(l.order[:i], l.order[i+1:]...)
			break
		}
	}
	return g, true
}

// ask says whether room's session is still to be asked for the round-th
// time (from 1), noting that it now is: the events of one session wait for
// the same answers.
func (l *lateKeys) ask(room id.RoomID, session id.SessionID, round int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := lateKey{room, session}
	if l.asked[k] >= round {
		return false
	}
	if l.asked == nil || len(l.asked) == lateKeysKept {
		l.asked = map[lateKey]int{}
	}
	l.asked[k] = round
	return true
}
