package tasks

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/tools"
	"github.com/zooid-dev/zooid/zooid/trace"
)

// DefaultMaxOpenPerRoom is the behaviour §5 capacity: open tasks per room.
const DefaultMaxOpenPerRoom = 5

// DefaultPostTimeout bounds one attempt to post a task event.
const DefaultPostTimeout = 30 * time.Second

// DefaultTimeout is how long a task stays open when Options.Timeout is zero
// (config.DefaultTaskTimeout, which the daemon passes, is the same).
const DefaultTimeout = time.Hour

// Options wire a Manager to Matrix, zooid.yaml and the daemon.
type Options struct {
	// StateDir holds the journal (tasks.db). Required.
	StateDir string
	// Send posts an event as the agent user as, with txnID as the Matrix transaction
	// id (matrix.Transport.Send). Required.
	Send func(ctx context.Context, as id.UserID, room id.RoomID, evType event.Type, content any, txnID string) (id.EventID, error)
	// Agents looks up a zooid.yaml agent by name: its user and bound rooms. Required.
	Agents func(name string) (user id.UserID, rooms []id.RoomID, ok bool)
	// OtherAgent resolves an address (name or workstation.name) to the user
	// of another daemon's agent in room, with its canonical address
	// (workstation.name, or its name when its daemon names no workstation);
	// nil knows none. A task for one is Remote.
	OtherAgent func(room id.RoomID, addr string) (user id.UserID, canonical string, ok bool)
	// Workstation is the daemon's workstation (zooid.yaml workstation:, "" when
	// none): a task's agent may be named workstation.name, and only this
	// workstation's names are this daemon's agents.
	Workstation string
	// Wake queues one turn on the caller's original session with text; the daemon
	// queues it behind a running turn and skips it if that thread was /clear'ed.
	// It calls delivered once the session takes the turn (or skips it): until
	// then the wake stays owed in the journal, and a restart wakes again.
	// Optional: without it nobody is woken.
	Wake func(parent Parent, text string, delivered func())
	// StartCallee runs a handoff's callee in its own session of the thread,
	// prompted with the handoff (ThreadHandoff.Prompt), once its post is
	// journaled. Optional: without it nobody runs.
	StartCallee func(h ThreadHandoff)
	// Logger receives the package's logs; nil discards them.
	Logger *slog.Logger
	// MaxOpenPerRoom caps reserved+open tasks per room; 0 means DefaultMaxOpenPerRoom.
	MaxOpenPerRoom int
	// PostTimeout bounds each post attempt; 0 means DefaultPostTimeout.
	PostTimeout time.Duration
	// Timeout bounds how long a task stays open, from its admission
	// (task_timeout): past it Watch, or Recover after a restart, closes it
	// timed_out. It bounds the wait for the return of a handoff to another
	// daemon's agent too (returnOverdueHandoffs). 0 means DefaultTimeout.
	Timeout time.Duration
	// Now is the clock; nil means time.Now. Watch's timers run on the
	// runtime's clock, so a test that moves Now runs Watch in a
	// testing/synctest bubble, where both are the bubble's.
	Now func() time.Time
	// Trace records each task step (admitted, refused, started, failed,
	// closed, reported); nil records nothing.
	Trace trace.Recorder
}

// Manager runs task threads. It implements tools.Tasks. All methods are safe for
// concurrent use.
type Manager struct {
	opts Options
	log  *slog.Logger
	j    *journal

	mu         sync.Mutex
	tasks      map[string]*Task     // by attempt id: every journaled task
	byThread   map[id.EventID]*Task // by thread root, once known
	reporting  map[string]bool      // attempts whose report runs now
	owed       map[string]bool      // reporting attempts asked to report again meanwhile
	wakeQueued map[string]bool      // attempts whose wake waits in the caller's queue
	// callers serialises the reports to one caller thread, so its wakes are
	// queued in the order its results were posted (see deliver).
	callers map[Parent]*sync.Mutex
	stale   map[string]bool // attempts found open by Open, for Recover
	// posting holds the attempts whose root post is in flight in this
	// process (see post and TaskForRoot).
	posting map[string]*inflight
	// handoffs are the zooid_handoff records, by id; handoffWakeQueued the
	// returns waiting in a caller's queue in this process.
	handoffs          map[string]*ThreadHandoff
	handoffWakeQueued map[string]bool
	handoffsRecovered bool // RecoverHandoffs has run
	closing           bool // Close has begun: no new work
	closed            bool // the journal is closed
	// done is closed when Close begins, so Watch returns; poke (one slot)
	// tells Watch a task opened and its next deadline may have changed.
	done chan struct{}
	poke chan struct{}

	// wg counts work Close waits for: Start calls, reports, TaskForRoot's
	// background reports and Watch. Adds happen under mu while !closing.
	wg sync.WaitGroup
}

var _ tools.Tasks = (*Manager)(nil)

// ErrClosed is returned by a Manager after Close.
var ErrClosed = errors.New("task manager is closed")

// Open opens (or creates) the journal in opts.StateDir and loads it. Tasks found open
// stay open until Recover closes them, so call Recover once the daemon can report.
func Open(opts Options) (*Manager, error) {
	if opts.Send == nil || opts.Agents == nil {
		return nil, fmt.Errorf("opening task manager: Send and Agents are required")
	}
	if opts.MaxOpenPerRoom <= 0 {
		opts.MaxOpenPerRoom = DefaultMaxOpenPerRoom
	}
	if opts.PostTimeout <= 0 {
		opts.PostTimeout = DefaultPostTimeout
	}
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	opts.Trace = trace.Or(opts.Trace)
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	j, err := openJournal(opts.StateDir)
	if err != nil {
		return nil, err
	}
	ts, err := j.load()
	if err != nil {
		_ = j.close()
		return nil, err
	}
	hs, err := j.loadHandoffs()
	if err != nil {
		_ = j.close()
		return nil, err
	}
	m := &Manager{
		opts:       opts,
		log:        log.With("component", "tasks"),
		j:          j,
		tasks:      make(map[string]*Task, len(ts)),
		byThread:   make(map[id.EventID]*Task, len(ts)),
		reporting:  map[string]bool{},
		owed:       map[string]bool{},
		wakeQueued: map[string]bool{},
		callers:    map[Parent]*sync.Mutex{},
		stale:      map[string]bool{},
		posting:    map[string]*inflight{},
		handoffs:   make(map[string]*ThreadHandoff, len(hs)),
		done:       make(chan struct{}),
		poke:       make(chan struct{}, 1),
	}
	m.handoffWakeQueued = map[string]bool{}
	for _, h := range hs {
		m.handoffs[h.ID] = h
	}
	for _, t := range ts {
		m.tasks[t.AttemptID] = t
		if t.IsOpen() {
			m.stale[t.AttemptID] = true
		}
		if t.ThreadID != "" {
			m.byThread[t.ThreadID] = t
		}
	}
	return m, nil
}

// Close refuses new work, stops Watch, waits for Start calls and reports in flight,
// and closes the journal. Tasks still open stay open in the journal; the next
// Open+Recover closes them.
func (m *Manager) Close() error {
	m.mu.Lock()
	if m.closing {
		m.mu.Unlock()
		return nil
	}
	m.closing = true
	close(m.done)
	m.mu.Unlock()
	m.wg.Wait()
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	return m.j.close()
}

// enter registers work Close must wait for; false once Close has begun.
func (m *Manager) enter() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closing {
		return false
	}
	m.wg.Add(1)
	return true
}

// UncertainRooms lists the rooms of attempts Open found reserved without a thread:
// their root post was in flight at a crash, so it may have landed. The daemon reads
// those rooms' recent history before Recover, so TaskForRoot can adopt such a root;
// with none, start-up reads no history at all.
func (m *Manager) UncertainRooms() []id.RoomID {
	m.mu.Lock()
	defer m.mu.Unlock()
	var rooms []id.RoomID
	for a := range m.stale {
		t := m.tasks[a]
		if t.rootUncertain() && !slices.Contains(rooms, t.Room) {
			rooms = append(rooms, t.Room)
		}
	}
	slices.Sort(rooms)
	return rooms
}

// TaskByThread returns the task whose thread root is root in room, open or closed. The
// daemon uses it for routing (only the assignee is woken by a task root), for gating
// (the assignee session of an open task is a tools.TaskAssignee) and for depth.
func (m *Manager) TaskByThread(room id.RoomID, root id.EventID) (Task, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.byThread[root]
	if !ok || t.Room != room {
		return Task{}, false
	}
	return t.clone(), true
}

// TaskForRoot identifies a thread root the daemon received that carries
// dev.zooid.thread_start with attemptID, sent by sender. It closes three gaps:
//   - the homeserver can deliver the root before the post has journaled it: it
//     waits for the post to finish (which takes the root as its thread, should
//     its own answers be lost), so the task is journaled open before the root
//     wakes anyone;
//   - a root whose post was uncertain at a crash (the task still reserved) met
//     before Recover, from the start-up history or the first deliveries: the
//     task is adopted, open with that thread, and not cancelled by Recover;
//   - such a root arriving after Recover: it is bound to the closed task and
//     the thread result is posted into it.
//
// Unknown attempts, or a root from another room or sender, are not tasks (false).
func (m *Manager) TaskForRoot(room id.RoomID, root id.EventID, sender id.UserID, attemptID string) (Task, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tasks[attemptID]
	if !ok || t.Room != room || t.Parent.UserID != sender || root == "" {
		return Task{}, false
	}
	if fl, posting := m.posting[attemptID]; posting {
		// The root came back before its post had journaled it: post records it
		// (as its thread, should its own answers be lost) and this waits, so
		// the journal says the task started before anyone is woken by it.
		if fl.root == "" {
			fl.root = root
		}
		m.mu.Unlock()
		<-fl.done
		m.mu.Lock()
	}
	if t.ThreadID != "" {
		if t.ThreadID != root {
			return Task{}, false
		}
		return t.clone(), true
	}
	prev := t.clone()
	adopted := t.State == StateReserved && m.stale[attemptID]
	t.ThreadID = root
	if t.State == StateReserved {
		t.State = StateOpen
	}
	if t.Result != nil {
		t.Result.ThreadID = root
		// The thread exists after all: its result event is owed.
		t.Report.ResultPosted = false
		t.Report.Done = false
	}
	if err := m.j.put(t); err != nil {
		*t = prev
		m.log.Error("recording task thread", "attempt", attemptID, "thread", root, "err", err)
		return Task{}, false
	}
	if adopted {
		// Its post's journal write was lost to a crash, and nobody was
		// woken by the root (that would have journaled it): nothing was
		// interrupted, so the task goes on rather than being cancelled.
		delete(m.stale, attemptID)
		m.log.Info("task root posted before a restart adopted", "attempt", attemptID, "thread", root)
	}
	m.byThread[root] = t
	if t.State == StateClosed {
		m.reportLaterLocked(attemptID)
	}
	if adopted {
		m.pokeWatch()
	}
	return t.clone(), true
}

// CloseStale is Recover's journal part, for the daemon to run before its
// intake opens: every task the journal held open at Open is closed (as
// Recover says) and journaled, but not yet reported, which needs the daemon
// able to post and wake. A task root redelivered after a restart then finds
// its task closed, and wakes nobody, whichever of it and Recover comes first.
// Recover runs it too; only the first call closes anything.
func (m *Manager) CloseStale() error {
	if !m.enter() {
		return ErrClosed
	}
	defer m.wg.Done()
	_, err := m.closeStale(false)
	return err
}

// closeStale closes the tasks Open found open, in one journal write. A
// reserved one young enough to post again stays stale (TaskForRoot may yet
// adopt its root) until the final call, Recover's, which returns those for
// it to finish posting and forgets what Open found.
func (m *Manager) closeStale(final bool) ([]*Task, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var interrupted []*Task
	var prev []Task
	var unposted []*Task
	now := m.opts.Now().UTC()
	timedOut := 0
	for a := range m.stale {
		t := m.tasks[a]
		if !t.IsOpen() {
			continue
		}
		r := &Result{Status: StatusCancelled, Reason: ReasonInterruptedByRestart, Output: t.Summary}
		switch {
		case t.Remote && t.State == StateOpen && !m.overdue(t, now):
			// Another daemon runs it: nothing here was interrupted, and its
			// result still comes as an event in the thread.
			continue
		case m.overdue(t, now):
			r = timedOutResult(t)
			timedOut++
		case t.rootUncertain() && now.Sub(t.Created) < RepostWithin:
			unposted = append(unposted, t)
			continue
		}
		prev = append(prev, t.clone())
		m.closeLocked(t, r, now)
		interrupted = append(interrupted, t)
	}
	if err := m.j.put(interrupted...); err != nil {
		for i, t := range interrupted {
			*t = prev[i]
		}
		return nil, fmt.Errorf("closing tasks interrupted by restart: %w", err)
	}
	if final {
		m.stale = map[string]bool{}
	} else {
		for _, t := range interrupted {
			delete(m.stale, t.AttemptID)
		}
	}
	if n := len(interrupted) - timedOut; n > 0 {
		m.log.Info("closed tasks interrupted by restart", "count", n)
	}
	if timedOut > 0 {
		m.log.Info("closed tasks that passed task_timeout while the daemon was down", "count", timedOut, "timeout", m.opts.Timeout)
	}
	return unposted, nil
}

// Recover closes every task the journal held open at Open as cancelled
// (interrupted_by_restart) and reports every closed task not yet fully reported.
// Call it once at start-up, when the daemon can post and wake; tasks started since
// Open are not touched. A task found past its Timeout is closed timed_out instead:
// it would have been, had the daemon been running, and it can't go on either way.
//
// An attempt still reserved (its post uncertain: the daemon died between journaling
// and learning the event id) was never routed (routing journals the root first), so
// its assignee was never woken and nothing of it was interrupted. It goes on:
// adopted when TaskForRoot met its root since Open (the daemon reads the recent
// history of UncertainRooms before Recover), else its post is finished with the
// same txn id (finishPost), if it is younger than RepostWithin. An older one is
// closed as above, without a thread id, and reported to the caller once: re-posting
// it might duplicate its root, since the homeserver's txn memory is not forever. If
// such a root lands after all, the daemon meets it carrying the attempt id and
// TaskForRoot binds it and posts the thread result into it.
func (m *Manager) Recover(ctx context.Context) error {
	if !m.enter() {
		return ErrClosed
	}
	defer m.wg.Done()
	unposted, err := m.closeStale(true)
	if err != nil {
		return err
	}
	m.mu.Lock()
	var pending []string
	for _, t := range m.tasks {
		if t.State == StateClosed && !t.Report.Done {
			pending = append(pending, t.AttemptID)
		}
	}
	m.mu.Unlock()
	for _, a := range pending {
		m.report(ctx, a)
	}
	for _, t := range unposted {
		m.finishPost(ctx, t)
	}
	m.recoverHandoffs(ctx)
	return nil
}

// RepostWithin is how old a reserved task may be for Recover to finish its
// root post: with the same txn id, the homeserver answers a root that landed
// with the event it has, and posts one that did not. Homeservers remember a
// txn id for a while only (Synapse: half an hour), so an older reservation
// is closed instead, since re-posting it might double its root.
const RepostWithin = 10 * time.Minute

// finishPost posts the root of a task a crash left reserved. The caller's
// tool call never returned, so a post that fails now is reported to the
// caller like any result (post alone would leave it to the tool result).
func (m *Manager) finishPost(ctx context.Context, t *Task) {
	if r := m.post(ctx, t); r.Status == tools.TaskStarted {
		m.log.Info("task root posted before a restart finished", "attempt", t.AttemptID, "thread", r.ThreadID)
		return
	}
	if _, err := m.update(t.AttemptID, func(t *Task) error {
		t.Report = Report{}
		return nil
	}); err != nil {
		m.log.Error("journaling a failed task post for its report", "attempt", t.AttemptID, "err", err)
		return
	}
	m.report(ctx, t.AttemptID)
}

// closeLocked sets t closed with r (filling agent and thread). The caller persists.
func (m *Manager) closeLocked(t *Task, r *Result, now time.Time) {
	r.Agent = t.Agent
	r.ThreadID = t.ThreadID
	t.State = StateClosed
	t.Result = r
	t.Handoffs = nil
	t.Closed = now
	if t.Remote {
		// Its result event is the assignee's daemon's to post (or, closed
		// here by a timeout, nobody's): this daemon can't post as that user.
		t.Report.ResultPosted = true
	}
	m.opts.Trace.Record(traceStep(*t, trace.StepClosed, ""))
}

// update applies f to the task under the lock and persists it; on a journal error the
// in-memory task is restored, so memory never runs ahead of the disk.
func (m *Manager) update(attempt string, f func(t *Task) error) (Task, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Task{}, ErrClosed
	}
	t, ok := m.tasks[attempt]
	if !ok {
		return Task{}, fmt.Errorf("task %s: not found", attempt)
	}
	prev := t.clone()
	if err := f(t); err != nil {
		*t = prev
		return Task{}, err
	}
	if err := m.j.put(t); err != nil {
		*t = prev
		return Task{}, fmt.Errorf("journaling task %s: %w", attempt, err)
	}
	if t.ThreadID != "" {
		m.byThread[t.ThreadID] = t
	}
	return t.clone(), nil
}

// snapshotAll returns a copy of every journaled task.
func (m *Manager) snapshotAll() []Task {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Task, 0, len(m.tasks))
	for _, t := range m.tasks {
		out = append(out, t.clone())
	}
	return out
}
