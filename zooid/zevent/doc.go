// Package zevent is Zooid's Matrix event vocabulary, shaped like mautrix's event
// package: the dev.zooid.* event types and content fields, their typed contents,
// and how Zooid reads and builds thread relations. Every other package speaks
// Zooid's protocol through it, so each wire name is spelled once.
//
// The vocabulary (docs: behaviour.md §2 and §5):
//
//   - dev.zooid.thread_start is a content field, not an event type: the
//     m.room.message that opens a task thread carries it (TaskRootContent).
//     ThreadStartOf reads it from any event.
//   - dev.zooid.thread_result is both an event type (EventThreadResult, posted in
//     the task thread) and a content field of the notice in the caller's thread
//     (ResultNoticeContent). Messages carrying the field never wake anyone.
//   - dev.zooid.session_reset (EventSessionReset) is /clear: a thread relation and
//     nothing else.
//   - dev.zooid.error (EventError) is posted in a thread when an agent's turn fails.
//
// Importing the package registers the three event types in mautrix's
// event.TypeMap, so Content.ParseRaw of a timeline event (Type.Class
// event.MessageEventType, as mautrix's syncer and appservice set it) yields
// *ThreadResultEventContent, *SessionResetEventContent and *ErrorEventContent.
package zevent
