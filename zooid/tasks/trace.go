package tasks

import (
	"github.com/zooid-dev/zooid/zooid/tools"
	"github.com/zooid-dev/zooid/zooid/trace"
)

// traceStep is the trace record of one step of t. Steps taken inside the
// caller's tool call carry the caller's session; later ones belong to the
// task thread.
func traceStep(t Task, step, session string) trace.Record {
	ts := &trace.TaskStep{Step: step, Agent: t.Agent, Caller: t.Parent.Agent, Thread: t.ThreadID, Attempt: t.AttemptID}
	if t.Result != nil {
		ts.Status, ts.Reason, ts.Output = string(t.Result.Status), string(t.Result.Reason), t.Result.Output
	}
	return trace.Record{Kind: trace.KindTask, Room: t.Room, Session: session, Task: ts}
}

// traceAdmission records each task of a start request as admitted or refused.
func (m *Manager) traceAdmission(c tools.Caller, admitted []*Task, results []tools.TaskResult) {
	if !m.opts.Trace.Enabled() {
		return
	}
	for i, r := range results {
		if admitted[i] != nil {
			m.mu.Lock()
			snap := admitted[i].clone()
			m.mu.Unlock()
			m.opts.Trace.Record(traceStep(snap, trace.StepAdmitted, c.SessionKey))
			continue
		}
		m.opts.Trace.Record(trace.Record{Kind: trace.KindTask, Room: c.Room, Session: c.SessionKey,
			Task: &trace.TaskStep{Step: trace.StepRefused, Agent: r.Agent, Caller: c.Agent, Reason: string(r.Reason)}})
	}
}

// traceStarted records how each admitted task's root post went.
func (m *Manager) traceStarted(c tools.Caller, admitted []*Task, results []tools.TaskResult) {
	if !m.opts.Trace.Enabled() {
		return
	}
	for i, r := range results {
		if admitted[i] == nil {
			continue
		}
		m.mu.Lock()
		snap := admitted[i].clone()
		m.mu.Unlock()
		step := trace.StepStarted
		if r.Status != tools.TaskStarted {
			step = trace.StepFailed
		}
		rec := traceStep(snap, step, c.SessionKey)
		rec.Task.Thread = r.ThreadID
		m.opts.Trace.Record(rec)
	}
}
