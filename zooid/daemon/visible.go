package daemon

import (
	"context"
	"errors"
	"net/http"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// visibleWait bounds how long a turn waits for its trigger to be readable.
const visibleWait = 5 * time.Second

// firstDelay is the wait after the first miss; it doubles up to 200 ms.
const firstDelay = 10 * time.Millisecond

// awaitVisible waits until the event that woke an agent is readable by the
// agent (GET /event). A homeserver may push an event before /messages,
// /event and /relations show it; an agent that reads its thread at once
// would then find its own trigger missing, or the thread root unknown. On
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
	delay := firstDelay
	for {
		_, err := cli.GetEvent(ctx, room, evt)
		if err == nil {
			return
		}
		var he mautrix.HTTPError
		if !errors.Is(err, mautrix.MNotFound) && !(errors.As(err, &he) && he.Response != nil && he.Response.StatusCode == http.StatusNotFound) {
			d.log.Debug("checking the trigger is visible", "event", evt, "err", err)
			return
		}
		if delay == firstDelay && !joined(ctx, cli, room, as) {
			d.log.Debug("the woken agent is not a member; its trigger will not become visible", "event", evt, "room", room, "agent", as)
			return
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			d.log.Warn("trigger not visible to reads in time; the turn goes ahead", "event", evt, "room", room, "waited", visibleWait)
			return
		case <-t.C:
		}
		delay = min(delay*2, 200*time.Millisecond)
	}
}

// joined says whether as is a joined member of room by its own membership
// event. A refusal or any answer but join is "no"; an error of another kind
// is "yes", so the caller keeps waiting as it did before it asked.
func joined(ctx context.Context, cli *mautrix.Client, room id.RoomID, as id.UserID) bool {
	var member event.MemberEventContent
	err := cli.StateEvent(ctx, room, event.StateMember, as.String(), &member)
	var he mautrix.HTTPError
	switch {
	case err == nil:
		return member.Membership == event.MembershipJoin
	case errors.Is(err, mautrix.MForbidden), errors.Is(err, mautrix.MNotFound):
		return false
	case errors.As(err, &he) && he.Response != nil && (he.Response.StatusCode == http.StatusForbidden || he.Response.StatusCode == http.StatusNotFound):
		return false
	default:
		return true
	}
}
