package daemon

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/internal/mxcall"
	"github.com/zooid-dev/zooid/zooid/tools"
)

// visibleWait bounds how long a turn waits for its trigger to be readable.
const visibleWait = 5 * time.Second

// awaitVisible waits until the event that woke an agent is readable by the
// agent (GET /event). A homeserver may push an event before /messages,
// /event and /relations show it; an agent that reads its thread at once
// would then find its own trigger missing, or the thread root unknown. A
// new session's prompt waits for it (it runs while the agent starts); a
// warm session's prompt does not, its tool calls do (readGate). On
// a server that shows events at once this costs one request per turn; on
// timeout or another error the turn goes ahead. An agent that is not a joined
// member (removed while still bound) will never read its trigger, so the
// first miss checks its membership and goes ahead at once rather than wait
// out the bound on every turn.
func (d *Daemon) awaitVisible(ctx context.Context, as id.UserID, room id.RoomID, evt id.EventID) {
	if d.transport == nil || evt == "" || room == "" || room[0] != '!' {
		return
	}
	cli := d.transport.Client(as)
	ctx, cancel := context.WithTimeout(ctx, visibleWait)
	defer cancel()
	err := mxcall.AwaitEvent(ctx, cli, room, evt, func() bool { return joined(ctx, cli, room, as) })
	switch {
	case err == nil:
	case errors.Is(err, mxcall.ErrGaveUp):
		d.log.Debug("the woken agent is not a member; its trigger will not become visible", "event", evt, "room", room, "agent", as)
	case ctx.Err() != nil:
		d.log.Warn("trigger not visible to reads in time; the turn goes ahead", "event", evt, "room", room, "waited", visibleWait)
	default:
		d.log.Debug("checking the trigger is visible", "event", evt, "err", err)
	}
}

// checkVisible starts the check that trigger is readable by key's agent as
// its turn is queued, so the request runs while the event is routed and the
// session's loop wakes rather than before the prompt; the returned channel
// is closed when the check is over. The sessions own the goroutine: it ends
// with their context (and within visibleWait) and close waits for it.
func (d *Daemon) checkVisible(key sessionKey, trigger id.EventID) <-chan struct{} {
	rt := d.agents[key.agent]
	if rt == nil || d.transport == nil || trigger == "" {
		return nil
	}
	done := make(chan struct{})
	m := d.sessions
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer close(done)
		d.awaitVisible(m.ctx, rt.userID, key.room, trigger)
	}()
	return done
}

// visibleCheck is the check that req's trigger is readable by key's agent:
// the one started as the turn was queued, else one started now; nil when
// there is nothing to check.
func (d *Daemon) visibleCheck(key sessionKey, req turnRequest) <-chan struct{} {
	if req.visible != nil {
		return req.visible
	}
	return d.checkVisible(key, req.trigger)
}

// readGate holds a session's tool calls while the check that its turn's
// trigger is readable runs. The prompt of a warm session goes out without
// waiting for that check (a homeserver round trip on every turn, the larger
// part of push-to-prompt under load); an agent that reads its thread at once
// is the one that needs its trigger shown, and its reads all go through the
// Zooid tools, so they are what waits (mcpserver.Options.BeforeCall).
type readGate struct {
	mu    sync.Mutex
	until map[string]<-chan struct{} // by sessionKey.String()
}

// hold makes key's tool calls wait until visible is closed.
func (g *readGate) hold(key sessionKey, visible <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.until == nil {
		g.until = map[string]<-chan struct{}{}
	}
	g.until[key.String()] = visible
}

// release forgets key's hold when it is still visible's: the turn ended.
func (g *readGate) release(key sessionKey, visible <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.until[key.String()] == visible {
		delete(g.until, key.String())
	}
}

// await waits, before one of c's tool calls, until c's session holds no
// unfinished check. Like a new session's prompt, the call goes ahead when the
// check takes too long: after half of what is left of ctx's deadline (the
// call's tool_timeout), so a tool_timeout shorter than visibleWait still
// leaves the call the other half to answer in, or when ctx ends.
func (g *readGate) await(ctx context.Context, c tools.Caller) {
	g.mu.Lock()
	visible := g.until[c.SessionKey]
	g.mu.Unlock()
	if visible == nil {
		return
	}
	var giveUp <-chan time.Time
	if dl, ok := ctx.Deadline(); ok {
		t := time.NewTimer(time.Until(dl) / 2)
		defer t.Stop()
		giveUp = t.C
	}
	select {
	case <-visible:
	case <-giveUp:
	case <-ctx.Done():
	}
}

// triggerVisible waits until req's trigger is readable by rt's agent (or
// the check gave up): on the check started as the turn was queued, else by
// checking now.
func (d *Daemon) triggerVisible(ctx context.Context, rt *agentRuntime, room id.RoomID, req turnRequest) {
	if req.visible == nil {
		d.awaitVisible(ctx, rt.userID, room, req.trigger)
		return
	}
	select {
	case <-req.visible:
	case <-ctx.Done():
	}
}

// joined says whether as is a joined member of room by its own membership
// event. A refusal or any answer but join is "no"; an error of another kind
// is "yes", so the caller keeps waiting as it did before it asked.
func joined(ctx context.Context, cli *mautrix.Client, room id.RoomID, as id.UserID) bool {
	var member event.MemberEventContent
	err := cli.StateEvent(ctx, room, event.StateMember, as.String(), &member)
	switch {
	case err == nil:
		return member.Membership == event.MembershipJoin
	case errors.Is(err, mautrix.MForbidden), mxcall.NotFound(err), mxcall.Status(err) == http.StatusForbidden:
		return false
	default:
		return true
	}
}
