package zevent

import (
	"encoding/json"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// ThreadStartVersion is the version of the dev.zooid.thread_start content Zooid writes.
const ThreadStartVersion = 1

// ThreadStart is the dev.zooid.thread_start field of a task root.
type ThreadStart struct {
	Version   int               `json:"version"`
	Assignee  string            `json:"assignee"`
	AttemptID string            `json:"attempt_id"`
	Parent    ThreadStartParent `json:"parent"`
	Notify    string            `json:"notify"`
}

// ThreadStartParent is the delegating side named in dev.zooid.thread_start.
type ThreadStartParent struct {
	Agent      string     `json:"agent"`
	ThreadRoot id.EventID `json:"thread_root,omitempty"`
	SessionKey string     `json:"session_key"`
}

// TaskRootContent is the m.room.message that opens a task thread: a mention of the
// assignee with the prompt, and the task in dev.zooid.thread_start. Mentions is
// always sent (an explicit mention list, never inferred from the body).
type TaskRootContent struct {
	MsgType       event.MessageType `json:"msgtype"`
	Body          string            `json:"body"`
	Format        event.Format      `json:"format,omitempty"`
	FormattedBody string            `json:"formatted_body,omitempty"`
	Mentions      *event.Mentions   `json:"m.mentions"`
	ThreadStart   ThreadStart       `json:"dev.zooid.thread_start"`
}

// HandoffVersion is the version of the dev.zooid.handoff content Zooid writes.
const HandoffVersion = 1

// Handoff is the dev.zooid.handoff field of a zooid_handoff post: who handed
// what to whom, and the journal's id of it.
type Handoff struct {
	Version int    `json:"version"`
	ID      string `json:"id"`
	From    string `json:"from"`
	To      string `json:"to"`
}

// HandoffContent is the m.notice zooid_handoff posts in the caller's thread, as
// the caller: the prompt mentioning the callee, marked dev.zooid.handoff. A
// notice wakes nobody by routing; the daemon runs the callee itself, so a
// client's retry or a homeserver's second push never runs it twice.
type HandoffContent struct {
	MsgType       event.MessageType `json:"msgtype"`
	Body          string            `json:"body"`
	Format        event.Format      `json:"format,omitempty"`
	FormattedBody string            `json:"formatted_body,omitempty"`
	Mentions      *event.Mentions   `json:"m.mentions"`
	RelatesTo     *event.RelatesTo  `json:"m.relates_to,omitempty"`
	Handoff       Handoff           `json:"dev.zooid.handoff"`
}

// HandoffOf returns the dev.zooid.handoff of ev, and whether ev carries one (the
// field is a JSON object); a mistyped field inside it stays zero.
func HandoffOf(ev *event.Event) (Handoff, bool) {
	var c struct {
		Handoff json.RawMessage `json:"dev.zooid.handoff"`
	}
	var h Handoff
	if !decode(ev, &c) || len(c.Handoff) == 0 || c.Handoff[0] != '{' {
		return h, false
	}
	_ = json.Unmarshal(c.Handoff, &h) // see above: a mistyped field stays zero
	return h, true
}

// HandoffReturn is the dev.zooid.handoff_return field of the notice a callee's
// daemon posts in the thread, as the callee, when the callee of another
// daemon's handoff is really done: the caller's daemon wakes its caller with
// it. ID is the handoff's (the notice's dev.zooid.handoff id); Output the
// callee's final message, Reason why there is none or why it is not an answer
// (as tasks.ThreadHandoff.Reason), Error why its last turn failed.
type HandoffReturn struct {
	Version int    `json:"version"`
	ID      string `json:"id"`
	From    string `json:"from"`
	To      string `json:"to"`
	Output  string `json:"output,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Error   string `json:"error,omitempty"`
}

// HandoffReturnContent is the m.notice carrying a handoff's return in its
// thread. A notice wakes nobody by routing; only the caller's daemon acts on
// it, and only from the callee's user. Mentions is always sent, empty, so no
// client infers a mention from the body.
type HandoffReturnContent struct {
	MsgType   event.MessageType `json:"msgtype"`
	Body      string            `json:"body"`
	Mentions  *event.Mentions   `json:"m.mentions"`
	RelatesTo *event.RelatesTo  `json:"m.relates_to,omitempty"`
	Return    HandoffReturn     `json:"dev.zooid.handoff_return"`
}

// HandoffReturnOf returns the dev.zooid.handoff_return of ev, and whether ev
// carries one (the field is a JSON object); a mistyped field inside it stays zero.
func HandoffReturnOf(ev *event.Event) (HandoffReturn, bool) {
	var c struct {
		Return json.RawMessage `json:"dev.zooid.handoff_return"`
	}
	var r HandoffReturn
	if !decode(ev, &c) || len(c.Return) == 0 || c.Return[0] != '{' {
		return r, false
	}
	_ = json.Unmarshal(c.Return, &r) // see above: a mistyped field stays zero
	return r, true
}

// ThreadResult is a closed task's outcome: the content of dev.zooid.thread_result.
type ThreadResult struct {
	Agent    string     `json:"agent"`
	ThreadID id.EventID `json:"thread_id"`
	Status   string     `json:"status"`
	Output   string     `json:"output,omitempty"`
	Reason   string     `json:"reason,omitempty"`
	Error    string     `json:"error,omitempty"`
}

// ThreadResultEventContent is the dev.zooid.thread_result event in the task thread.
type ThreadResultEventContent struct {
	ThreadResult
	RelatesTo *event.RelatesTo `json:"m.relates_to,omitempty"`
}

// ResultNoticeContent is the m.notice carrying a task's result to the caller's
// thread; its dev.zooid.thread_result field keeps it from waking anyone. Mentions is
// always sent, empty, so no client infers a mention from the body.
type ResultNoticeContent struct {
	MsgType      event.MessageType `json:"msgtype"`
	Body         string            `json:"body"`
	Mentions     *event.Mentions   `json:"m.mentions"`
	RelatesTo    *event.RelatesTo  `json:"m.relates_to,omitempty"`
	ThreadResult ThreadResult      `json:"dev.zooid.thread_result"`
}

// SessionResetEventContent is /clear in a thread.
type SessionResetEventContent struct {
	RelatesTo *event.RelatesTo `json:"m.relates_to,omitempty"`
}

// ErrorEventContent is the machine-readable dev.zooid.error of a failed turn.
type ErrorEventContent struct {
	Agent     string           `json:"agent"`
	Code      string           `json:"code"`
	Error     string           `json:"error"`
	ThreadID  id.EventID       `json:"thread_id"`
	RelatesTo *event.RelatesTo `json:"m.relates_to,omitempty"`
}

// GetRelatesTo returns the relation, creating an empty one if there is none.
func (c *ThreadResultEventContent) GetRelatesTo() *event.RelatesTo {
	if c.RelatesTo == nil {
		c.RelatesTo = &event.RelatesTo{}
	}
	return c.RelatesTo
}

// OptionalGetRelatesTo returns the relation, nil if there is none.
func (c *ThreadResultEventContent) OptionalGetRelatesTo() *event.RelatesTo { return c.RelatesTo }

// SetRelatesTo replaces the relation.
func (c *ThreadResultEventContent) SetRelatesTo(rel *event.RelatesTo) { c.RelatesTo = rel }

// GetRelatesTo returns the relation, creating an empty one if there is none.
func (c *SessionResetEventContent) GetRelatesTo() *event.RelatesTo {
	if c.RelatesTo == nil {
		c.RelatesTo = &event.RelatesTo{}
	}
	return c.RelatesTo
}

// OptionalGetRelatesTo returns the relation, nil if there is none.
func (c *SessionResetEventContent) OptionalGetRelatesTo() *event.RelatesTo { return c.RelatesTo }

// SetRelatesTo replaces the relation.
func (c *SessionResetEventContent) SetRelatesTo(rel *event.RelatesTo) { c.RelatesTo = rel }

// GetRelatesTo returns the relation, creating an empty one if there is none.
func (c *ErrorEventContent) GetRelatesTo() *event.RelatesTo {
	if c.RelatesTo == nil {
		c.RelatesTo = &event.RelatesTo{}
	}
	return c.RelatesTo
}

// OptionalGetRelatesTo returns the relation, nil if there is none.
func (c *ErrorEventContent) OptionalGetRelatesTo() *event.RelatesTo { return c.RelatesTo }

// SetRelatesTo replaces the relation.
func (c *ErrorEventContent) SetRelatesTo(rel *event.RelatesTo) { c.RelatesTo = rel }

// ThreadStartOf returns the dev.zooid.thread_start of ev, and whether ev carries one
// at all (the field is a JSON object). A field of the wrong type inside it stays
// zero rather than hiding that the event is a task root.
func ThreadStartOf(ev *event.Event) (ThreadStart, bool) {
	var c struct {
		Start json.RawMessage `json:"dev.zooid.thread_start"`
	}
	var ts ThreadStart
	if !decode(ev, &c) || len(c.Start) == 0 || c.Start[0] != '{' {
		return ts, false
	}
	_ = json.Unmarshal(c.Start, &ts) // see above: a mistyped field stays zero
	return ts, true
}

// HasThreadResult says whether ev's content carries dev.zooid.thread_result (the
// result event, or the notice in the caller's thread), with any value.
func HasThreadResult(ev *event.Event) bool {
	var c struct {
		Result json.RawMessage `json:"dev.zooid.thread_result"`
	}
	return decode(ev, &c) && len(c.Result) > 0
}

// decode unmarshals ev's content into v: from VeryRaw as received, or from Raw for
// an event built in memory.
func decode(ev *event.Event, v any) bool {
	if ev == nil {
		return false
	}
	raw := []byte(ev.Content.VeryRaw)
	if len(raw) == 0 {
		if ev.Content.Raw == nil {
			return false
		}
		var err error
		if raw, err = json.Marshal(ev.Content.Raw); err != nil {
			return false
		}
	}
	return json.Unmarshal(raw, v) == nil
}
