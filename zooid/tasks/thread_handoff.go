package tasks

import (
	"context"
	"crypto/rand"
	"fmt"
	"slices"
	"strings"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/internal/faultpoint"
	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/tools"
	"github.com/zooid-dev/zooid/zooid/trace"
	"github.com/zooid-dev/zooid/zooid/zevent"
)

// HandoffState is where a zooid_handoff is in its life.
type HandoffState string

const (
	// HandoffReserved is journaled, its notice in flight: a crash leaves its
	// post uncertain, and Recover finishes it with the same txn id.
	HandoffReserved HandoffState = "reserved"
	// HandoffRunning is posted: the callee works in its own session of the thread.
	HandoffRunning HandoffState = "running"
	// HandoffReturned is over (the callee done, the post failed, or a restart
	// interrupted it): the return is owed to the caller until Woken.
	HandoffReturned HandoffState = "returned"
)

// Reasons a handoff's return carries, besides the callee's own words.
const (
	// ReasonEndedWithoutReply: the callee's last turn ended with no prose.
	ReasonEndedWithoutReply = "ended_without_reply"
	// ReasonCircularHandoff refuses a handoff to an agent that is itself
	// waiting, up the chain, on the caller: neither could ever be done.
	ReasonCircularHandoff = "circular_handoff"
	// ReasonHandoffTimedOut: a handoff to another daemon's agent had no
	// return within task_timeout (Options.Timeout); a return after that is
	// ignored.
	ReasonHandoffTimedOut = "timed_out"
)

// ThreadHandoff is one zooid_handoff as journaled (in the task journal's
// handoffs bucket): From handed Prompt to To in one thread, and is owed one
// return. Values handed out are copies.
type ThreadHandoff struct {
	// ID names the handoff: the journal key and the Matrix txn id of its notice.
	ID       string    `json:"id"`
	From     string    `json:"from"`
	FromUser id.UserID `json:"from_user"`
	To       string    `json:"to"`
	ToUser   id.UserID `json:"to_user"`
	Room     id.RoomID `json:"room"`
	// Thread is the thread root both sessions live in.
	Thread id.EventID `json:"thread"`
	// SessionKey is the daemon's key of the caller's session.
	SessionKey string       `json:"session_key"`
	Prompt     string       `json:"prompt"`
	State      HandoffState `json:"state"`
	// Mentioned: the callee was @mentioned in a callee's prose (that prose is
	// the handoff's post), not handed off with the tool.
	Mentioned bool `json:"mentioned,omitempty"`
	// Remote: the callee is another daemon's agent in the room (To its
	// canonical address). Its daemon runs it; the return comes back as its
	// dev.zooid.handoff_return in the thread (RemoteHandoffReturn), so a
	// restart here keeps it running.
	Remote bool `json:"remote,omitempty"`
	// Adopted: the caller is another daemon's agent (FromUser) and this
	// daemon runs the callee; the return is posted in the thread as the
	// callee (deliverReturn), not woken here.
	Adopted bool `json:"adopted,omitempty"`
	// EventID is the posted notice, once known.
	EventID id.EventID `json:"event_id,omitempty"`
	// Output is the callee's final message; Reason says why there is none, or
	// why it is not an answer (ReasonEndedWithoutReply, ReasonAgentError,
	// ReasonInterruptedByRestart, ReasonPostFailed).
	Output string `json:"output,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Error is why the callee's last turn failed (Reason ReasonAgentError).
	Error string `json:"error,omitempty"`
	// Woken: the caller's session took the return (or never will: its thread
	// was cleared). Once set, the handoff is over for good.
	Woken    bool      `json:"woken,omitempty"`
	Created  time.Time `json:"created"`
	Returned time.Time `json:"returned,omitzero"`
}

// outstanding says the caller has not taken this handoff's return yet.
func (h *ThreadHandoff) outstanding() bool { return !h.Woken }

// parent is the caller's session, where the return is delivered.
func (h *ThreadHandoff) parent() Parent {
	return Parent{Agent: h.From, UserID: h.FromUser, Room: h.Room, ThreadRoot: h.Thread, SessionKey: h.SessionKey}
}

// ReturnText is the prompt of the caller's wake: "[handoff return] from <agent>"
// and the callee's final message, or why there is none.
func (h ThreadHandoff) ReturnText() string {
	head := "[handoff return] from " + h.To
	switch h.Reason {
	case "":
		return head + "\n\n" + h.Output
	case ReasonEndedWithoutReply:
		return head + ": it ended its turn without a reply."
	case ReasonInterruptedByRestart:
		return head + ": the daemon restarted while " + h.To + " was working on it, so its turn was interrupted (interrupted_by_restart). Read this thread to see how far it got."
	case ReasonHandoffTimedOut:
		return head + ": no return came within the task timeout, so the handoff is over (timed_out); " + h.To + "'s daemon may be down, and a return it posts later is not delivered. Read this thread to see how far it got."
	case ReasonPostFailed:
		return head + ": the handoff could not be posted, so " + h.To + " never started (post_failed)."
	case ReasonAgentError:
		out := head + ": its turn failed (agent_error): " + h.Error
		if h.Output != "" {
			out += "\n\nIts last message before that:\n\n" + h.Output
		}
		return out
	default:
		return head + " (" + h.Reason + ")"
	}
}

// Handoff runs zooid_handoff for caller c: refusals (self, unknown_agent,
// not_in_room, already_open, circular_handoff) are results; an admitted
// handoff is journaled reserved, posted in the caller's thread as the caller
// mentioning the callee (txn id = its id), journaled running, and handed to
// Options.StartCallee, which runs the callee in its own session of the thread.
func (m *Manager) Handoff(ctx context.Context, c tools.Caller, req tools.HandoffRequest) (tools.HandoffResult, error) {
	if !m.enter() {
		return tools.HandoffResult{}, tools.Errorf(tools.CodeUnavailable, "handoffs are shutting down")
	}
	defer m.wg.Done()
	if c.Thread == "" {
		return tools.HandoffResult{}, tools.Errorf(tools.CodeUnavailable, "this session has no thread to hand off in")
	}
	h, reason, err := m.admitHandoff(c.Agent, c.UserID, c.Room, c.Thread, c.SessionKey, req.Agent, req.Prompt, false)
	if err != nil {
		return tools.HandoffResult{}, err
	}
	if reason != "" {
		m.log.Info("handoff refused", "from", c.Agent, "to", req.Agent, "thread", c.Thread, "reason", reason)
		m.opts.Trace.Record(trace.Record{Kind: trace.KindTask, Room: c.Room, Session: c.SessionKey, Task: &trace.TaskStep{
			Step: trace.StepHandoffRefused, Agent: req.Agent, Caller: c.Agent, Thread: c.Thread, Reason: reason}})
		return tools.HandoffResult{Status: tools.HandoffRefused, Reason: reason}, nil
	}
	evID, ok := m.postHandoff(ctx, h.ID)
	if !ok {
		return tools.HandoffResult{Status: tools.HandoffRefused, Reason: ReasonPostFailed}, nil
	}
	return tools.HandoffResult{
		Status:  tools.HandoffStarted,
		EventID: evID,
		Delivery: fmt.Sprintf("%s works on it now in its own session of this thread. End your turn now and do not poll: "+
			"when %s is done you are woken once, in this session, with \"[handoff return] from %s\" and its final message.", h.To, h.To, h.To),
	}, nil
}

// MentionHandoff records that callee from, itself working on a handoff in
// thread, @mentioned to in prose it is posting: from is not done until to is.
// The prose is the handoff's post, so it is journaled running at once. False
// when it is no handoff (from is no callee here, to is from or up its chain,
// unknown or not in the room, or from already waits on another).
func (m *Manager) MentionHandoff(room id.RoomID, thread id.EventID, from, to, text string) (ThreadHandoff, bool) {
	if !m.enter() {
		return ThreadHandoff{}, false
	}
	defer m.wg.Done()
	m.mu.Lock()
	callee := m.calleeLocked(room, thread, from)
	m.mu.Unlock()
	if callee == nil {
		return ThreadHandoff{}, false
	}
	fromUser, _, _ := m.opts.Agents(from)
	h, reason, err := m.admitHandoff(from, fromUser, room, thread, "", to, text, true)
	if err != nil {
		m.log.Error("journaling a mentioned handoff", "from", from, "to", to, "thread", thread, "err", err)
		return ThreadHandoff{}, false
	}
	if reason != "" {
		return ThreadHandoff{}, false
	}
	m.log.Info("handoff started by a mention", "id", h.ID, "from", from, "to", to, "thread", thread)
	m.opts.Trace.Record(handoffStep(h, trace.StepHandoffStarted))
	return h, true
}

// admitHandoff decides a handoff and journals the admitted one: reserved, or
// running when mentioned (its post is the prose being sent). The lock is held
// across the decision and the write, so two calls of one session can't both
// pass already_open.
func (m *Manager) admitHandoff(from string, fromUser id.UserID, room id.RoomID, thread id.EventID, sessionKey, to, prompt string, mentioned bool) (ThreadHandoff, string, error) {
	// As for tasks: "workstation.name" is this daemon's agent only for its
	// own workstation; another daemon's agent in the room is Remote.
	if ws, n := config.SplitAddress(to); ws != "" && ws == m.opts.Workstation {
		to = n
	}
	toUser, rooms, known := m.opts.Agents(to)
	remote := false
	if !known && !mentioned && m.opts.OtherAgent != nil {
		if u, canonical, ok := m.opts.OtherAgent(room, to); ok {
			toUser, rooms, known, remote, to = u, []id.RoomID{room}, true, true, canonical
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	switch {
	case to == from:
		return ThreadHandoff{}, tools.ReasonSelf, nil
	case !known:
		return ThreadHandoff{}, tools.ReasonUnknownAgent, nil
	case !slices.Contains(rooms, room):
		return ThreadHandoff{}, tools.ReasonNotInRoom, nil
	case m.outstandingFromLocked(room, thread, from) != nil:
		return ThreadHandoff{}, tools.ReasonAlreadyOpen, nil
	case m.upChainLocked(room, thread, from, to):
		return ThreadHandoff{}, ReasonCircularHandoff, nil
	}
	if m.closed {
		return ThreadHandoff{}, "", ErrClosed
	}
	h := &ThreadHandoff{
		ID: "zh" + rand.Text(), From: from, FromUser: fromUser, To: to, ToUser: toUser,
		Room: room, Thread: thread, SessionKey: sessionKey, Prompt: prompt,
		State: HandoffReserved, Mentioned: mentioned, Remote: remote, Created: m.opts.Now().UTC(),
	}
	if mentioned {
		h.State = HandoffRunning
	}
	if err := m.j.putHandoff(h); err != nil {
		return ThreadHandoff{}, "", fmt.Errorf("reserving handoff %s → %s: %w", from, to, err)
	}
	m.handoffs[h.ID] = h
	return *h, "", nil
}

// outstandingFromLocked is the handoff of from's session in thread whose
// return from has not taken yet, if any.
func (m *Manager) outstandingFromLocked(room id.RoomID, thread id.EventID, from string) *ThreadHandoff {
	for _, h := range m.handoffs {
		if h.Room == room && h.Thread == thread && h.From == from && h.outstanding() {
			return h
		}
	}
	return nil
}

// calleeLocked is the running handoff whose callee is agent in thread, if any.
func (m *Manager) calleeLocked(room id.RoomID, thread id.EventID, agent string) *ThreadHandoff {
	for _, h := range m.handoffs {
		if h.Room == room && h.Thread == thread && h.To == agent && h.State == HandoffRunning {
			return h
		}
	}
	return nil
}

// upChainLocked says whether to is from, or handed off (transitively) to from
// in thread: from is then waited on by to, and to waiting on from would leave
// both waiting forever.
func (m *Manager) upChainLocked(room id.RoomID, thread id.EventID, from, to string) bool {
	seen := map[string]bool{}
	for cur := from; !seen[cur]; {
		seen[cur] = true
		h := m.calleeLocked(room, thread, cur)
		if h == nil {
			return false
		}
		if h.From == to {
			return true
		}
		cur = h.From
	}
	return false
}

// HandoffOutstanding says whether agent's session in thread waits on a
// handoff's return: it may not complete its task, its turn ends are not judged
// as done, and as a callee it is not done itself.
func (m *Manager) HandoffOutstanding(room id.RoomID, thread id.EventID, agent string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.outstandingFromLocked(room, thread, agent) != nil
}

// CalleeOf returns the running handoffs agent works on in thread, oldest
// first: two agents may hand off to the same one, whose one session answers both.
func (m *Manager) CalleeOf(room id.RoomID, thread id.EventID, agent string) []ThreadHandoff {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []ThreadHandoff
	for _, h := range m.handoffs {
		if h.Room == room && h.Thread == thread && h.To == agent && h.State == HandoffRunning {
			out = append(out, *h)
		}
	}
	slices.SortFunc(out, func(a, b ThreadHandoff) int { return a.Created.Compare(b.Created) })
	return out
}

// IsHandoffCallee says whether agent runs in thread for a running handoff.
func (m *Manager) IsHandoffCallee(room id.RoomID, thread id.EventID, agent string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calleeLocked(room, thread, agent) != nil
}

// postHandoff posts a reserved handoff's notice (one retry, same txn id),
// journals it running and starts the callee. A post that fails returns the
// handoff post_failed, already taken (the caller reads it in the tool result).
func (m *Manager) postHandoff(ctx context.Context, hid string) (id.EventID, bool) {
	snap, ok := m.handoffSnapshot(hid)
	if !ok {
		return "", false
	}
	ctx = context.WithoutCancel(ctx)
	evID, err := m.send(ctx, snap.FromUser, snap.Room, event.EventMessage, handoffContent(snap), snap.ID)
	if err != nil {
		m.log.Error("posting handoff failed", "id", hid, "from", snap.From, "to", snap.To, "err", err)
		if _, uerr := m.updateHandoff(hid, func(h *ThreadHandoff) {
			h.State, h.Reason, h.Woken, h.Returned = HandoffReturned, ReasonPostFailed, true, m.opts.Now().UTC()
		}); uerr != nil {
			m.log.Error("journaling a failed handoff post", "id", hid, "err", uerr)
		}
		return "", false
	}
	faultpoint.Reach(faultpoint.HandoffPosted)
	h, err := m.updateHandoff(hid, func(h *ThreadHandoff) {
		h.EventID = evID
		if h.State == HandoffReserved {
			h.State = HandoffRunning
		}
	})
	if err != nil {
		// The callee is not started: the journal still says reserved, which
		// the next start finishes (the same txn id answers with this event).
		m.log.Error("journaling handoff posted", "id", hid, "err", err)
		return evID, true
	}
	m.log.Info("handoff started", "id", hid, "from", h.From, "to", h.To, "thread", h.Thread, "event", evID)
	m.opts.Trace.Record(handoffStep(h, trace.StepHandoffStarted))
	if h.Remote {
		// Its return rests on another daemon: Watch bounds the wait.
		m.pokeWatch()
	}
	if m.opts.StartCallee != nil && !h.Remote {
		m.opts.StartCallee(h)
	}
	return evID, true
}

// handoffContent is the notice of a handoff: the prompt mentioning the callee,
// in the caller's thread.
func handoffContent(h ThreadHandoff) zevent.HandoffContent {
	body, formatted := mentioning(h.ToUser, h.Prompt)
	return zevent.HandoffContent{
		MsgType:       event.MsgNotice,
		Body:          body,
		Format:        event.FormatHTML,
		FormattedBody: formatted,
		Mentions:      &event.Mentions{UserIDs: []id.UserID{h.ToUser}},
		RelatesTo:     zevent.ThreadReply(h.Thread, h.Thread),
		Handoff:       zevent.Handoff{Version: zevent.HandoffVersion, ID: h.ID, From: h.From, To: h.To},
	}
}

// CalleeDone records that the callee of handoff hid is really done (its turn
// ended, nothing queued for it, no handoff of its own outstanding) with its
// final message, journals the return, and wakes the caller with it, once.
// turnErr is why its last turn failed (a crash, a timeout), nil when it ended.
func (m *Manager) CalleeDone(hid, final string, turnErr error) error {
	if !m.enter() {
		return ErrClosed
	}
	defer m.wg.Done()
	final = strings.TrimSpace(final)
	returned := false
	if _, err := m.updateHandoff(hid, func(h *ThreadHandoff) {
		if h.State != HandoffRunning {
			return
		}
		returned = true
		h.State, h.Output, h.Returned = HandoffReturned, final, m.opts.Now().UTC()
		switch {
		case turnErr != nil:
			h.Reason, h.Error = ReasonAgentError, turnErr.Error()
		case final == "":
			h.Reason = ReasonEndedWithoutReply
		}
	}); err != nil {
		return fmt.Errorf("returning handoff %s: %w", hid, err)
	}
	if !returned {
		return nil
	}
	faultpoint.Reach(faultpoint.HandoffReturned)
	if h, ok := m.handoffSnapshot(hid); ok {
		m.opts.Trace.Record(handoffStep(h, trace.StepHandoffReturned))
	}
	m.wakeHandoffCaller(hid, false)
	return nil
}

// handoffStep is the trace record of one step of h; it belongs to the
// thread, not to a session, as a task's closing steps do.
func handoffStep(h ThreadHandoff, step string) trace.Record {
	return trace.Record{Kind: trace.KindTask, Room: h.Room, Task: &trace.TaskStep{
		Step: step, Agent: h.To, Caller: h.From, Thread: h.Thread, Attempt: h.ID, Reason: h.Reason, Output: h.Output}}
}

// wakeHandoffCaller queues the return on the caller's session, once per
// process; it counts as delivered (journaled Woken) only when the session
// takes it, so a restart before then wakes the caller again. An adopted
// handoff's return is posted in its thread instead, on its own goroutine, or
// before this returns when wait is set (at start-up, so it is posted before
// the intake opens).
func (m *Manager) wakeHandoffCaller(hid string, wait bool) {
	m.mu.Lock()
	h, ok := m.handoffs[hid]
	if !ok || h.State != HandoffReturned || h.Woken || m.handoffWakeQueued[hid] || h.Adopted && m.closing {
		m.mu.Unlock()
		return
	}
	m.handoffWakeQueued[hid] = true
	snap := *h
	if snap.Adopted {
		// Close waits for the post; the next start posts it if it fails.
		m.wg.Add(1)
	}
	m.mu.Unlock()
	taken := func() {
		m.mu.Lock()
		delete(m.handoffWakeQueued, hid)
		m.mu.Unlock()
		h, err := m.updateHandoff(hid, func(h *ThreadHandoff) { h.Woken = true })
		if err != nil {
			m.log.Error("journaling a handoff's return taken", "id", hid, "err", err)
			return
		}
		m.opts.Trace.Record(handoffStep(h, trace.StepHandoffWoken))
		m.log.Info("handoff returned", "id", hid, "from", snap.From, "to", snap.To, "thread", snap.Thread, "reason", snap.Reason)
	}
	if snap.Adopted {
		deliver := func() {
			defer m.wg.Done()
			m.deliverReturn(snap, taken)
		}
		if wait {
			deliver()
		} else {
			go deliver()
		}
		return
	}
	if m.opts.Wake == nil {
		taken()
		return
	}
	m.opts.Wake(snap.parent(), snap.ReturnText(), taken)
}

// RecoverHandoffs is Recover's part for handoffs, which the daemon runs before
// its intake opens, so every return a restart owes is queued on its caller's
// session before any new message reaches that session; Recover runs it too,
// and only the first call does anything.
func (m *Manager) RecoverHandoffs(ctx context.Context) error {
	if !m.enter() {
		return ErrClosed
	}
	defer m.wg.Done()
	m.recoverHandoffs(ctx)
	return nil
}

// recoverHandoffs is RecoverHandoffs: a running one was cut short
// (the callee's turn is not re-run), so it returns interrupted_by_restart; a
// reserved one woke nobody, so its post is finished with the same txn id and
// its callee runs (older than RepostWithin: interrupted instead, as a repost
// might double it); a return not yet taken is delivered again.
func (m *Manager) recoverHandoffs(ctx context.Context) {
	m.mu.Lock()
	if m.handoffsRecovered {
		m.mu.Unlock()
		return
	}
	m.handoffsRecovered = true
	now := m.opts.Now().UTC()
	var repost, wake []string
	for _, h := range m.handoffs {
		switch {
		case h.State == HandoffReserved && now.Sub(h.Created) < RepostWithin:
			repost = append(repost, h.ID)
			continue
		case h.State == HandoffRunning && h.Remote:
			// Its callee runs on its own daemon, which posts the return
			// when it comes (or interrupted_by_restart, if that one restarted);
			// Watch returns it timed_out if none comes within Options.Timeout.
			continue
		case h.State == HandoffReserved, h.State == HandoffRunning:
			prev := *h
			h.State, h.Reason, h.Returned = HandoffReturned, ReasonInterruptedByRestart, now
			if err := m.j.putHandoff(h); err != nil {
				*h = prev
				m.log.Error("returning a handoff interrupted by restart", "id", h.ID, "err", err)
				continue
			}
		}
		if h.State == HandoffReturned && !h.Woken {
			wake = append(wake, h.ID)
		}
	}
	m.mu.Unlock()
	slices.Sort(wake)
	for _, hid := range wake {
		m.wakeHandoffCaller(hid, true)
	}
	for _, hid := range repost {
		if _, ok := m.postHandoff(ctx, hid); !ok {
			// Its tool call never returned: the caller hears of the failure
			// as a return.
			if _, err := m.updateHandoff(hid, func(h *ThreadHandoff) { h.Woken = false }); err == nil {
				m.wakeHandoffCaller(hid, false)
			}
		}
	}
}

// HandoffThreadCleared records that a /clear ended the sessions of a thread:
// returns owed there will not wake the new sessions.
func (m *Manager) HandoffThreadCleared(room id.RoomID, thread id.EventID) {
	m.mu.Lock()
	var ids []string
	for _, h := range m.handoffs {
		if h.Room == room && h.Thread == thread && !h.Woken {
			ids = append(ids, h.ID)
		}
	}
	m.mu.Unlock()
	for _, hid := range ids {
		if _, err := m.updateHandoff(hid, func(h *ThreadHandoff) {
			if h.State != HandoffReturned {
				h.State, h.Reason, h.Returned = HandoffReturned, ReasonTurnCancelled, m.opts.Now().UTC()
			}
			h.Woken = true
		}); err != nil {
			m.log.Error("journaling a handoff of a cleared thread", "id", hid, "err", err)
		}
	}
}

func (m *Manager) handoffSnapshot(hid string) (ThreadHandoff, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h, ok := m.handoffs[hid]
	if !ok {
		return ThreadHandoff{}, false
	}
	return *h, true
}

// updateHandoff applies f under the lock and journals it; on a journal error
// the record in memory is restored, so memory never runs ahead of the disk.
func (m *Manager) updateHandoff(hid string, f func(h *ThreadHandoff)) (ThreadHandoff, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ThreadHandoff{}, ErrClosed
	}
	h, ok := m.handoffs[hid]
	if !ok {
		return ThreadHandoff{}, fmt.Errorf("handoff %s: not found", hid)
	}
	prev := *h
	f(h)
	if err := m.j.putHandoff(h); err != nil {
		*h = prev
		return ThreadHandoff{}, fmt.Errorf("journaling handoff %s: %w", hid, err)
	}
	return *h, nil
}

// Handoffs across daemons (behaviour.md §9): the caller's daemon posts the
// notice as for any handoff, mentioning another daemon's agent (Remote); that
// daemon adopts the notice (AdoptHandoff), runs the callee in its own session
// of the thread and, when the callee is really done, posts the return in the
// thread as the callee (deliverReturn); the caller's daemon takes it only from
// the callee's user (RemoteHandoffReturn) and wakes the caller once. Each
// side's journal makes its part happen once across its restarts.

// AdoptHandoff journals, once by its id, the handoff another daemon's agent
// (sender) posted in thread for this daemon's agent callee (user): running,
// its return owed to the thread. It reports whether the handoff is new here:
// a notice met again (redelivered, or after a restart) starts nothing.
func (m *Manager) AdoptHandoff(room id.RoomID, thread, notice id.EventID, sender id.UserID, hz zevent.Handoff, callee string, user id.UserID, prompt string) (ThreadHandoff, bool) {
	if hz.ID == "" || thread == "" || !m.enter() {
		return ThreadHandoff{}, false
	}
	defer m.wg.Done()
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.handoffs[hz.ID]; ok {
		return ThreadHandoff{}, false
	}
	h := &ThreadHandoff{
		ID: hz.ID, From: hz.From, FromUser: sender, To: callee, ToUser: user,
		Room: room, Thread: thread, Prompt: prompt, State: HandoffRunning,
		Adopted: true, EventID: notice, Created: m.opts.Now().UTC(),
	}
	faultpoint.Reach(faultpoint.HandoffAdopting)
	if err := m.j.putHandoff(h); err != nil {
		m.log.Error("journaling an adopted handoff", "id", h.ID, "thread", thread, "err", err)
		return ThreadHandoff{}, false
	}
	m.handoffs[h.ID] = h
	m.log.Info("handoff of another daemon's agent adopted", "id", h.ID, "from", sender, "to", callee, "thread", thread)
	faultpoint.Reach(faultpoint.HandoffAdopted)
	m.opts.Trace.Record(handoffStep(*h, trace.StepHandoffStarted))
	return *h, true
}

// deliverReturn posts an adopted handoff's return in its thread as the callee
// (txn id from the handoff's id, so a repost after a restart lands once) and
// calls taken once it is posted. A failed post stays owed: the next start
// posts it again.
func (m *Manager) deliverReturn(h ThreadHandoff, taken func()) {
	// Close stops a post in flight (it stays owed), and this goroutine ends
	// with the post.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-m.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	addr := h.To
	if m.opts.Workstation != "" {
		addr = m.opts.Workstation + "." + h.To
	}
	body := fmt.Sprintf("[handoff return] from %s to %s", addr, h.From)
	if h.Reason != "" {
		body += " (" + h.Reason + ")"
	}
	content := zevent.HandoffReturnContent{
		MsgType: event.MsgNotice, Body: body, Mentions: &event.Mentions{},
		RelatesTo: zevent.ThreadReply(h.Thread, h.Thread),
		Return: zevent.HandoffReturn{
			Version: zevent.HandoffVersion, ID: h.ID, From: h.From, To: addr,
			Output: h.Output, Reason: h.Reason, Error: h.Error,
		},
	}
	if _, err := m.send(ctx, h.ToUser, h.Room, event.EventMessage, content, "zr"+h.ID); err != nil {
		m.log.Error("posting a handoff's return; the next start posts it", "id", h.ID, "thread", h.Thread, "err", err)
		m.mu.Lock()
		delete(m.handoffWakeQueued, h.ID)
		m.mu.Unlock()
		return
	}
	faultpoint.Reach(faultpoint.HandoffReturnPosted)
	taken()
}

// RemoteHandoffReturn returns the Remote handoff r names with the return its
// callee's daemon posted in thread (room, thread) as the callee (sender), and
// wakes the caller. An event of anyone else, for a handoff that is not Remote
// or has returned already (a redelivery), changes nothing: the caller is
// woken once.
func (m *Manager) RemoteHandoffReturn(room id.RoomID, thread id.EventID, sender id.UserID, r zevent.HandoffReturn) error {
	if !m.enter() {
		return ErrClosed
	}
	defer m.wg.Done()
	returned := false
	m.mu.Lock()
	h, ok := m.handoffs[r.ID]
	ok = ok && h.Remote && h.Room == room && h.Thread == thread && h.ToUser == sender
	late := ok && h.State == HandoffReturned && h.Reason == ReasonHandoffTimedOut
	ok = ok && (h.State == HandoffRunning || h.State == HandoffReserved)
	m.mu.Unlock()
	if late {
		m.log.Info("a handoff's return came after it timed out; ignored", "id", r.ID, "from", r.From, "to", r.To, "thread", thread, "reason", r.Reason)
	}
	if !ok {
		return nil
	}
	if _, err := m.updateHandoff(r.ID, func(h *ThreadHandoff) {
		if h.State != HandoffRunning && h.State != HandoffReserved {
			return
		}
		returned = true
		h.State, h.Output, h.Reason, h.Error, h.Returned = HandoffReturned, strings.TrimSpace(r.Output), r.Reason, r.Error, m.opts.Now().UTC()
	}); err != nil {
		return fmt.Errorf("returning remote handoff %s: %w", r.ID, err)
	}
	if !returned {
		return nil
	}
	if snap, ok := m.handoffSnapshot(r.ID); ok {
		m.opts.Trace.Record(handoffStep(snap, trace.StepHandoffReturned))
	}
	m.wakeHandoffCaller(r.ID, false)
	return nil
}
