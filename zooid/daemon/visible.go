package daemon

import (
	"context"
	"errors"
	"net/http"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"
)

// visibleWait bounds how long a turn waits for its trigger to be readable.
const visibleWait = 5 * time.Second

// awaitVisible waits until the event that woke an agent is readable by the
// agent (GET /event). A homeserver may push an event before /messages,
// /event and /relations show it; an agent that reads its thread at once
// would then find its own trigger missing, or the thread root unknown. On
// a server that shows events at once this costs one request per turn; on
// timeout or another error the turn goes ahead.
func (d *Daemon) awaitVisible(ctx context.Context, as id.UserID, room id.RoomID, evt id.EventID) {
	if d.transport == nil || evt == "" || room == "" || room[0] != '!' {
		return
	}
	cli := d.transport.Client(as)
	ctx, cancel := context.WithTimeout(ctx, visibleWait)
	defer cancel()
	delay := 10 * time.Millisecond
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
