package daemon

import (
	"context"
	"crypto/rand"
	"sync"
	"time"

	"maunium.net/go/mautrix/id"
)

// sessionKey names one conversation: an agent in one thread of one room.
type sessionKey struct {
	agent  string
	room   id.RoomID
	thread id.EventID
}

// String is the stable session key handed to tools (task parents refer to it).
func (k sessionKey) String() string {
	return k.agent + "|" + string(k.room) + "|" + string(k.thread)
}

// turnRequest is one prompt waiting for its session.
type turnRequest struct {
	// id names the turn uniquely: the Matrix txn ids of its posts derive from
	// it, so a retried post can't double while two turns never collide.
	id      string
	text    string
	trigger id.EventID // the event that woke the agent, if any; replies relate to it
	// from is who the turn comes from, for a new session's header: the
	// trigger's sender, the agent behind a handoff, or "" for the daemon.
	from id.UserID
	// taken, if set, runs when the turn leaves the queue to run: what queued
	// it (a task result) counts it as delivered only then.
	taken func()
	// seq is the turn's arrival number, across all sessions: a turn waiting
	// for an agent process is served in this order.
	seq uint64
	// visible, when set, is closed once the check that the trigger is
	// readable, started as the turn was queued, is over; nil: the turn
	// checks when it starts.
	visible <-chan struct{}
}

// eventTurn is a turn woken by a Matrix event from sender: its id is the event's.
func eventTurn(text string, ev id.EventID, sender id.UserID) turnRequest {
	return turnRequest{id: string(ev), text: text, trigger: ev, from: sender}
}

// internalTurn is a turn the daemon itself queues (a task result, a handoff),
// on behalf of from ("" for the daemon): no event woke it, so it gets a fresh id.
func internalTurn(text string, from id.UserID) turnRequest {
	return turnRequest{id: "internal." + rand.Text(), text: text, from: from}
}

// sessions owns every live session and the goroutine that serialises its turns.
// Turns of one session never overlap; sessions run concurrently.
type sessions struct {
	run func(ctx context.Context, s *session, req turnRequest)
	end func(s *session)

	// done, if set, hears of every turn that ran to its end or was dropped by
	// a cleared session; turns cut short by the daemon stopping are not done.
	done func(key sessionKey, req turnRequest)

	idleAfter time.Duration // zero: never idle
	idle      func(s *session)

	mu     sync.Mutex
	seq    uint64 // the last turn's arrival number
	byKey  map[sessionKey]*session
	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
	closed bool
}

func newSessions(run func(context.Context, *session, turnRequest), end func(*session)) *sessions {
	ctx, cancel := context.WithCancel(context.Background())
	return &sessions{run: run, end: end, byKey: make(map[sessionKey]*session), ctx: ctx, cancel: cancel}
}

// withIdle makes every session call idle from its loop once it has waited
// that long for a turn: the daemon then lets the agent process go, keeping the
// session (a busy room would otherwise keep one process per thread forever).
func (m *sessions) withIdle(after time.Duration, idle func(*session)) *sessions {
	m.idleAfter, m.idle = after, idle
	return m
}

// withDone sets the hook told when a turn is done (see sessions.done).
func (m *sessions) withDone(done func(sessionKey, turnRequest)) *sessions {
	m.done = done
	return m
}

// session is the daemon's side of one (agent, thread) conversation. Its fields
// beyond the queue belong to the turn loop goroutine alone.
type session struct {
	key sessionKey

	mu      sync.Mutex
	queue   []turnRequest
	wake    chan struct{}
	stopped chan struct{} // closed to end the loop after the current turn
	stop    sync.Once
	ctx     context.Context // the session's lifetime
	cancel  context.CancelFunc

	state  any // the runner's per-session state (process, ACP session, binding)
	opened int // agents opened for this session so far; the runner's too
}

// enqueue adds a turn for key, opening the session when it is new.
func (m *sessions) enqueue(key sessionKey, req turnRequest) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return
	}
	s, ok := m.byKey[key]
	if !ok {
		ctx, cancel := context.WithCancel(m.ctx)
		s = &session{key: key, wake: make(chan struct{}, 1), stopped: make(chan struct{}), ctx: ctx, cancel: cancel}
		m.byKey[key] = s
		m.wg.Add(1)
		go m.loop(ctx, s)
	}
	req.seq = m.arriveLocked()
	s.mu.Lock()
	s.queue = append(s.queue, req)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// arrive numbers an arrival that waits for an agent process outside any
// session (an HTTP request), in the same order as turns.
func (m *sessions) arrive() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.arriveLocked()
}

func (m *sessions) arriveLocked() uint64 {
	m.seq++
	return m.seq
}

// pending says whether turns are queued behind the running one.
func (s *session) pending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue) > 0
}

// loop runs queued turns one at a time until the session is ended.
func (m *sessions) loop(ctx context.Context, s *session) {
	defer m.wg.Done()
	defer m.end(s)
	for {
		s.mu.Lock()
		var req turnRequest
		have := len(s.queue) > 0
		if have {
			req = s.queue[0]
			s.queue = s.queue[1:]
		}
		s.mu.Unlock()
		if have {
			if req.taken != nil {
				req.taken()
			}
			m.run(ctx, s, req)
			if m.done != nil && m.ctx.Err() == nil {
				m.done(s.key, req)
			}
			continue
		}
		if !m.wait(ctx, s) {
			return
		}
	}
}

// wait blocks until the session has work (true) or must end (false); a
// session with a live agent that waits longer than idleAfter lets it go, and
// one without an agent that waits that long ends: a thread that speaks again
// opens a fresh session (its agent is told to catch up, as after an idle
// stop), so a daemon that saw ten thousand threads does not keep ten thousand
// loops waiting.
func (m *sessions) wait(ctx context.Context, s *session) bool {
	var idle <-chan time.Time
	if m.idleAfter > 0 {
		t := time.NewTimer(m.idleAfter)
		defer t.Stop()
		idle = t.C
	}
	select {
	case <-s.wake:
	case <-idle:
		if s.state != nil {
			m.idle(s)
			return true
		}
		return !m.forget(s)
	case <-s.stopped:
		return false
	case <-ctx.Done():
		return false
	}
	return true
}

// forget removes an idle session without an agent, unless a turn arrived for
// it meanwhile; it says whether the session is gone. enqueue appends under
// m.mu, so a turn is either seen here or goes to a new session.
func (m *sessions) forget(s *session) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	s.mu.Lock()
	queued := len(s.queue) > 0
	s.mu.Unlock()
	if queued {
		return false
	}
	if m.byKey[s.key] == s {
		delete(m.byKey, s.key)
	}
	return true
}

// endSession stops the session for key: a running turn is cancelled, queued
// turns are dropped. The next message for the key opens a fresh session.
func (m *sessions) endSession(key sessionKey) bool {
	m.mu.Lock()
	s, ok := m.byKey[key]
	if ok {
		delete(m.byKey, key)
	}
	m.mu.Unlock()
	if !ok {
		return false
	}
	s.mu.Lock()
	dropped := s.queue
	s.queue = nil
	s.mu.Unlock()
	if m.done != nil {
		for _, req := range dropped {
			m.done(key, req)
		}
	}
	s.stop.Do(func() { close(s.stopped) })
	s.cancel()
	return true
}

// endThread ends every session in one thread of a room, whoever opened it
// (a mention, a handoff, a task result), and returns their agents.
func (m *sessions) endThread(room id.RoomID, thread id.EventID) []string {
	m.mu.Lock()
	var keys []sessionKey
	for k := range m.byKey {
		if k.room == room && k.thread == thread {
			keys = append(keys, k)
		}
	}
	m.mu.Unlock()
	var agents []string
	for _, k := range keys {
		if m.endSession(k) {
			agents = append(agents, k.agent)
		}
	}
	return agents
}

// close ends every session and waits for their loops to finish.
func (m *sessions) close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
}
