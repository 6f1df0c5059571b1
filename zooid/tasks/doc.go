// Package tasks runs task threads (behaviour §5): admission of delegated tasks, a
// durable journal of the tasks in flight, judging each assignee turn, reporting results
// to the delegating agent, and the bookkeeping of in-thread handoffs (an assignee's
// @mention, and zooid_handoff, whose returns it journals beside the tasks).
//
// The daemon owns processes and sessions; this package owns each task's state and the
// Matrix events that describe it (the thread root, dev.zooid.thread_result in the task
// thread, the caller's notice). It reaches Matrix and the daemon only through Options.
//
// How the daemon drives a Manager:
//
//   - At start: Open, then Recover once it can post and wake, then Watch on a
//     goroutine the daemon owns until it stops: an open task closes timed_out
//     once Options.Timeout (task_timeout) has passed since its admission.
//   - Tools: the Manager is the tools.Tasks backend (Start, Complete).
//   - Routing a root whose content has dev.zooid.thread_start: TaskForRoot(room, event,
//     sender, attempt_id). A task root wakes only its assignee (Task.Agent), whose first
//     prompt starts with Header(task).
//   - Gating: a session of agent A in thread T is tools.TaskAssignee when
//     TaskByThread(room, T) is IsOpen and its Agent is A.
//   - When the assignee's posted prose @mentions another agent of the room: StartHandoff
//     (before TurnEnded of that turn); a circular one returns ErrCircularHandoff, for an
//     error event. When that callee's turn ends: HandoffEnded, then wake HandoffWake.Agent
//     in the task thread with HandoffWake.Text.
//   - When an assignee turn ends: TurnEnded. It closes and reports when the task is done;
//     Options.Wake is how the caller's original session is woken (once per task); the
//     wake counts as delivered when the daemon calls its delivered callback (the turn
//     left the caller's queue), so a restart before then wakes the caller again.
//   - Messages carrying dev.zooid.thread_result never trigger anyone.
//   - zooid_handoff (thread_handoff.go): Handoff is the tool; the callee is run by
//     Options.StartCallee. At each turn end of a session, when CalleeOf names a
//     running handoff of it, nothing more is queued for it and HandoffOutstanding
//     is false for it, CalleeDone with its final prose; the caller is then woken
//     through Options.Wake, delivered once its session takes the turn. A
//     callee's prose @mentioning another agent: MentionHandoff. /clear:
//     HandoffThreadCleared. At start: RecoverHandoffs before the intake opens.
package tasks
