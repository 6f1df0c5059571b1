package zevent

import (
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// ThreadRoot returns the root of the thread ev replies in: the event_id of its
// m.relates_to when rel_type is m.thread. It is "" for every event that is not a
// thread reply, a thread root included (callers that key sessions by thread use the
// event's own id for a root), and for content without a readable relation. Any event
// type is read: a parsed content that is an event.Relatable, else the raw JSON.
func ThreadRoot(ev *event.Event) id.EventID {
	if ev == nil {
		return ""
	}
	if r, ok := ev.Content.Parsed.(event.Relatable); ok {
		return r.OptionalGetRelatesTo().GetThreadParent()
	}
	var c struct {
		RelatesTo *event.RelatesTo `json:"m.relates_to"`
	}
	if !decode(ev, &c) {
		return ""
	}
	return c.RelatesTo.GetThreadParent()
}

// InThread is the relation of Zooid's own machine events in a thread (errors,
// resets): m.thread to root, without a reply fallback.
func InThread(root id.EventID) *event.RelatesTo {
	return (&event.RelatesTo{}).SetThread(root, "")
}

// ThreadReply is the relation of a message in root's thread that, as Element does,
// falls back to a reply to latest for clients without thread support.
func ThreadReply(root, latest id.EventID) *event.RelatesTo {
	return (&event.RelatesTo{}).SetThread(root, latest)
}
