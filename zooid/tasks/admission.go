package tasks

import (
	"context"
	"crypto/rand"
	"fmt"
	"html"
	"slices"
	"strings"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/internal/faultpoint"
	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/tools"
	"github.com/zooid-dev/zooid/zooid/zevent"
)

// Start runs zooid_start_task_threads for caller c: each task in order is admitted or
// refused, all admitted ones are journaled as reserved in one transaction, then their
// roots are posted one after another, in order. Results are index-aligned with req.Tasks.
func (m *Manager) Start(ctx context.Context, c tools.Caller, req tools.StartRequest) (tools.StartResult, error) {
	notify := req.Notify
	switch notify {
	case "":
		notify = tools.NotifyCaller
	case tools.NotifyCaller, tools.NotifyNone:
	default:
		return tools.StartResult{}, tools.Errorf(tools.CodeInvalidArgument, "notify must be %q or %q, not %q", tools.NotifyCaller, tools.NotifyNone, notify)
	}
	if len(req.Tasks) == 0 {
		return tools.StartResult{}, tools.Errorf(tools.CodeInvalidArgument, "tasks must hold at least one {agent, prompt}")
	}
	if !m.enter() {
		return tools.StartResult{}, tools.Errorf(tools.CodeUnavailable, "task threads are shutting down")
	}
	defer m.wg.Done()
	results := make([]tools.TaskResult, len(req.Tasks))
	admitted, err := m.admit(c, req.Tasks, notify, results)
	if err != nil {
		return tools.StartResult{}, err
	}
	m.traceAdmission(c, admitted, results)
	// One at a time, in the order given: the room shows the tasks as the
	// caller listed them (concurrent posts land in whatever order they finish).
	for i, t := range admitted {
		if t != nil {
			results[i] = m.post(ctx, t)
		}
	}
	m.traceStarted(c, admitted, results)
	return tools.StartResult{Results: results, Notify: notify, Delivery: delivery(notify, results)}, nil
}

// admit decides every task in order and journals the admitted ones as reserved. The
// lock is held across the decision and the journal write so two concurrent calls can
// not both take the last slot of a room.
func (m *Manager) admit(c tools.Caller, specs []tools.TaskSpec, notify string, results []tools.TaskResult) ([]*Task, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	depth := c.Kind == tools.TaskAssignee
	if t, ok := m.byThread[c.Thread]; ok && c.Thread != "" && t.Room == c.Room {
		depth = true
	}
	open := m.openInRoomLocked(c.Room)
	admitted := make([]*Task, len(specs))
	var reserve []*Task
	now := m.opts.Now().UTC()
	for i, s := range specs {
		results[i].Agent = s.Agent
		// "workstation.name" is this daemon's agent only for its own
		// workstation; another's is no agent of this daemon (unknown_agent).
		name := s.Agent
		if ws, n := config.SplitAddress(s.Agent); ws != "" && ws == m.opts.Workstation {
			name = n
		}
		user, rooms, known := m.opts.Agents(name)
		remote := false
		if !known && m.opts.OtherAgent != nil {
			// Another daemon's agent in this room: the task goes through the
			// room, run by its daemon (Remote).
			if u, canonical, ok := m.opts.OtherAgent(c.Room, s.Agent); ok {
				user, rooms, known, remote, name = u, []id.RoomID{c.Room}, true, true, canonical
			}
		}
		switch {
		case depth:
			results[i].Status, results[i].Reason = tools.TaskRefused, tools.ReasonDepthLimit
		case !known:
			results[i].Status, results[i].Reason = tools.TaskRefused, tools.ReasonUnknownAgent
		case !slices.Contains(rooms, c.Room):
			results[i].Status, results[i].Reason = tools.TaskRefused, tools.ReasonNotInRoom
		case name == c.Agent:
			results[i].Status, results[i].Reason = tools.TaskRefused, tools.ReasonSelf
		case open >= m.opts.MaxOpenPerRoom:
			results[i].Status, results[i].Reason = tools.TaskRefused, tools.ReasonAtCapacity
		default:
			t := &Task{
				AttemptID: newAttemptID(),
				Agent:     name,
				AgentUser: user,
				Room:      c.Room,
				Prompt:    s.Prompt,
				Notify:    notify,
				Parent: Parent{
					Agent:      c.Agent,
					UserID:     c.UserID,
					Room:       c.Room,
					ThreadRoot: c.Thread,
					SessionKey: c.SessionKey,
				},
				State:   StateReserved,
				Created: now,
				Remote:  remote,
			}
			admitted[i] = t
			reserve = append(reserve, t)
			open++
		}
	}
	if err := m.j.put(reserve...); err != nil {
		return nil, fmt.Errorf("reserving tasks: %w", err)
	}
	for _, t := range reserve {
		m.tasks[t.AttemptID] = t
	}
	return admitted, nil
}

func (m *Manager) openInRoomLocked(room id.RoomID) int {
	n := 0
	for _, t := range m.tasks {
		if t.Room == room && t.IsOpen() {
			n++
		}
	}
	return n
}

// post sends the root of t (one retry, same txn id) and records the outcome.
func (m *Manager) post(ctx context.Context, t *Task) tools.TaskResult {
	fl := &inflight{done: make(chan struct{})}
	m.mu.Lock()
	snap := t.clone()
	m.posting[snap.AttemptID] = fl
	m.mu.Unlock()
	// Whatever the outcome, it is journaled before this returns: only then
	// may a TaskForRoot waiting on the same root go on.
	defer func() {
		m.mu.Lock()
		delete(m.posting, snap.AttemptID)
		m.mu.Unlock()
		close(fl.done)
	}()
	content := rootOf(snap)
	// The post outlives a caller that hangs up: the reservation must end decided.
	ctx = context.WithoutCancel(ctx)
	evID, err := m.send(ctx, snap.Parent.UserID, snap.Room, event.EventMessage, content, snap.AttemptID)
	if err != nil {
		m.mu.Lock()
		seen := fl.root
		m.mu.Unlock()
		if seen != "" {
			// The root came back although the answers to its post were lost.
			m.log.Warn("task root landed though its post failed", "attempt", snap.AttemptID, "thread", seen, "err", err)
			evID, err = seen, nil
		}
	}
	if err != nil {
		m.log.Error("posting task root failed", "attempt", snap.AttemptID, "agent", snap.Agent, "room", snap.Room, "err", err)
		_, uerr := m.update(snap.AttemptID, func(t *Task) error {
			m.closeLocked(t, &Result{Status: StatusFailed, Reason: ReasonPostFailed, Error: err.Error()}, m.opts.Now().UTC())
			// The caller learns it from this result; there is no thread to post in.
			t.Report = Report{Done: true}
			return nil
		})
		if uerr != nil {
			m.log.Error("journaling failed task post", "attempt", snap.AttemptID, "err", uerr)
		}
		return tools.TaskResult{Agent: snap.Agent, Status: tools.TaskFailed, Reason: ReasonPostFailed}
	}
	faultpoint.Reach(faultpoint.TaskRootPosted)
	done, uerr := m.update(snap.AttemptID, func(t *Task) error {
		if t.ThreadID == "" {
			t.ThreadID = evID
		}
		if t.State == StateReserved {
			t.State = StateOpen
		}
		return nil
	})
	m.pokeWatch()
	if uerr == nil && done.ThreadID != evID {
		// Another root was bound first; the two can only differ if the
		// homeserver ignored the txn id. The first root is the thread.
		m.log.Warn("task root posted twice", "attempt", snap.AttemptID, "thread", done.ThreadID, "second", evID)
		evID = done.ThreadID
	}
	if uerr != nil {
		// The thread exists, so the task started; the journal still says reserved,
		// which a restart treats as an uncertain post (see Recover).
		m.log.Error("journaling task thread", "attempt", snap.AttemptID, "thread", evID, "err", uerr)
		m.mu.Lock()
		if t.ThreadID == "" {
			t.ThreadID, t.State = evID, StateOpen
			m.byThread[evID] = t
		}
		m.mu.Unlock()
	}
	m.log.Info("task thread started", "attempt", snap.AttemptID, "agent", snap.Agent, "room", snap.Room, "thread", evID, "caller", snap.Parent.Agent)
	return tools.TaskResult{Agent: snap.Agent, Status: tools.TaskStarted, ThreadID: evID}
}

// inflight is a root post under way: TaskForRoot notes the root it met and
// waits for done, closed once post has journaled the outcome.
type inflight struct {
	done chan struct{}
	root id.EventID // guarded by Manager.mu
}

// send posts with the attempt's txn id and retries once with the same txn id, so a
// post whose response was lost cannot land twice.
func (m *Manager) send(ctx context.Context, as id.UserID, room id.RoomID, typ event.Type, content any, txn string) (id.EventID, error) {
	var err error
	for try := 0; try < 2; try++ {
		var evID id.EventID
		actx, cancel := context.WithTimeout(ctx, m.opts.PostTimeout)
		evID, err = m.opts.Send(actx, as, room, typ, content, txn)
		cancel()
		if err == nil {
			return evID, nil
		}
	}
	return "", fmt.Errorf("sending %s as %s in %s (txn %s, twice): %w", typ.Type, as, room, txn, err)
}

// mentioning is a message to user: its plain body (the user id, then text) and
// its HTML, a matrix.to pill and the text with its line breaks kept. A task
// root and a handoff notice both address their agent this way.
func mentioning(user id.UserID, text string) (body, formatted string) {
	u := html.EscapeString(string(user))
	return fmt.Sprintf("%s %s", user, text),
		fmt.Sprintf(`<a href="https://matrix.to/#/%s">%s</a> %s`, u, u, strings.ReplaceAll(html.EscapeString(text), "\n", "<br/>"))
}

func rootOf(t Task) zevent.TaskRootContent {
	body, formatted := mentioning(t.AgentUser, t.Prompt)
	return zevent.TaskRootContent{
		MsgType:       event.MsgText,
		Body:          body,
		Format:        event.FormatHTML,
		FormattedBody: formatted,
		Mentions:      &event.Mentions{UserIDs: []id.UserID{t.AgentUser}},
		ThreadStart: zevent.ThreadStart{
			Version:   zevent.ThreadStartVersion,
			Assignee:  t.Agent,
			AttemptID: t.AttemptID,
			Parent: zevent.ThreadStartParent{
				Agent:      t.Parent.Agent,
				ThreadRoot: t.Parent.ThreadRoot,
				SessionKey: t.Parent.SessionKey,
			},
			Notify: t.Notify,
		},
	}
}

// delivery is the sentence telling the model, at the point of decision, what comes
// back to it.
func delivery(notify string, results []tools.TaskResult) string {
	started := 0
	for _, r := range results {
		if r.Status == tools.TaskStarted {
			started++
		}
	}
	if started == 0 {
		return "No task thread was started, so nothing will come back to you; see each result's reason."
	}
	if notify == tools.NotifyNone {
		return fmt.Sprintf("%d task thread(s) started with notify none: nothing comes back to you; each thread is the result (read it with zooid_get_thread_history when you need it).", started)
	}
	return fmt.Sprintf("%d task thread(s) started: each result comes back to you as a new turn when its task ends. End your turn now and do not poll or wait for them.", started)
}

// newAttemptID is a fresh attempt id: the journal key of a task and the txn id
// of its root, so it is unique per attempt and a valid Matrix txn id.
func newAttemptID() string {
	return "zt" + rand.Text()
}
