package tasks

import (
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/zevent"
)

// State is where a task is in its life.
type State string

const (
	// StateReserved is a task admitted and journaled whose root post is not yet
	// confirmed: it counts against the room's capacity but has no thread yet.
	StateReserved State = "reserved"
	// StateOpen is a task whose root is posted: its thread id is known and the
	// assignee works in it.
	StateOpen State = "open"
	// StateClosed is a judged task: its Result is recorded; Report says how much of
	// it has been delivered.
	StateClosed State = "closed"
)

// Result statuses of a closed task (the status of dev.zooid.thread_result).
const (
	StatusComplete  = "complete"
	StatusPartial   = "partial"
	StatusFailed    = "failed"
	StatusCancelled = "cancelled"
	// StatusTimedOut closes a task still open after Options.Timeout
	// (task_timeout): typically one whose assignee waits on a person who never
	// answered. Its output is what the assignee last said or recorded.
	StatusTimedOut = "timed_out"
)

// Reasons a closed task carries, and refusals of zooid_complete_task.
const (
	// ReasonInterruptedByRestart closes tasks found open when the daemon starts.
	ReasonInterruptedByRestart = "interrupted_by_restart"
	// ReasonNoResult fails a turn that ended with neither a summary nor prose.
	ReasonNoResult = "no_result"
	// ReasonAgentError fails a turn that ended in an error.
	ReasonAgentError = "agent_error"
	// ReasonTurnCancelled closes a task whose assignee turn was cancelled.
	ReasonTurnCancelled = "turn_cancelled"
	// ReasonRefusal fails a task whose assignee refused to continue.
	ReasonRefusal = "refusal"
	// ReasonPostFailed fails a task whose thread root could not be posted.
	ReasonPostFailed = "post_failed"

	// ReasonEmptySummary refuses an empty zooid_complete_task summary.
	ReasonEmptySummary = "empty_summary"
	// ReasonNotAssignee refuses zooid_complete_task from a session that is not the
	// assignee of an open task.
	ReasonNotAssignee = "not_assignee_of_open_task"
	// ReasonHandoffOutstanding refuses zooid_complete_task while a handoff runs.
	ReasonHandoffOutstanding = "handoff_outstanding"
)

// Parent is the delegating side of a task: the caller agent and the session whose
// original thread receives the result.
type Parent struct {
	// Agent is the caller's zooid.yaml name.
	Agent string `json:"agent"`
	// UserID is the caller agent's Matrix user.
	UserID id.UserID `json:"user_id"`
	// Room is the caller's room (also the task thread's room).
	Room id.RoomID `json:"room"`
	// ThreadRoot is the root of the caller's own thread; empty for none.
	ThreadRoot id.EventID `json:"thread_root,omitempty"`
	// SessionKey is the daemon's key of the caller's session.
	SessionKey string `json:"session_key"`
}

// Result is a closed task's outcome, journaled and posted as it is: the content of
// dev.zooid.thread_result.
type Result = zevent.ThreadResult

// Handoff is an outstanding in-thread handoff: From mentioned To in the task thread and
// To's turn has not ended yet.
type Handoff struct {
	From    string    `json:"from"`
	To      string    `json:"to"`
	Started time.Time `json:"started"`
}

// Report records which delivery steps of a closed task are done. Each step is marked
// durably after it succeeds, so a crash repeats at most the one step in flight, and the
// Matrix steps repeat with the same transaction id.
type Report struct {
	// ResultPosted: dev.zooid.thread_result is in the task thread.
	ResultPosted bool `json:"result_posted,omitempty"`
	// NoticePosted: the notice is in the caller's thread (notify caller only).
	NoticePosted bool `json:"notice_posted,omitempty"`
	// Woken: the caller's session was woken (notify caller only), or need not
	// be because its thread was cleared.
	Woken bool `json:"woken,omitempty"`
	// CallerCleared: the caller's thread was /clear'ed before the wake was
	// taken; the result is still posted, but the cleared session is not woken.
	CallerCleared bool `json:"caller_cleared,omitempty"`
	// Done: every step that applies is done; the task is never reported again.
	Done bool `json:"done,omitempty"`
}

// Task is one delegated task as journaled. Values handed out are copies.
type Task struct {
	// AttemptID identifies the attempt; it is the Matrix txn id of the root.
	AttemptID string `json:"attempt_id"`
	// Agent is the assignee's zooid.yaml name.
	Agent string `json:"agent"`
	// AgentUser is the assignee's Matrix user.
	AgentUser id.UserID `json:"agent_user"`
	// Room is the room of the task thread (the caller's room).
	Room id.RoomID `json:"room"`
	// ThreadID is the root event of the task thread, once posted.
	ThreadID id.EventID `json:"thread_id,omitempty"`
	// Prompt is what the caller asked.
	Prompt string `json:"prompt"`
	// Notify is tools.NotifyCaller or tools.NotifyNone.
	Notify string `json:"notify"`
	// Parent is the delegating caller.
	Parent Parent `json:"parent"`
	// State is where the task is.
	State State `json:"state"`
	// Summary is the first summary recorded by zooid_complete_task.
	Summary string `json:"summary,omitempty"`
	// LastProse is the assignee's last words of a turn that left the task
	// open (a question to a person, a handoff): a task closed by no turn of
	// its own (timed out) reports them, so the caller hears what it waited on.
	LastProse string `json:"last_prose,omitempty"`
	// Handoffs are the outstanding in-thread handoffs.
	Handoffs []Handoff `json:"handoffs,omitempty"`
	// ReturnsOwed counts handoff returns to the assignee that are queued for
	// its session and not yet taken up (HandoffEnded, ReturnTaken): the
	// assignee's turn that ended while one was on its way is not its last.
	// Not journaled: a restart loses the queued turns it counts.
	ReturnsOwed int `json:"-"`
	// Result is set once closed.
	Result *Result `json:"result,omitempty"`
	// Report tracks delivery of the result.
	Report Report `json:"report"`
	// Created is when the task was admitted.
	Created time.Time `json:"created"`
	// Closed is when the task was judged.
	Closed time.Time `json:"closed,omitzero"`
	// Remote marks a task for another daemon's agent (Agent is its address,
	// workstation.name): that daemon adopts the root, runs the task and posts
	// its dev.zooid.thread_result in the thread, which closes it here
	// (RemoteResult); this daemon reports it to the caller.
	Remote bool `json:"remote,omitempty"`
	// Adopted marks a task another daemon's agent delegated to this daemon's
	// (Adopt): it runs here and is reported only in its thread, where the
	// caller's daemon reads the result.
	Adopted bool `json:"adopted,omitempty"`
}

// IsOpen reports whether the task still awaits a result (reserved or open): the
// assignee session of an open task is a tools.TaskAssignee.
func (t Task) IsOpen() bool { return t.State == StateReserved || t.State == StateOpen }

// rootUncertain says the task's root post was in flight (reserved, no thread yet):
// in a task Open found so, the post may have landed before the crash.
func (t Task) rootUncertain() bool { return t.State == StateReserved && t.ThreadID == "" }

func (t *Task) clone() Task {
	c := *t
	c.Handoffs = append([]Handoff(nil), t.Handoffs...)
	if t.Result != nil {
		r := *t.Result
		c.Result = &r
	}
	return c
}
