// Package mxcall holds what the daemon's packages do around a Matrix
// client's calls, each in one place: the HTTP status of a failed call, a
// sleep between retries that ends with its context, and waiting until an
// event is readable (a homeserver may push an event before /event,
// /messages and /relations show it).
package mxcall

import (
	"context"
	"errors"
	"net/http"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"
)

// Status is the HTTP status of a failed call, 0 when there was no answer.
func Status(err error) int {
	var he mautrix.HTTPError
	if errors.As(err, &he) && he.Response != nil {
		return he.Response.StatusCode
	}
	var hp *mautrix.HTTPError
	if errors.As(err, &hp) && hp.Response != nil {
		return hp.Response.StatusCode
	}
	return 0
}

// NotFound says the call was answered 404 (M_NOT_FOUND or a bare 404).
func NotFound(err error) bool {
	return errors.Is(err, mautrix.MNotFound) || Status(err) == http.StatusNotFound
}

// Sleep waits d unless ctx ends first; it reports whether the whole wait
// elapsed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// FirstDelay is AwaitEvent's wait after the first miss; it doubles up to
// MaxDelay.
const (
	FirstDelay = 10 * time.Millisecond
	MaxDelay   = 200 * time.Millisecond
)

// AwaitEvent asks for evt (GET /event) until cli can read it: nil then. A
// miss (404) waits FirstDelay, doubling up to MaxDelay, until ctx ends
// (ctx's error). Any other failure ends the wait with that error. After the
// first miss, keepWaiting (when set) is asked once whether the event can
// still become readable; false ends the wait with ErrGaveUp.
func AwaitEvent(ctx context.Context, cli *mautrix.Client, room id.RoomID, evt id.EventID, keepWaiting func() bool) error {
	for delay := FirstDelay; ; delay = min(2*delay, MaxDelay) {
		_, err := cli.GetEvent(ctx, room, evt)
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case !NotFound(err):
			return err
		}
		if delay == FirstDelay && keepWaiting != nil && !keepWaiting() {
			return ErrGaveUp
		}
		if !Sleep(ctx, delay) {
			return ctx.Err()
		}
	}
}

// ErrGaveUp is AwaitEvent's answer when its caller said the event will not
// become readable.
var ErrGaveUp = errors.New("the event will not become readable")
