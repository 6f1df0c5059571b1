package router

import (
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/zevent"
)

// Message is the routing-relevant view of one Matrix event.
type Message struct {
	Room    id.RoomID
	EventID id.EventID
	Sender  id.UserID
	Body    string
	MsgType string
	// Mentions is the event's m.mentions, nil when the event has none.
	Mentions *event.Mentions
	// ThreadRoot is the thread the event is in, "" when it is top-level.
	ThreadRoot id.EventID
	// IsTaskRoot marks a root carrying dev.zooid.thread_start; TaskAssignee is its
	// assignee, the one agent the root wakes, and TaskAttempt the attempt id that
	// ties it to the task journal (Facts.TaskRoot).
	IsTaskRoot   bool
	TaskAssignee string
	TaskAttempt  string
	// IsTaskResult marks content carrying dev.zooid.thread_result: it wakes nobody.
	IsTaskResult bool
	// HandoffTo is the callee named by a dev.zooid.handoff field ("" for
	// none): an agent's handoff notice wakes nobody and makes the callee the
	// thread's addressee.
	HandoffTo string
	// IsReset marks a dev.zooid.session_reset event (/clear): Decide ends the
	// thread's sessions and wakes nobody.
	IsReset bool
}

// MessageFromEvent extracts a Message from an m.room.message or session reset event. It
// reports false for every other event, for edits (which would re-wake an agent for a message
// it already saw), and for malformed content.
func MessageFromEvent(ev *event.Event) (Message, bool) {
	if ev == nil {
		return Message{}, false
	}
	m := Message{Room: ev.RoomID, EventID: ev.ID, Sender: ev.Sender}
	switch ev.Type.Type {
	case zevent.EventSessionReset.Type:
		m.IsReset = true
		m.ThreadRoot = zevent.ThreadRoot(ev)
		return m, true
	case event.EventMessage.Type:
	default:
		return Message{}, false
	}
	if ev.StateKey != nil {
		return Message{}, false
	}
	content, ok := ev.Content.Parsed.(*event.MessageEventContent)
	if !ok {
		if ev.Content.Parsed != nil || len(ev.Content.VeryRaw) == 0 {
			return Message{}, false
		}
		if err := ev.Content.ParseRaw(event.EventMessage); err != nil {
			return Message{}, false
		}
		if content, ok = ev.Content.Parsed.(*event.MessageEventContent); !ok {
			return Message{}, false
		}
	}
	if content.RelatesTo != nil && content.RelatesTo.Type == event.RelReplace {
		return Message{}, false
	}
	if _, isString := ev.Content.Raw["body"].(string); !isString {
		// No string body (absent, null, a number): nothing to prompt with.
		return Message{}, false
	}
	m.Body = content.Body
	m.MsgType = string(content.MsgType)
	m.Mentions = content.Mentions
	m.ThreadRoot = zevent.ThreadRoot(ev)
	if start, ok := zevent.ThreadStartOf(ev); ok {
		m.IsTaskRoot = true
		m.TaskAssignee = start.Assignee
		m.TaskAttempt = start.AttemptID
	}
	m.IsTaskResult = zevent.HasThreadResult(ev)
	if h, ok := zevent.HandoffOf(ev); ok {
		m.HandoffTo = h.To
	}
	return m, true
}
