package tasks

import (
	"context"
	"errors"
	"strings"

	acp "github.com/coder/acp-go-sdk"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/tools"
)

// TurnOutcome is how an assignee turn ended, as the daemon saw it.
type TurnOutcome struct {
	// StopReason is the ACP stop reason ("end_turn", "max_tokens", …); empty on error.
	StopReason string
	// Err is set when the turn failed (agent crash, protocol error).
	Err error
	// LastProse is the assignee's last prose message of the turn, if any.
	LastProse string
	// WaitingOnHuman is true when the assignee asked a human and waits for a reply.
	WaitingOnHuman bool
	// HandoffOutstanding is true when the daemon knows of a handoff still running
	// (in addition to the ones recorded with StartHandoff).
	HandoffOutstanding bool
}

// judge applies behaviour §5's rules, in order, to an open task's turn. It returns
// nil while the task stays open.
func judge(t *Task, o TurnOutcome) *Result {
	output := t.Summary
	if output == "" {
		output = strings.TrimSpace(o.LastProse)
	}
	switch {
	case o.Err != nil:
		return &Result{Status: StatusFailed, Reason: ReasonAgentError, Error: o.Err.Error(), Output: output}
	case o.StopReason == string(acp.StopReasonCancelled):
		return &Result{Status: StatusCancelled, Reason: ReasonTurnCancelled, Output: output}
	case o.StopReason == string(acp.StopReasonMaxTokens), o.StopReason == string(acp.StopReasonMaxTurnRequests):
		return &Result{Status: StatusPartial, Reason: o.StopReason, Output: output}
	case o.WaitingOnHuman, o.HandoffOutstanding, len(t.Handoffs) > 0, t.ReturnsOwed > 0:
		return nil
	case o.StopReason == string(acp.StopReasonRefusal) && t.Summary == "":
		// Not named by the contract: a refusal is the agent declining, so it is a
		// failure even if it said something on the way; a summary recorded
		// before still wins.
		return &Result{Status: StatusFailed, Reason: ReasonRefusal, Output: output}
	case t.Summary != "":
		return &Result{Status: StatusComplete, Output: t.Summary}
	case output != "":
		return &Result{Status: StatusComplete, Output: output}
	default:
		return &Result{Status: StatusFailed, Reason: ReasonNoResult}
	}
}

// TurnEnded judges the task whose thread is task at the end of an assignee turn. When
// the task closes, the close is journaled first and then reported (the thread result,
// and with notify caller the notice and the wake) before TurnEnded returns; call it
// outside any session lock. A task that is not open is left alone (closing is once).
// The error is a journal failure: the task then stays open and the next turn end
// judges it again.
func (m *Manager) TurnEnded(ctx context.Context, task id.EventID, o TurnOutcome) error {
	m.mu.Lock()
	t, ok := m.byThread[task]
	if !ok || t.State != StateOpen || m.closed {
		m.mu.Unlock()
		return nil
	}
	attempt := t.AttemptID
	m.mu.Unlock()
	closed := false
	_, err := m.update(attempt, func(t *Task) error {
		if t.State != StateOpen {
			return nil
		}
		r := judge(t, o)
		if r == nil {
			if p := strings.TrimSpace(o.LastProse); p != "" {
				t.LastProse = p
			}
			return nil
		}
		m.closeLocked(t, r, m.opts.Now().UTC())
		closed = true
		return nil
	})
	if err != nil {
		m.log.Error("closing task", "thread", task, "err", err)
		return err
	}
	if !closed {
		return nil
	}
	m.report(ctx, attempt)
	return nil
}

// Complete runs zooid_complete_task for caller c: the first non-empty summary of the
// assignee of the open task in c's thread is recorded. It does not end the turn; the
// judge uses the summary when the turn ends.
func (m *Manager) Complete(ctx context.Context, c tools.Caller, summary string) (tools.CompleteResult, error) {
	if strings.TrimSpace(summary) == "" {
		return tools.CompleteResult{Status: tools.CompleteRefused, Reason: ReasonEmptySummary}, nil
	}
	m.mu.Lock()
	t, ok := m.byThread[c.Thread]
	if !ok || c.Thread == "" || t.Room != c.Room || t.State != StateOpen || t.Agent != c.Agent {
		m.mu.Unlock()
		return tools.CompleteResult{Status: tools.CompleteRefused, Reason: ReasonNotAssignee}, nil
	}
	attempt := t.AttemptID
	waiting := m.outstandingFromLocked(c.Room, c.Thread, c.Agent) != nil
	m.mu.Unlock()
	if waiting {
		// A zooid_handoff of the assignee's: its return is owed first.
		return tools.CompleteResult{Status: tools.CompleteRefused, Reason: ReasonHandoffOutstanding}, nil
	}
	var res tools.CompleteResult
	_, err := m.update(attempt, func(t *Task) error {
		switch {
		case t.State != StateOpen:
			res = tools.CompleteResult{Status: tools.CompleteRefused, Reason: ReasonNotAssignee}
		case len(t.Handoffs) > 0:
			res = tools.CompleteResult{Status: tools.CompleteRefused, Reason: ReasonHandoffOutstanding}
		case t.Summary != "":
			res = tools.CompleteResult{Status: tools.CompleteAlreadyRecorded}
		default:
			t.Summary = summary
			res = tools.CompleteResult{Status: tools.CompleteRecorded}
		}
		return nil
	})
	if errors.Is(err, ErrClosed) {
		return tools.CompleteResult{}, tools.Errorf(tools.CodeUnavailable, "task threads are shutting down")
	}
	if err != nil {
		return tools.CompleteResult{}, err
	}
	return res, nil
}
