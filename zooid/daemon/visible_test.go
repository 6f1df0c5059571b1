package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/zooid-dev/zooid/zooid/tools"
)

// A tool call held by its turn's visibility check goes ahead once half of its
// own tool_timeout is spent, so a tool_timeout shorter than the check's bound
// (visibleWait) still leaves the call time to answer rather than timing it out
// in the wait.
func TestAToolCallHeldByAnUnfinishedCheckGoesAheadWithinItsOwnDeadline(t *testing.T) {
	var g readGate
	key := sessionKey{agent: "coder", room: "!r:test", thread: "$t"}
	never := make(chan struct{}) // a check that does not end within the call's deadline
	g.hold(key, never)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	g.await(ctx, tools.Caller{SessionKey: key.String()})
	if err := ctx.Err(); err != nil {
		t.Fatalf("the call left the gate only when its deadline had passed (%v); want it to go ahead with time left", err)
	}
	if left := time.Until(mustDeadline(t, ctx)); left > 1500*time.Millisecond {
		t.Fatalf("the call went ahead with %v of 2s left; want it held for about half (its trigger may still become readable)", left)
	}
}

// A call whose check has ended, or whose session holds none, is not held.
func TestAToolCallWithNoUnfinishedCheckIsNotHeld(t *testing.T) {
	var g readGate
	key := sessionKey{agent: "coder", room: "!r:test", thread: "$t"}
	done := make(chan struct{})
	close(done)
	g.hold(key, done)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	g.await(ctx, tools.Caller{SessionKey: key.String()})
	g.release(key, done)
	g.await(ctx, tools.Caller{SessionKey: key.String()})
	if left := time.Until(mustDeadline(t, ctx)); left < 59*time.Second {
		t.Fatalf("the call waited %v; want no wait", time.Minute-left)
	}
}

func mustDeadline(t *testing.T, ctx context.Context) time.Time {
	t.Helper()
	dl, ok := ctx.Deadline()
	if !ok {
		t.Fatal("the context has no deadline")
	}
	return dl
}
