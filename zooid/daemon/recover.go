package daemon

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/zooid-dev/zooid/internal/faultpoint"
)

// maxRecoveryAttempts bounds how often a start tries to answer one unfinished
// turn: a notice the homeserver keeps refusing must not be retried forever.
const maxRecoveryAttempts = 3

// journalTurn records an event-woken turn before it is queued and says whether
// to queue it: a turn already journaled (its trigger redelivered from the
// transport's inbox after a crash) belongs to recovery, not to a second run.
// A journal that can't be written is logged and the turn still runs: losing
// durability must not lose the request too.
func (d *Daemon) journalTurn(key sessionKey, req turnRequest) bool {
	if d.turns == nil || req.trigger == "" {
		return true
	}
	fresh, err := d.turns.open(turnRecord{Agent: key.agent, Room: key.room, Thread: key.thread, TurnID: req.id, Trigger: req.trigger})
	if err != nil {
		d.log.Error("journaling a turn; it runs without surviving a crash", "agent", key.agent, "turn", req.id, "err", err)
		return true
	}
	if !fresh {
		d.log.Info("trigger redelivered for a journaled turn; not run again", "agent", key.agent, "turn", req.id)
	}
	return fresh
}

// closingTurn journals a turn's closing words before they are posted; see
// turnRecord.Closing. A failed write is logged: the words are still posted.
func (d *Daemon) closingTurn(key sessionKey, req turnRequest, post *poster, text string) {
	text = strings.TrimSpace(text)
	if d.turns == nil || req.trigger == "" || text == "" {
		return
	}
	r := turnRecord{Agent: key.agent, Room: key.room, Thread: key.thread, TurnID: req.id, Trigger: req.trigger,
		State: turnClosing, At: time.Now().UTC(), Closing: text, Posted: post.posted()}
	if err := d.turns.put(r); err != nil {
		d.log.Error("journaling a turn's closing words", "agent", key.agent, "turn", req.id, "err", err)
	}
}

// endTurn acknowledges a turn in the journal, then traces its end. In that
// order because the trace is what a recording keeps and a replay compares: a
// trace that shows a turn ended must not be followed, after a crash, by that
// turn's recovery (its closing words posted again, or an interrupted notice).
// A daemon that is stopping keeps the record, as the session loop does: the
// turn was cut short and the next start answers it.
func (d *Daemon) endTurn(key sessionKey, req turnRequest, stop string, err error) {
	if d.sessions.ctx.Err() == nil {
		d.turnDone(key, req)
	}
	d.trace.Record(traceTurnEnd(key, req, stop, err))
	faultpoint.Reach(faultpoint.TurnEndTraced)
}

// turnDone acknowledges a turn once it has ended and its posts are sent
// (runTurn posts synchronously), or once a cleared session dropped it.
func (d *Daemon) turnDone(key sessionKey, req turnRequest) {
	if d.turns == nil || req.trigger == "" {
		return
	}
	if err := d.turns.done(key, req.id); err != nil {
		d.log.Error("acknowledging a turn", "agent", key.agent, "turn", req.id, "err", err)
	}
}

// recoverTurns answers every turn a previous run left unfinished (queued or
// running when it died) with a notice that it was interrupted. A turn whose
// agent had already ended it, caught while its closing words were posted, gets
// those words posted instead (same txn ids: whatever landed is not doubled).
//
// Why a notice and not a re-run: an interrupted agent may already have acted
// (edited files, posted half an answer, started task threads); running the
// request again would repeat that without anyone asking twice. The notice
// keeps the request from vanishing and leaves the decision to the person.
//
// Once per trigger across repeated crashes: the attempt is journaled before
// the notice is posted, and the notice's txn ids derive from the turn id
// alone, so a start that crashed after posting re-sends with the same txn ids
// and the homeserver returns the event it already has.
func (d *Daemon) recoverTurns(ctx context.Context) {
	if d.turns == nil {
		return
	}
	recs, err := d.turns.unfinished(time.Now().UTC())
	if err != nil {
		d.log.Error("reading unfinished turns", "err", err)
	}
	for _, r := range recs {
		rt, ok := d.agents[r.Agent]
		if _, isTask := d.tasks.TaskByThread(r.Room, r.Thread); !ok || isTask {
			// Task threads are closed and reported by the task journal
			// (interrupted_by_restart); an agent gone from zooid.yaml has no one
			// to speak for it.
			if err := d.turns.done(sessionKey{agent: r.Agent, room: r.Room, thread: r.Thread}, r.TurnID); err != nil {
				d.log.Error("dropping an unfinished turn", "turn", r.TurnID, "err", err)
			}
			continue
		}
		r.Attempts++
		if err := d.turns.put(r); err != nil {
			d.log.Error("journaling a turn recovery; not answered", "turn", r.TurnID, "err", err)
			continue
		}
		if r.Attempts <= maxRecoveryAttempts {
			var post *poster
			if r.State == turnClosing {
				// The agent had finished: post its closing words as that turn
				// would have, message for message, so what already landed is
				// returned by the homeserver rather than posted again.
				post = &poster{d: d, as: rt.userID, room: r.Room, thread: r.Thread, trigger: r.Trigger, turn: r.TurnID, agent: r.Agent, n: r.Posted}
				post.send(ctx, r.Closing, nil)
			} else {
				post = &poster{d: d, as: rt.userID, room: r.Room, thread: r.Thread, trigger: r.Trigger, turn: "recovery." + r.TurnID, agent: r.Agent}
				post.failure(ctx, "interrupted", fmt.Sprintf("%s was interrupted by a daemon restart before it finished answering this. Ask again to have it answered.", r.Agent))
			}
			if post.sendFailed() {
				// Left open: the next start tries again, with the same txn ids.
				continue
			}
		} else {
			d.log.Error("giving up on answering an unfinished turn", "agent", r.Agent, "turn", r.TurnID, "attempts", r.Attempts-1)
		}
		closing := r.State == turnClosing
		r.State, r.At, r.Closing = turnRecovered, time.Now().UTC(), ""
		if err := d.turns.put(r); err != nil {
			d.log.Error("journaling a recovered turn", "turn", r.TurnID, "err", err)
		}
		if closing {
			d.log.Info("finished turn's closing words posted after a restart", "agent", r.Agent, "room", r.Room, "turn", r.TurnID)
		} else {
			d.log.Info("unfinished turn answered as interrupted", "agent", r.Agent, "room", r.Room, "turn", r.TurnID)
		}
	}
}
