package matrix

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"
)

// syncResponse is the part of a /sync answer the transport uses, kept raw so the inbox holds
// the events exactly as the homeserver sent them.
type syncResponse struct {
	NextBatch string `json:"next_batch"`
	Rooms     struct {
		Join map[id.RoomID]struct {
			Timeline struct {
				Events []json.RawMessage `json:"events"`
			} `json:"timeline"`
		} `json:"join"`
	} `json:"rooms"`
}

// syncLoop long-polls /sync as user until ctx ends, recording each batch together with its
// next_batch token. The very first sync of a user (no stored token) only establishes the
// position: replaying the rooms' history would wake agents on old messages. firstDone is
// called after the first attempt, successful or not.
func (t *Transport) syncLoop(ctx context.Context, user id.UserID, firstDone func()) {
	defer func() {
		if firstDone != nil {
			firstDone()
		}
	}()
	cli := t.Client(user)
	failures := 0
	for ctx.Err() == nil {
		err := t.syncOnce(ctx, cli, user)
		if firstDone != nil {
			firstDone()
			firstDone = nil
		}
		if err == nil {
			failures = 0
			continue
		}
		if ctx.Err() != nil {
			return
		}
		failures++
		wait := backoff(t.backoffBase, failures, 30*time.Second)
		t.log.Warn("sync failed", "user", user, "attempt", failures, "retry_in", wait, "err", err)
		if !sleep(ctx, wait) {
			return
		}
	}
}

func (t *Transport) syncOnce(ctx context.Context, cli *mautrix.Client, user id.UserID) error {
	since, err := t.store.since(user)
	if err != nil {
		return fmt.Errorf("reading since token: %w", err)
	}
	q := map[string]string{"timeout": strconv.Itoa(int(t.syncTimeout / time.Millisecond))}
	if since != "" {
		q["since"] = since
	} else {
		q["timeout"] = "0"
	}
	var resp syncResponse
	_, err = cli.MakeFullRequest(ctx, mautrix.FullRequest{
		Method:       http.MethodGet,
		URL:          cli.BuildURLWithQuery(mautrix.ClientURLPath{"v3", "sync"}, q),
		ResponseJSON: &resp,
		MaxAttempts:  1,
	})
	if err != nil {
		return fmt.Errorf("syncing as %s: %w", user, err)
	}
	if resp.NextBatch == "" {
		return fmt.Errorf("syncing as %s: response has no next_batch", user)
	}
	b := batch{sinceFor: user, since: resp.NextBatch}
	if since != "" {
		for room, jr := range resp.Rooms.Join {
			for _, ev := range jr.Timeline.Events {
				b.events = append(b.events, inboxRecord{Room: room, Event: ev})
			}
		}
	}
	n, err := t.store.record(b)
	if err != nil {
		return fmt.Errorf("recording sync batch for %s: %w", user, err)
	}
	if n > 0 {
		t.notify()
	}
	return nil
}

// backoff doubles base per failure up to limit.
func backoff(base time.Duration, failures int, limit time.Duration) time.Duration {
	d := base
	for i := 1; i < failures && d < limit; i++ {
		d *= 2
	}
	return min(d, limit)
}

// sleep waits d or until ctx ends; it reports whether the full wait elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}
