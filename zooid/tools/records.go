package tools

import (
	"context"
	"errors"
	"fmt"

	"maunium.net/go/mautrix/id"
)

// Message is one history entry as a model sees it.
type Message struct {
	ID     id.EventID `json:"id"`
	Sender id.UserID  `json:"sender"`
	Text   string     `json:"text"`
	// Timestamp is RFC 3339 in UTC with milliseconds always written, as
	// Matrix keeps them: 2026-01-01T09:00:01.500Z, a whole second .000Z
	// (history's TestTimestampsKeepMilliseconds).
	Timestamp string `json:"timestamp"`
	IsAgent   bool   `json:"is_agent"`
	AgentName string `json:"agent_name,omitempty"`
	// ThreadID is the thread root's event id: set on replies, and on the root
	// itself in thread history.
	ThreadID id.EventID `json:"thread_id,omitempty"`
	// Undecryptable marks a message of an encrypted room that the reading
	// agent's device holds no room key for: its Text says so instead of
	// the message, so history has no silent gap.
	Undecryptable bool `json:"undecryptable,omitempty"`
}

// ThreadOverview is a top-level message or thread root with its activity.
type ThreadOverview struct {
	Message
	ReplyCount int `json:"reply_count"`
	// LastActivityAt is the time of the latest reply, or of the entry itself,
	// in Timestamp's shape.
	LastActivityAt string `json:"last_activity_at"`
}

// ThreadPage is one page of zooid_get_recent_threads, newest first.
type ThreadPage struct {
	Threads    []ThreadOverview `json:"threads"`
	NextBefore string           `json:"next_before,omitempty"`
	HasMore    bool             `json:"has_more"`
}

// MessagePage is one page of zooid_get_history or zooid_get_thread_history,
// chronological within the page.
type MessagePage struct {
	Messages   []Message `json:"messages"`
	NextBefore string    `json:"next_before,omitempty"`
	HasMore    bool      `json:"has_more"`
}

// Member is one joined member of the current room.
type Member struct {
	ID        id.UserID `json:"id"`
	Name      string    `json:"name"`
	IsAgent   bool      `json:"is_agent"`
	AgentName string    `json:"agent_name,omitempty"`
	// Workstation is the daemon an agent runs on, when that daemon names one
	// (zooid.yaml workstation:): the agent is addressed as workstation.name.
	// Set for every Zooid agent in the room, this daemon's or another's.
	Workstation string `json:"workstation,omitempty"`
}

// MembersResult is the result of zooid_get_members.
type MembersResult struct {
	Members []Member `json:"members"`
}

// RoomInfo describes a room and the transport it lives on.
type RoomInfo struct {
	ID        id.RoomID `json:"id"`
	Name      string    `json:"name"`
	Transport string    `json:"transport"`
}

// RoomsResult is the result of zooid_get_rooms.
type RoomsResult struct {
	Rooms []RoomInfo `json:"rooms"`
}

// SendResult is the result of zooid_send_message.
type SendResult struct {
	EventID  id.EventID `json:"event_id"`
	ThreadID id.EventID `json:"thread_id,omitempty"`
}

// Notify modes of zooid_start_task_threads.
const (
	NotifyCaller = "caller"
	NotifyNone   = "none"
)

// Task statuses of zooid_start_task_threads results.
const (
	TaskStarted = "started"
	TaskRefused = "refused"
	TaskFailed  = "failed"
)

// Refusal reasons of zooid_start_task_threads (behaviour §5).
const (
	ReasonDepthLimit   = "depth_limit"
	ReasonUnknownAgent = "unknown_agent"
	ReasonNotInRoom    = "not_in_room"
	// ReasonSelf: the assignee is the caller; work is delegated to other
	// agents (the seed's word), and a task to oneself would hold a slot of
	// the room for a thread nobody else answers.
	ReasonSelf       = "self"
	ReasonAtCapacity = "at_capacity"
)

// Statuses of zooid_complete_task.
const (
	CompleteRecorded        = "recorded"
	CompleteAlreadyRecorded = "already_recorded"
	CompleteRefused         = "refused"
)

// TaskSpec is one task a caller delegates.
type TaskSpec struct {
	Agent  string `json:"agent"`
	Prompt string `json:"prompt"`
}

// StartRequest is the validated input of zooid_start_task_threads.
type StartRequest struct {
	Tasks  []TaskSpec `json:"tasks"`
	Notify string     `json:"notify"` // NotifyCaller or NotifyNone, defaulted by the tool
}

// TaskResult is one index-aligned result of zooid_start_task_threads.
type TaskResult struct {
	Agent    string     `json:"agent"`
	Status   string     `json:"status"`
	ThreadID id.EventID `json:"thread_id,omitempty"`
	Reason   string     `json:"reason,omitempty"`
}

// StartResult is the result of zooid_start_task_threads.
type StartResult struct {
	Results  []TaskResult `json:"results"`
	Notify   string       `json:"notify"`
	Delivery string       `json:"delivery"`
}

// CompleteResult is the result of zooid_complete_task.
type CompleteResult struct {
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// Statuses of zooid_handoff.
const (
	HandoffStarted = "started"
	HandoffRefused = "refused"
)

// Refusal reasons of zooid_handoff besides ReasonUnknownAgent, ReasonNotInRoom
// and ReasonSelf, which it shares with zooid_start_task_threads.
const (
	// ReasonAlreadyOpen: a handoff from the calling session is outstanding;
	// its return is owed first, so the caller never waits on two at once.
	ReasonAlreadyOpen = "already_open"
)

// HandoffRequest is the validated input of zooid_handoff.
type HandoffRequest struct {
	Agent  string `json:"agent"`
	Prompt string `json:"prompt"`
}

// HandoffResult is the result of zooid_handoff. Delivery, on started, tells the
// model to end its turn: the return comes back as a new turn.
type HandoffResult struct {
	Status   string     `json:"status"`
	Reason   string     `json:"reason,omitempty"`
	EventID  id.EventID `json:"event_id,omitempty"`
	Delivery string     `json:"delivery,omitempty"`
}

// Rooms reads and posts as the caller's own Matrix user. The daemon implements it
// (zooid/history). Inputs arrive validated: limit in [1,200], before possibly empty.
type Rooms interface {
	RecentThreads(ctx context.Context, c Caller, limit int, before string) (ThreadPage, error)
	ThreadHistory(ctx context.Context, c Caller, thread id.EventID, limit int, before string) (MessagePage, error)
	History(ctx context.Context, c Caller, limit int, before string) (MessagePage, error)
	Members(ctx context.Context, c Caller) ([]Member, error)
	RoomInfo(ctx context.Context, c Caller) (RoomInfo, error)
	Rooms(ctx context.Context, c Caller) ([]RoomInfo, error)
	// Send posts text into room (a room id or alias, the target, not the caller's
	// room), in thread when non-empty.
	Send(ctx context.Context, c Caller, room string, thread id.EventID, text string) (SendResult, error)
}

// Tasks runs task threads (behaviour §5); zooid/tasks implements it.
type Tasks interface {
	Start(ctx context.Context, c Caller, req StartRequest) (StartResult, error)
	Complete(ctx context.Context, c Caller, summary string) (CompleteResult, error)
	// Handoff runs zooid_handoff: refusals are results, not errors.
	Handoff(ctx context.Context, c Caller, req HandoffRequest) (HandoffResult, error)
}

// Error codes a model sees at the start of an error result.
const (
	CodeInvalidArgument = "invalid_argument"
	CodeInvalidCursor   = "invalid_cursor"
	CodeNotFound        = "not_found"
	CodeForbidden       = "forbidden"
	CodeNotInRoom       = "not_in_room"
	CodeUnknownTool     = "unknown_tool"
	CodeUnavailable     = "unavailable"
	CodeTooLarge        = "too_large"
)

// Error is a model-facing tool error: the tool result is isError with "code: message".
type Error struct {
	Code    string
	Message string
}

// Error renders the "code: message" text the model reads.
func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Errorf builds a model-facing *Error.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// AsError returns err as a model-facing *Error. Errors that are not already one
// become "unavailable" with a generic message, so backend detail (URLs, server
// responses) never reaches a model; the caller logs the original.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var te *Error
	if errors.As(err, &te) {
		return te
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return &Error{Code: CodeUnavailable, Message: "the request was cancelled or timed out; try again"}
	}
	return &Error{Code: CodeUnavailable, Message: "the homeserver or daemon could not complete the request; try again later"}
}
