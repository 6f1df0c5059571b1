package daemon

import (
	"context"
	"slices"
	"time"

	"github.com/zooid-dev/zooid/zooid/mcpserver"
	"github.com/zooid-dev/zooid/zooid/tools"
)

// prewarm starts a spare process of rt's agent when the pool wants one (see
// procPool): the next thread of the agent then skips the process start and
// ACP initialize. Its keeper goroutine belongs to the daemon and ends by
// Close.
func (d *Daemon) prewarm(rt *agentRuntime) {
	d.spareMu.Lock()
	defer d.spareMu.Unlock()
	if d.spareCtx.Err() != nil {
		return // closing: no new processes
	}
	p, ok := d.pool.wantSpare(rt.cfg.Name)
	if !ok {
		return
	}
	d.spareWG.Add(1)
	go func() {
		defer d.spareWG.Done()
		d.keepSpare(rt, p)
	}()
}

// keepSpare starts the spare p and keeps it until a turn takes it or a cap
// pushes it out (either then owns it), or until it idles out, dies or the
// daemon closes, when it stops p itself. A spare that fails to start is
// reported and not tried again until a turn of its agent asks for a process.
func (d *Daemon) keepSpare(rt *agentRuntime, p *proc) {
	ctx, cancel := context.WithTimeout(d.spareCtx, d.opts.StartTimeout)
	defer cancel()
	began := time.Now()
	conn, err := d.startProcess(ctx, rt, p)
	if err == nil && rt.piDir == "" {
		// A spare session too, so the thread skips session/new, which for
		// a real agent is most of its start. Its tools are bound pending:
		// the thread is named when a turn takes it. (pi's extension names
		// its session by the ACP id at connect, so pi opens its own.)
		caller := tools.Caller{Agent: rt.cfg.Name, UserID: rt.userID, Transport: "matrix", Rooms: slices.Clone(rt.rooms), Kind: tools.Conversation}
		binding, sess, serr := d.newACPSession(ctx, rt, p, conn, func(owner mcpserver.Process) string { return d.mcp.BindPending(caller, owner) })
		switch {
		case serr != nil:
			d.log.Warn("opening a spare session; the next thread opens its own", "agent", rt.cfg.Name, "err", serr)
		default:
			p.setSpareSession(&spareSession{sess: sess, binding: binding})
			d.pool.bind(p, binding)
		}
	}
	cancel()
	if err != nil {
		if d.spareCtx.Err() == nil {
			d.log.Warn("starting a spare agent process", "agent", rt.cfg.Name, "err", err)
		}
		d.pool.failed(p, err)
		return
	}
	if !d.pool.started(p, conn, conn.Capabilities()) {
		// Taken, then given up by its taker while it started.
		d.stopProc(p)
		return
	}
	d.log.Debug("spare agent process ready", "agent", rt.cfg.Name, "pid", p.agentPid, "took", time.Since(began))
	idle := time.NewTimer(d.opts.IdleTimeout)
	defer idle.Stop()
	select {
	case <-p.unspared:
		return
	case <-idle.C:
		d.log.Info("spare agent process idle; stopped until the agent is asked again", "agent", rt.cfg.Name)
	case <-conn.Done():
		d.log.Warn("spare agent process exited", "agent", rt.cfg.Name, "err", conn.Err())
	case <-d.spareCtx.Done():
	}
	if d.pool.dropSpare(p) {
		d.stopProc(p)
	}
}

// dropSpareSession lets go of a spare session no thread will use: its
// binding goes, and an agent that can close a session frees what it holds.
func (d *Daemon) dropSpareSession(rt *agentRuntime, p *proc, ss *spareSession) {
	d.mcp.Unbind(ss.binding)
	if p.conn == nil || p.conn.Capabilities().SessionCapabilities.Close == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), sessionCloseTimeout)
	defer cancel()
	if err := ss.sess.Close(ctx); err != nil {
		d.log.Warn("closing an unused spare session in its agent", "agent", rt.cfg.Name, "session", ss.sess.ID(), "err", err)
	}
}

// stopSpares ends the spares and waits for their keepers; Close calls it
// once every session has ended, so no turn takes a spare any more.
func (d *Daemon) stopSpares() {
	d.spareMu.Lock()
	d.spareStop()
	d.spareMu.Unlock()
	d.spareWG.Wait()
}

// SpareReady says whether the agent named has a spare process started and
// initialized now (prewarm: true), with its spare session open where the
// agent gets one, so a harness can wait for one before it times a thread's
// first answer.
func (d *Daemon) SpareReady(agent string) bool {
	p := d.pool.spareOf(agent)
	if p == nil {
		return false
	}
	d.pool.mu.Lock()
	ready := p.ready && !p.stopping
	d.pool.mu.Unlock()
	if !ready {
		return false
	}
	if rt := d.agents[agent]; rt != nil && rt.piDir != "" {
		return true // pi opens no spare session
	}
	p.smu.Lock()
	defer p.smu.Unlock()
	return p.spareSess != nil
}
