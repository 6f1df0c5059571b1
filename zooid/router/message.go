package router

import (
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// Custom event types and content fields of the Zooid protocol.
const (
	// SessionResetType is the /clear event: it ends the agents' sessions for its thread.
	SessionResetType = "dev.zooid.session_reset"
	// ThreadStartField marks a task root; its "assignee" is the agent the task is for.
	ThreadStartField = "dev.zooid.thread_start"
	// ThreadResultField marks a task's result; such messages never wake anyone.
	ThreadResultField = "dev.zooid.thread_result"
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
	ThreadRoot   id.EventID
	IsTaskRoot   bool
	TaskAssignee string
	IsTaskResult bool
	// IsReset marks a dev.zooid.session_reset event (/clear); Route ignores it and the
	// caller passes its thread to Reset.
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
	case SessionResetType:
		m.IsReset = true
		m.ThreadRoot = threadOf(ev.Content.Raw)
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
	m.Body = content.Body
	m.MsgType = string(content.MsgType)
	m.Mentions = content.Mentions
	if content.RelatesTo != nil {
		m.ThreadRoot = content.RelatesTo.GetThreadParent()
	}
	raw := ev.Content.Raw
	if start, ok := raw[ThreadStartField].(map[string]any); ok {
		m.IsTaskRoot = true
		m.TaskAssignee, _ = start["assignee"].(string)
	}
	if _, ok := raw[ThreadResultField]; ok {
		m.IsTaskResult = true
	}
	return m, true
}

// threadOf reads an m.thread relation from raw content.
func threadOf(raw map[string]any) id.EventID {
	rel, ok := raw["m.relates_to"].(map[string]any)
	if !ok {
		return ""
	}
	if t, _ := rel["rel_type"].(string); t != string(event.RelThread) {
		return ""
	}
	e, _ := rel["event_id"].(string)
	return id.EventID(e)
}
