package zevent

import (
	"reflect"

	"maunium.net/go/mautrix/event"
)

// Content fields Zooid adds to other events.
const (
	// KeyThreadStart is the content field of a task root that describes the task.
	KeyThreadStart = "dev.zooid.thread_start"
	// KeyThreadResult is the content field of the notice carrying a task's result
	// to the caller's thread, and the name of the result event type.
	KeyThreadResult = "dev.zooid.thread_result"
	// KeyHandoff is the content field of the notice zooid_handoff posts in the
	// thread: routing knows by it that the daemon runs the callee itself.
	KeyHandoff = "dev.zooid.handoff"
	// KeyHandoffReturn is the content field of the notice a callee's daemon
	// posts in the thread when another daemon's handoff returns.
	KeyHandoffReturn = "dev.zooid.handoff_return"
)

// Zooid's message event types.
var (
	// EventThreadResult is a closed task's result, posted in the task thread.
	EventThreadResult = event.Type{Type: KeyThreadResult, Class: event.MessageEventType}
	// EventSessionReset is /clear: it ends the agents' sessions of its thread.
	EventSessionReset = event.Type{Type: "dev.zooid.session_reset", Class: event.MessageEventType}
	// EventError is posted in a thread when an agent's turn fails.
	EventError = event.Type{Type: "dev.zooid.error", Class: event.MessageEventType}
)

func init() {
	// mautrix's registry is a plain map read by Content.ParseRaw; init is the only
	// writer, before any goroutine can read it.
	event.TypeMap[EventThreadResult] = reflect.TypeFor[ThreadResultEventContent]()
	event.TypeMap[EventSessionReset] = reflect.TypeFor[SessionResetEventContent]()
	event.TypeMap[EventError] = reflect.TypeFor[ErrorEventContent]()
	event.TypeMap[StateAgent] = reflect.TypeFor[AgentContent]()
}
