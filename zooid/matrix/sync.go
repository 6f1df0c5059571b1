package matrix

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/internal/mxcall"
)

// syncResponse is the part of a /sync answer the transport uses, kept raw so the inbox holds
// the events exactly as the homeserver sent them.
type syncResponse struct {
	NextBatch string `json:"next_batch"`
	Rooms     struct {
		Join map[id.RoomID]struct {
			Timeline struct {
				Events    []json.RawMessage `json:"events"`
				Limited   bool              `json:"limited"`
				PrevBatch string            `json:"prev_batch"`
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
		if !mxcall.Sleep(ctx, wait) {
			return
		}
	}
}

func (t *Transport) syncOnce(ctx context.Context, cli *mautrix.Client, user id.UserID) error {
	since, err := t.store.since(user)
	if err != nil {
		return fmt.Errorf("reading since token: %w", err)
	}
	q := map[string]string{
		"timeout": strconv.Itoa(int(t.syncTimeout / time.Millisecond)),
		"filter":  fmt.Sprintf(`{"room":{"timeline":{"limit":%d}}}`, t.syncTimelineLimit),
	}
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
	b := batch{sinceFor: user, since: resp.NextBatch, seenOnly: since == ""}
	for room, jr := range resp.Rooms.Join {
		evs := jr.Timeline.Events
		if since != "" && jr.Timeline.Limited && jr.Timeline.PrevBatch != "" {
			// More arrived than the timeline holds (the daemon was down, or busy):
			// fetch the gap so nothing is lost.
			gap, err := t.fillGap(ctx, cli, room, jr.Timeline.PrevBatch)
			if err != nil {
				return fmt.Errorf("filling timeline gap of %s as %s: %w", room, user, err)
			}
			evs = append(gap, evs...)
		}
		for _, ev := range afterOwnJoin(evs, user) {
			b.events = append(b.events, inboxRecord{Room: room, Event: ev})
		}
	}
	t.log.Debug("sync batch", "user", user, "since", since, "next_batch", resp.NextBatch, "events", len(b.events))
	n, _, err := t.store.record(b)
	if err != nil {
		return fmt.Errorf("recording sync batch for %s: %w", user, err)
	}
	t.handOver(n)
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

// memberEvent is the part of an m.room.member event needed to spot a fresh join.
type memberEvent struct {
	Type     string  `json:"type"`
	StateKey *string `json:"state_key"`
	Content  struct {
		Membership string `json:"membership"`
	} `json:"content"`
	Unsigned struct {
		PrevContent *struct {
			Membership string `json:"membership"`
		} `json:"prev_content"`
	} `json:"unsigned"`
}

// afterOwnJoin drops the history before user's own fresh join in a timeline: a room joined
// since the last sync comes with earlier messages, which were never meant for the agent.
func afterOwnJoin(evs []json.RawMessage, user id.UserID) []json.RawMessage {
	cut := 0
	for i, raw := range evs {
		var m memberEvent
		if json.Unmarshal(raw, &m) != nil || m.Type != "m.room.member" || m.StateKey == nil || *m.StateKey != string(user) {
			continue
		}
		if m.Content.Membership == "join" && (m.Unsigned.PrevContent == nil || m.Unsigned.PrevContent.Membership != "join") {
			cut = i
		}
	}
	return evs[cut:]
}

// maxGapPages bounds a gap fill; beyond it older messages are given up as stale.
const maxGapPages = 20

// fillGap pages back from prevBatch until it reaches an event already seen, returning the
// unseen events oldest first.
func (t *Transport) fillGap(ctx context.Context, cli *mautrix.Client, room id.RoomID, prevBatch string) ([]json.RawMessage, error) {
	var back []json.RawMessage // newest first
	from := prevBatch
	for page := 0; page < maxGapPages && from != ""; page++ {
		var resp struct {
			Chunk []json.RawMessage `json:"chunk"`
			End   string            `json:"end"`
		}
		_, err := cli.MakeFullRequest(ctx, mautrix.FullRequest{
			Method: http.MethodGet,
			URL: cli.BuildURLWithQuery(mautrix.ClientURLPath{"v3", "rooms", room, "messages"}, map[string]string{
				"from": from, "dir": "b", "limit": strconv.Itoa(t.syncTimelineLimit),
			}),
			ResponseJSON: &resp,
			MaxAttempts:  1,
		})
		if err != nil {
			return nil, err
		}
		for _, raw := range resp.Chunk {
			var re rawEvent
			if json.Unmarshal(raw, &re) == nil && re.ID != "" {
				seen, err := t.store.seen(re.ID)
				if err != nil {
					return nil, err
				}
				if seen {
					slices.Reverse(back)
					return back, nil
				}
			}
			back = append(back, raw)
		}
		if len(resp.Chunk) == 0 || resp.End == from {
			slices.Reverse(back)
			return back, nil
		}
		from = resp.End
	}
	if from != "" {
		// Given up before reaching what was seen: the state events in the
		// part left out never reach the room state, so it is read again.
		t.state.Stale(room)
	}
	slices.Reverse(back)
	return back, nil
}
