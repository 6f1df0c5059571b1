// Package trace is the daemon's flight recorder (`zooid run --trace DIR`):
// per room, in order, what the daemon saw and did — each inbound event with its
// routing decision, each prompt, tool call, post, task step, agent failure and
// daemon start — as JSON lines, one file (or rotated run of files) per room.
// Read loads a trace back and Compare diffs two of them with their ids mapped,
// which is what `zooid replay` needs to say whether a run reproduces.
//
// The format is described in docs/trace.md. No secret is ever written: the
// daemon never hands the recorder a token or a binding id, and the writer
// scrubs the secrets it is given from every line as a second guard.
package trace

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"maunium.net/go/mautrix/id"
)

// Version is the trace format version written in every file's header line.
// Read refuses files of a newer version.
const Version = 1

// Kind says what one record is.
type Kind string

// Record kinds.
const (
	// KindStart is a daemon start; Start.Restart is set when the room's trace
	// already held records from an earlier run.
	KindStart Kind = "start"
	// KindEvent is one inbound event and the routing decision taken on it.
	KindEvent Kind = "event"
	// KindPrompt is the text of one prompt sent to an agent.
	KindPrompt Kind = "prompt"
	// KindTool is one Zooid MCP tool call with its arguments and result.
	KindTool Kind = "tool"
	// KindPost is one event the daemon sent into the room.
	KindPost Kind = "post"
	// KindTask is one step of a task thread (§5).
	KindTask Kind = "task"
	// KindAgent is an agent failure: a crash, a timeout, a failed start.
	KindAgent Kind = "agent"
	// KindTurnEnd ends a turn; the room's file is fsync'd after it.
	KindTurnEnd Kind = "turn_end"
)

// Header is the first line of every trace file.
type Header struct {
	// Format is always "zooid-trace"; it tells a trace file from other JSON lines.
	Format  string    `json:"format"`
	Version int       `json:"version"`
	Room    id.RoomID `json:"room"`
	// Segment numbers a room's rotated files from 1, in order.
	Segment int       `json:"segment"`
	Created time.Time `json:"created"`
}

// Record is one line of a trace after the header. Exactly the field named by
// Kind is set among the kind-specific ones.
type Record struct {
	// Seq orders records within a room, across rotated files and restarts.
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	Kind Kind      `json:"kind"`
	Room id.RoomID `json:"room"`
	// Session is the daemon's session key (agent|room|thread) the record
	// belongs to, when it belongs to one.
	Session string `json:"session,omitempty"`

	Start   *Start    `json:"start,omitempty"`
	Event   *Event    `json:"event,omitempty"`
	Prompt  *Prompt   `json:"prompt,omitempty"`
	Tool    *ToolCall `json:"tool,omitempty"`
	Post    *Post     `json:"post,omitempty"`
	Task    *TaskStep `json:"task,omitempty"`
	Agent   *AgentEnd `json:"agent,omitempty"`
	TurnEnd *TurnEnd  `json:"turn_end,omitempty"`
}

// Start is a daemon start seen from one room.
type Start struct {
	// Alias is how zooid.yaml names the room (e.g. "#general"); Compare pairs
	// rooms of two traces by it.
	Alias string `json:"alias,omitempty"`
	// Agents are the agents bound to the room.
	Agents []string `json:"agents,omitempty"`
	// Restart is set when the room's trace already held an earlier run.
	Restart bool `json:"restart,omitempty"`
}

// Event is one inbound event of the room and what the router decided.
type Event struct {
	ID      id.EventID `json:"id"`
	Sender  id.UserID  `json:"sender"`
	Type    string     `json:"type"`
	MsgType string     `json:"msgtype,omitempty"`
	Thread  id.EventID `json:"thread,omitempty"`
	Text    string     `json:"text,omitempty"`
	// TextSize is the body's length in bytes when Text was cut short.
	TextSize int `json:"text_size,omitempty"`
	// Woke lists the agents the event woke, in order.
	Woke []Wake `json:"woke,omitempty"`
	// Nobody says why no agent woke (see the Why* constants); empty when one did.
	Nobody string `json:"nobody,omitempty"`
	// Decision is the rest of the router's decision on the event; Woke and
	// Nobody, which traces held before it, are its wakes and why nobody woke.
	// A record written before the daemon recorded it has none (nil), and
	// Compare then compares Woke and Nobody alone.
	Decision *Decision `json:"decision,omitempty"`
}

// Decision is what the router decided about an event besides whom it woke
// (the daemon's router.Decision). The daemon writes one on every event record,
// {} when none of its fields applies.
type Decision struct {
	// Reset is a /clear: every session of the thread ended.
	Reset bool `json:"reset,omitempty"`
	// Recall says routing first read the thread back from the homeserver: a
	// person's bare reply in a thread the router held no memory of.
	Recall bool `json:"recall,omitempty"`
	// TaskRoot is the assignee of the journaled task whose root the event is.
	TaskRoot string `json:"task_root,omitempty"`
}

// String says what d holds, for a reader of a diff or a report: "" when
// nothing (or d is nil).
func (d *Decision) String() string {
	if d == nil {
		return ""
	}
	var parts []string
	if d.Reset {
		parts = append(parts, "thread reset")
	}
	if d.Recall {
		parts = append(parts, "thread recalled")
	}
	if d.TaskRoot != "" {
		parts = append(parts, "task root of "+d.TaskRoot)
	}
	return strings.Join(parts, ", ")
}

// Wake is one agent woken by an event.
type Wake struct {
	Agent string `json:"agent"`
	// Thread is the session's thread root.
	Thread  id.EventID `json:"thread"`
	Session string     `json:"session"`
	// Why is the routing rule that woke it (see the Why* constants).
	Why string `json:"why"`
}

// Why an agent woke, or why nobody did.
const (
	WhyMention      = "mention"       // its user was mentioned
	WhyTriggerAny   = "trigger_any"   // trigger: any
	WhyAddressee    = "addressee"     // a bare reply in a thread it was addressed in
	WhyTaskAssignee = "task_assignee" // the assignee of a task thread

	WhyNotMessage  = "not_a_message"    // not a routable m.room.message (state, reaction, edit, …)
	WhyReset       = "session_reset"    // /clear: sessions of the thread ended
	WhyTaskResult  = "task_result"      // a dev.zooid.thread_result never wakes anyone
	WhyAgentPost   = "agent_post"       // an agent's own post wakes nobody
	WhyNotNotified = "nobody_addressed" // no agent bound here was mentioned or addressed
	WhyEncrypted   = "encrypted"        // an m.room.encrypted event the daemon did not decrypt: encryption off, or its key never came
	WhyTaskClosed  = "task_closed"      // a task root met again after its task closed: its assignee is not set to work
)

// Prompt is one prompt sent to an agent.
type Prompt struct {
	Agent string `json:"agent"`
	// Turn names the turn: the triggering event id, or an internal id.
	Turn string `json:"turn"`
	// Trigger is the event that woke the turn, if one did.
	Trigger id.EventID `json:"trigger,omitempty"`
	// Fresh is set when the prompt went to a newly started agent process.
	Fresh    bool   `json:"fresh,omitempty"`
	Text     string `json:"text"`
	TextSize int    `json:"text_size,omitempty"`
}

// ToolCall is one Zooid MCP tool call.
type ToolCall struct {
	Agent string `json:"agent"`
	Tool  string `json:"tool"`
	// Args and Result are JSON text, cut to the writer's bound; their *Size
	// fields give the original length in bytes when they were cut.
	Args       string `json:"args"`
	ArgsSize   int    `json:"args_size,omitempty"`
	Result     string `json:"result"`
	ResultSize int    `json:"result_size,omitempty"`
	// Error is the error result the model read (code: message), if any.
	Error string `json:"error,omitempty"`
}

// Post is one event the daemon sent into the room, as an agent.
type Post struct {
	ID      id.EventID `json:"id,omitempty"`
	Sender  id.UserID  `json:"sender"`
	Type    string     `json:"type"`
	MsgType string     `json:"msgtype,omitempty"`
	Thread  id.EventID `json:"thread,omitempty"`
	Text    string     `json:"text,omitempty"`
	// TextSize is the body's length in bytes when Text was cut short.
	TextSize int    `json:"text_size,omitempty"`
	TxnID    string `json:"txn_id"`
	// Error says why the post failed; ID is then empty.
	Error string `json:"error,omitempty"`
}

// Task steps.
const (
	StepAdmitted = "admitted" // journaled as reserved; its root is being posted
	StepRefused  = "refused"  // refused at admission (Reason says why)
	StepStarted  = "started"  // its root is posted: Thread is the task thread
	StepFailed   = "failed"   // its root could not be posted
	StepClosed   = "closed"   // judged: Status and Reason
	StepReported = "reported" // result, notice and wake all delivered

	// zooid_handoff's steps, as task steps: Agent is the callee, Caller the
	// agent that handed off, Thread the thread both work in, Attempt the
	// handoff's id (its notice's txn id).
	StepHandoffStarted  = "handoff_started"  // its notice is posted; the callee runs
	StepHandoffRefused  = "handoff_refused"  // refused (Reason says why)
	StepHandoffReturned = "handoff_returned" // the callee is done: Reason empty, or why it is no answer; Output its final message
	StepHandoffWoken    = "handoff_woken"    // the caller's session took the return
)

// TaskStep is one step of a task thread's life.
type TaskStep struct {
	Step   string     `json:"step"`
	Agent  string     `json:"agent"`
	Caller string     `json:"caller,omitempty"`
	Thread id.EventID `json:"thread,omitempty"`
	// Attempt is the task's attempt id (its root's txn id).
	Attempt string `json:"attempt,omitempty"`
	Status  string `json:"status,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Output  string `json:"output,omitempty"`
}

// Agent failures.
const (
	AgentCrashed     = "crashed"
	AgentTimedOut    = "timed_out"
	AgentStartFailed = "start_failed"
	AgentFailed      = "failed"
)

// AgentEnd is an agent process that failed a turn.
type AgentEnd struct {
	Agent string `json:"agent"`
	What  string `json:"what"`
	Error string `json:"error,omitempty"`
}

// TurnEnd ends one turn.
type TurnEnd struct {
	Agent string `json:"agent"`
	Turn  string `json:"turn"`
	// Stop is the ACP stop reason ("end_turn", "cancelled", …), empty on failure.
	Stop  string `json:"stop,omitempty"`
	Error string `json:"error,omitempty"`
}

// Bound cuts s to at most n bytes on a rune boundary. It returns the original
// length as size when it cut, else 0.
func Bound(s string, n int) (string, int) {
	if n <= 0 || len(s) <= n {
		return s, 0
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut], len(s)
}

// JSON encodes v for a record's Args or Result; it never fails loudly (a
// record is evidence, not control flow).
func JSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return `"unencodable: ` + err.Error() + `"`
	}
	return string(b)
}

// Check reports a record this zooid cannot read: a kind it does not know (a
// newer daemon's, or a typo in a hand-edited file), or a record cut short so
// that its kind's fields are missing. Comparing such a record would report
// differences the daemon never made, so readers refuse it as bad input.
func (r *Record) Check() error {
	var set bool
	switch r.Kind {
	case KindStart:
		set = r.Start != nil
	case KindEvent:
		set = r.Event != nil
	case KindPrompt:
		set = r.Prompt != nil
	case KindTool:
		set = r.Tool != nil
	case KindPost:
		set = r.Post != nil
	case KindTask:
		set = r.Task != nil
	case KindAgent:
		set = r.Agent != nil
	case KindTurnEnd:
		set = r.TurnEnd != nil
	case "":
		return errors.New("a trace record has a kind; this line has none")
	default:
		return fmt.Errorf("unknown trace record kind %q (known: start, event, prompt, tool, post, task, agent, turn_end)", r.Kind)
	}
	if !set {
		return fmt.Errorf("a %q record without its %q field (cut short?)", r.Kind, r.Kind)
	}
	if r.Room == "" {
		return fmt.Errorf("a %q record without its room", r.Kind)
	}
	return nil
}
