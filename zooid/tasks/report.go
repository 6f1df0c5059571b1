package tasks

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/internal/faultpoint"
	"github.com/zooid-dev/zooid/zooid/tools"
	"github.com/zooid-dev/zooid/zooid/trace"
	"github.com/zooid-dev/zooid/zooid/zevent"
)

// report delivers a closed task's result, each step at most once per success: the
// thread result, then with notify caller the notice and the wake; then it is done.
// Every step is journaled after it happens (the close was journaled before), so a
// crash repeats only the step in flight: Matrix posts repeat with the same txn id,
// and a wake in flight at a crash is repeated (never lost) by Recover. A step that
// fails is retried once and then left for the next Recover.
func (m *Manager) report(ctx context.Context, attempt string) {
	m.mu.Lock()
	claimed := m.claimLocked(attempt)
	m.mu.Unlock()
	if !claimed {
		return
	}
	defer m.release(attempt)
	m.deliver(ctx, attempt)
}

// claimLocked makes the caller the one goroutine reporting attempt, registered
// with Close. False when another goroutine reports it, or Close has begun: the
// journal keeps what is left for the next Recover. When another goroutine
// reports it, that one runs once more when it ends (release): it may be past
// its last look at what this caller was asked to report for (a thread bound, a
// wake taken, a caller cleared), and giving up here would leave the task
// unreported until the next Recover.
func (m *Manager) claimLocked(attempt string) bool {
	if m.reporting[attempt] {
		m.owed[attempt] = true
		return false
	}
	if m.closing {
		return false
	}
	m.reporting[attempt] = true
	m.wg.Add(1)
	return true
}

// reportLaterLocked claims attempt's report and runs it on its own goroutine
// (see claimLocked for when it is not claimed). Call it with m.mu held.
func (m *Manager) reportLaterLocked(attempt string) {
	if m.claimLocked(attempt) {
		go func() {
			defer m.release(attempt)
			m.deliver(context.Background(), attempt)
		}()
	}
}

// reportLater is reportLaterLocked for a caller that does not hold m.mu.
func (m *Manager) reportLater(attempt string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reportLaterLocked(attempt)
}

// release ends a claim. When a report was asked for while the claim ran
// (claimLocked), one more runs, also when Close has begun since (it was
// asked for before, and Close waits for it).
func (m *Manager) release(attempt string) {
	m.mu.Lock()
	again := m.owed[attempt]
	delete(m.owed, attempt)
	if again {
		m.wg.Add(1) // the claim passes to the next report
	} else {
		delete(m.reporting, attempt)
	}
	m.mu.Unlock()
	if again {
		go func() {
			defer m.release(attempt)
			m.deliver(context.Background(), attempt)
		}()
	}
	m.wg.Done()
}

// deliver runs the steps of report for a claimed attempt.
func (m *Manager) deliver(ctx context.Context, attempt string) {
	ctx = context.WithoutCancel(ctx)
	snap, ok := m.snapshot(attempt)
	if !ok || snap.State != StateClosed || snap.Result == nil || snap.Report.Done {
		return
	}
	r := *snap.Result
	log := m.log.With("attempt", attempt, "thread", snap.ThreadID, "status", r.Status)
	pending := false
	// Two tasks of one caller that end together report concurrently: without
	// this, the second's wake could be queued before the first's although its
	// result was posted after, and the caller would hear them out of order.
	unlock := m.lockCaller(snap.Parent)
	defer func() {
		if unlock != nil {
			unlock()
		}
	}()

	if snap.ThreadID != "" && !snap.Report.ResultPosted {
		content := zevent.ThreadResultEventContent{ThreadResult: r, RelatesTo: zevent.ThreadReply(snap.ThreadID, snap.ThreadID)}
		if _, err := m.send(ctx, snap.AgentUser, snap.Room, zevent.EventThreadResult, content, attempt+"-result"); err != nil {
			log.Error("posting task result", "err", err)
			pending = true
		} else {
			faultpoint.Reach(faultpoint.TaskResultPosted)
			if err := m.mark(attempt, func(rp *Report) { rp.ResultPosted = true }); err != nil {
				log.Error("journaling task result posted", "err", err)
				return
			}
		}
	}
	if snap.Notify == tools.NotifyCaller && !snap.Report.NoticePosted {
		from := snap.AgentUser
		if snap.Remote {
			// The assignee is another daemon's user: the caller posts it.
			from = snap.Parent.UserID
		}
		if _, err := m.send(ctx, from, snap.Parent.Room, event.EventMessage, noticeOf(snap), attempt+"-notice"); err != nil {
			log.Error("posting task result notice", "err", err)
			pending = true
		} else if err := m.mark(attempt, func(rp *Report) { rp.NoticePosted = true }); err != nil {
			log.Error("journaling task notice posted", "err", err)
			return
		}
	}
	if snap.Notify == tools.NotifyCaller && !snap.Report.Woken && !m.wake(attempt, snap) {
		// The wake is queued behind the caller's running turn: it is journaled
		// as done only once the caller's session takes it, so a restart before
		// then wakes the caller again instead of losing the result.
		return
	}
	if pending {
		return
	}
	again, already := false, false
	if _, err := m.update(attempt, func(t *Task) error {
		if t.ThreadID != "" && !t.Report.ResultPosted {
			// TaskForRoot bound the thread while this report ran: its result
			// event is still owed.
			again = true
			return nil
		}
		// The wake's own report can follow one that already finished: the
		// task is reported once, whoever gets here second.
		already = t.Report.Done
		t.Report.Done = true
		return nil
	}); err != nil {
		log.Error("journaling task reported", "err", err)
		return
	}
	if again {
		unlock()
		unlock = nil
		m.deliver(ctx, attempt)
		return
	}
	if already {
		return
	}
	log.Info("task reported", "agent", snap.Agent, "caller", snap.Parent.Agent, "notify", snap.Notify)
	m.opts.Trace.Record(traceStep(snap, trace.StepReported, ""))
}

// lockCaller holds the reports to one caller thread and returns the unlock.
func (m *Manager) lockCaller(p Parent) func() {
	m.mu.Lock()
	mu, ok := m.callers[p]
	if !ok {
		mu = &sync.Mutex{}
		m.callers[p] = mu
	}
	m.mu.Unlock()
	mu.Lock()
	return mu.Unlock
}

// wake hands the caller its result as a new turn and says whether the wake is
// already taken (so the report can finish now). A wake still queued from
// earlier in this process is not queued twice.
func (m *Manager) wake(attempt string, snap Task) bool {
	if m.opts.Wake == nil || snap.Report.CallerCleared {
		return m.markWoken(attempt)
	}
	m.mu.Lock()
	queued := m.wakeQueued[attempt]
	m.wakeQueued[attempt] = true
	m.mu.Unlock()
	if !queued {
		m.opts.Wake(snap.Parent, wakeText(snap), func() {
			if m.markWoken(attempt) {
				// Finish the report (journal it done) off the caller's goroutine.
				m.reportLater(attempt)
			}
		})
	}
	now, ok := m.snapshot(attempt)
	afterWakeLook(attempt)
	return ok && now.Report.Woken
}

// afterWakeLook runs between wake's last look at the task and its return; a
// test replaces it to have the caller take the wake at exactly that moment.
var afterWakeLook = func(attempt string) {}

// ThreadCleared records that a caller's thread was /clear'ed: results of tasks
// delegated from it that have not woken it yet will not wake the new session
// there (their notices are still posted). Journaled, so a restart agrees.
func (m *Manager) ThreadCleared(room id.RoomID, root id.EventID) error {
	m.mu.Lock()
	var affected []string
	for attempt, t := range m.tasks {
		if t.Parent.Room == room && t.Parent.ThreadRoot == root && t.Notify == tools.NotifyCaller && !t.Report.Woken {
			affected = append(affected, attempt)
		}
	}
	m.mu.Unlock()
	var errs []error
	for _, attempt := range affected {
		t, err := m.update(attempt, func(t *Task) error {
			t.Report.CallerCleared = true
			return nil
		})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if t.State == StateClosed {
			// A wake that was waiting in the cleared session's queue is gone:
			// finish the report without it.
			m.reportLater(attempt)
		}
	}
	return errors.Join(errs...)
}

// markWoken journals that the caller took its wake.
func (m *Manager) markWoken(attempt string) bool {
	m.mu.Lock()
	delete(m.wakeQueued, attempt)
	m.mu.Unlock()
	if err := m.mark(attempt, func(rp *Report) { rp.Woken = true }); err != nil {
		m.log.Error("journaling task wake", "attempt", attempt, "err", err)
		return false
	}
	return true
}

func (m *Manager) snapshot(attempt string) (Task, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.tasks[attempt]
	if !ok {
		return Task{}, false
	}
	return t.clone(), true
}

func (m *Manager) mark(attempt string, f func(*Report)) error {
	_, err := m.update(attempt, func(t *Task) error {
		f(&t.Report)
		return nil
	})
	return err
}

func noticeOf(t Task) zevent.ResultNoticeContent {
	c := zevent.ResultNoticeContent{
		MsgType:      event.MsgNotice,
		Body:         resultText(t),
		Mentions:     &event.Mentions{},
		ThreadResult: *t.Result,
	}
	if t.Parent.ThreadRoot != "" {
		c.RelatesTo = zevent.ThreadReply(t.Parent.ThreadRoot, t.Parent.ThreadRoot)
	}
	return c
}

// resultText is the human-readable result: the notice body and the wake's core.
func resultText(t Task) string {
	r := t.Result
	var b strings.Builder
	fmt.Fprintf(&b, "Task for %s ", t.Agent)
	if r.ThreadID != "" {
		fmt.Fprintf(&b, "(thread %s) ", r.ThreadID)
	}
	fmt.Fprintf(&b, "ended: %s", r.Status)
	if r.Reason != "" {
		fmt.Fprintf(&b, " (%s)", r.Reason)
	}
	if r.Error != "" {
		fmt.Fprintf(&b, "\nError: %s", r.Error)
	}
	if r.Output != "" {
		fmt.Fprintf(&b, "\n\n%s", r.Output)
	}
	return b.String()
}

func wakeText(t Task) string {
	return "[zooid] A task you delegated has ended; this is its result.\n" + resultText(t)
}
