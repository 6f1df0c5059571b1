package steps

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/zooid-dev/zooid/zooid/trace"
)

// Reading the daemon's trace back: waiting for a record of a room.

// traceRecord waits until the named room's trace holds a record match
// accepts.
func (w *world) traceRecord(ctx context.Context, roomName, what string, match func(trace.Record) (bool, error)) (trace.Record, error) {
	if w.traceDir == "" {
		return trace.Record{}, errors.New("the daemon keeps no trace; add: the daemon keeps a trace")
	}
	if err := w.start(ctx); err != nil {
		return trace.Record{}, err
	}
	r, err := w.room(ctx, roomName)
	if err != nil {
		return trace.Record{}, err
	}
	return w.awaitTraceRecord(ctx, r, what, match)
}

// awaitTraceRecord waits until r's trace holds a record match accepts. A
// match error is a record of the right kind that says something else: the
// wait goes on in case a later one matches, and reports it if none does.
func (w *world) awaitTraceRecord(ctx context.Context, r *room, what string, match func(trace.Record) (bool, error)) (trace.Record, error) {
	var found trace.Record
	var matchErr error
	err := w.eventually(ctx, what, func() (bool, string, error) {
		tr, err := trace.Read(w.traceDir)
		if err != nil {
			return false, err.Error(), nil
		}
		room, ok := tr.Room(r.id)
		if !ok {
			return false, "no trace of " + r.name + " yet", nil
		}
		for _, rec := range room.Records {
			ok, err := match(rec)
			if err != nil {
				matchErr = err
				continue
			}
			if ok {
				found = rec
				return true, "", nil
			}
		}
		if matchErr != nil {
			return false, matchErr.Error(), nil
		}
		return false, fmt.Sprintf("%d records, none matching", len(room.Records)), nil
	})
	return found, err
}

// splitNames reads "a", "a and b", "a, b and c".
func splitNames(s string) []string {
	var out []string
	for _, part := range strings.Split(strings.ReplaceAll(s, " and ", ", "), ", ") {
		out = append(out, strings.TrimSpace(part))
	}
	return out
}
