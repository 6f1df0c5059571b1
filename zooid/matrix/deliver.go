package matrix

import (
	"context"
	"encoding/json"
	"runtime/debug"
	"sync"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// dispatcher moves inbox records to one worker per room, so a slow handler in one room does
// not hold up the others while each room keeps its order. A record leaves the inbox only
// after handle returns, so a crash redelivers rather than loses.
type dispatcher struct {
	t      *Transport
	handle Handler
	// mu serialises pumps: the dispatcher's own loop and the pushes that
	// pump what they filed themselves (pumpFiled). It guards the fields up
	// to wg.
	mu      sync.Mutex
	ctx     context.Context // run's: the workers' lifetime
	last    uint64          // highest sequence handed to a worker
	scanned bool            // the inbox was read once: what it held at start is dispatched
	workers map[id.RoomID]*roomWorker
	wg      sync.WaitGroup
	acks    acks
}

// acks are the handled records waiting to leave the inbox. One goroutine
// deletes whatever has gathered in one transaction (one commit, one sync)
// while the workers go on: a commit per record put every room's next event
// behind every other room's sync. A record not yet deleted when the daemon
// dies is redelivered at start, as one whose handler had just returned.
type acks struct {
	mu   sync.Mutex
	seqs []uint64
	kick chan struct{}
}

type roomWorker struct {
	mu    sync.Mutex
	queue []pending
	kick  chan struct{}
}

func newDispatcher(t *Transport, handle Handler) *dispatcher {
	return &dispatcher{t: t, handle: handle, workers: map[id.RoomID]*roomWorker{}, acks: acks{kick: make(chan struct{}, 1)}}
}

func (d *dispatcher) run(ctx context.Context) {
	// The acknowledger outlives the workers (wg is waited for first, deferred
	// last), so the records they handled are deleted before run returns.
	ackCtx, stopAcks := context.WithCancel(context.WithoutCancel(ctx))
	ackDone := make(chan struct{})
	go func() {
		defer close(ackDone)
		d.acknowledge(ackCtx)
	}()
	defer func() { <-ackDone }()
	defer stopAcks()
	defer d.wg.Wait()
	// run returns only once ctx has ended, so a pump that takes mu after
	// this barrier sees that and starts no worker; one that held it when
	// ctx ended has added its workers to wg before the Wait.
	defer func() {
		d.mu.Lock()
		d.mu.Unlock()
	}()
	d.mu.Lock()
	d.ctx = ctx
	d.mu.Unlock()
	// A periodic rescan covers a failed read; the wake channel covers the
	// first pump and a push that found the dispatcher busy.
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		d.mu.Lock()
		if ctx.Err() == nil {
			d.pump(ctx)
		}
		d.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-d.t.wake:
		case <-tick.C:
		}
	}
}

// pumpFiled pumps on the caller's goroutine, for a push that has just filed
// records: they reach their room's worker without waiting for the
// dispatcher's loop to be scheduled (a hop that, on a loaded machine, was
// the larger part of a push's way to its prompt). It reports false, having
// done nothing, before run has started, after it stopped, or while another
// pump runs (that one, or the loop nudged after it, takes the records).
func (d *dispatcher) pumpFiled() bool {
	if !d.mu.TryLock() {
		return false
	}
	defer d.mu.Unlock()
	if d.ctx == nil || d.ctx.Err() != nil {
		return false
	}
	d.pump(d.ctx)
	return true
}

// pump dispatches the inbox's records after the last one dispatched; d.mu is
// held. Records
// just filed come handed over (Transport.handOver) and are taken as they are
// when they follow on without a gap; otherwise (the first pump, records filed
// by two /sync loops out of order, a failed read before) the inbox is read.
func (d *dispatcher) pump(ctx context.Context) {
	items, ok := following(d.t.takeHanded(), d.last)
	if !ok || !d.scanned {
		var err error
		if items, err = d.t.store.pendingAfter(d.last); err != nil {
			// The next pump (a push, or the periodic one) reads again.
			d.scanned = false
			d.t.log.Error("reading inbox", "err", err)
			return
		}
		d.scanned = true
	}
	for _, p := range items {
		d.last = p.seq
		if !d.t.isBound(p.rec.Room) {
			// Not for any agent: drop it here rather than start a worker for the room.
			d.t.log.Debug("ignoring event of unbound room", "room", p.rec.Room, "seq", p.seq)
			d.ack(p.seq)
			continue
		}
		w := d.workers[p.rec.Room]
		if w == nil {
			w = &roomWorker{kick: make(chan struct{}, 1)}
			d.workers[p.rec.Room] = w
			d.wg.Add(1)
			go func() {
				defer d.wg.Done()
				d.work(ctx, w)
			}()
		}
		w.mu.Lock()
		w.queue = append(w.queue, p)
		w.mu.Unlock()
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

// following drops the records at or before last and says whether the rest
// follow on from last without a gap (none left counts as following).
func following(items []pending, last uint64) ([]pending, bool) {
	out := items[:0]
	for _, p := range items {
		if p.seq > last {
			out = append(out, p)
		}
	}
	for i, p := range out {
		if p.seq != last+uint64(i)+1 {
			return nil, false
		}
	}
	return out, true
}

func (d *dispatcher) work(ctx context.Context, w *roomWorker) {
	for {
		w.mu.Lock()
		var p pending
		ok := len(w.queue) > 0
		if ok {
			p = w.queue[0]
			w.queue = w.queue[1:]
		}
		w.mu.Unlock()
		if !ok {
			select {
			case <-ctx.Done():
				return
			case <-w.kick:
				continue
			}
		}
		if ctx.Err() != nil {
			return
		}
		d.deliver(ctx, p)
	}
}

func (d *dispatcher) deliver(ctx context.Context, p pending) {
	ev, err := decodeEvent(p.rec)
	switch {
	case err != nil:
		d.t.log.Warn("dropping undecodable event", "seq", p.seq, "err", err)
	case !d.t.isBound(ev.RoomID):
		d.t.log.Debug("ignoring event of unbound room", "room", ev.RoomID, "event", ev.ID)
	default:
		d.t.state.Apply(ev)
		d.call(ctx, d.t.decrypted(ctx, ev))
	}
	d.ack(p.seq)
}

// ack hands a handled record to the acknowledger.
func (d *dispatcher) ack(seq uint64) {
	d.acks.mu.Lock()
	d.acks.seqs = append(d.acks.seqs, seq)
	d.acks.mu.Unlock()
	select {
	case d.acks.kick <- struct{}{}:
	default:
	}
}

// acknowledge deletes handled records from the inbox, all that gathered
// since the last commit in one, until ctx ends; then it deletes the rest.
// A failed delete keeps its records for the next round.
func (d *dispatcher) acknowledge(ctx context.Context) {
	linger := time.NewTimer(0)
	<-linger.C
	for {
		stopping := false
		select {
		case <-d.acks.kick:
			// The records handled are queued for the inbox's next commit;
			// while pushes come, theirs carry the deletions (store.forget).
			d.acks.mu.Lock()
			seqs := d.acks.seqs
			d.acks.seqs = nil
			d.acks.mu.Unlock()
			d.t.store.forget(seqs...)
			if len(seqs) == 0 {
				continue
			}
			// What no push took within ackLinger is deleted in a commit of
			// its own, off the pushes' way most of the time.
			linger.Reset(ackLinger)
			select {
			case <-linger.C:
			case <-ctx.Done():
				linger.Stop()
				stopping = true
			}
		case <-ctx.Done():
			stopping = true
		}
		if stopping {
			d.acks.mu.Lock()
			d.t.store.forget(d.acks.seqs...)
			d.acks.seqs = nil
			d.acks.mu.Unlock()
		}
		if n, err := d.t.store.flush(); err != nil {
			d.t.log.Error("marking events handled", "events", n, "err", err)
		}
		if stopping {
			return
		}
	}
}

// ackLinger is how long handled records wait for a push's commit to delete
// them before the acknowledger commits their deletion itself: long enough
// that a busy inbox makes few commits of its own, short enough that an idle
// one is cleaned up at once as a person sees it.
const ackLinger = 50 * time.Millisecond

// call runs the handler, containing a panic: a poison event must not crash the daemon on
// every start by being redelivered from the inbox.
func (d *dispatcher) call(ctx context.Context, ev *event.Event) {
	defer func() {
		if p := recover(); p != nil {
			d.t.log.Error("event handler panicked; event dropped", "event", ev.ID, "room", ev.RoomID, "panic", p, "stack", string(debug.Stack()))
		}
	}()
	d.handle(ctx, ev)
}

// decodeEvent parses a recorded event the way mautrix clients expect: class from the
// presence of a state key, content parsed for known types with the raw map kept.
func decodeEvent(rec inboxRecord) (*event.Event, error) {
	ev := &event.Event{}
	if err := json.Unmarshal(rec.Event, ev); err != nil {
		return nil, err
	}
	if ev.RoomID == "" {
		ev.RoomID = rec.Room
	}
	if ev.StateKey != nil {
		ev.Type.Class = event.StateEventType
	} else {
		ev.Type.Class = event.MessageEventType
	}
	// Types nobody registered in event.TypeMap stay unparsed (zevent registers
	// Zooid's own); their content is in ev.Content.Raw.
	_ = ev.Content.ParseRaw(ev.Type)
	return ev, nil
}
