package steps

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// postsWorld is a world on fakehs where planner answered a mention in a
// thread with "looking at svc-a".
func postsWorld(t *testing.T) (*world, *runner) {
	t.Helper()
	r := &runner{backend: fakeBackend{}, log: slog.New(slog.DiscardHandler), wait: 20 * time.Second, turnTimeout: 10 * time.Second}
	w := newWorld(r)
	t.Cleanup(func() { _ = w.close() })
	ctx := context.Background()
	for _, err := range []error{
		w.stepUsers(ctx, `"ori" and "mia"`),
		w.stepAgents(ctx, `"planner"`, `"#ops"`, ""),
		w.stepWillReply("planner", "looking at svc-a"),
		w.stepSays(ctx, "ori", "#ops", "@planner please check svc-a"),
		w.stepPostsInThread(ctx, "planner", "looking at svc-a"),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return w, r
}

// The posts step waits on the thread alone, but counts the room: a copy the
// agent also posted outside the thread fails it.
func TestPostsInThreadCountsACopyOutsideTheThread(t *testing.T) {
	w, _ := postsWorld(t)
	ctx := context.Background()
	if err := w.stepCalls(ctx, "planner", "zooid_send_message", `{"room": "#ops", "text": "looking at svc-a"}`); err != nil {
		t.Fatal(err)
	}
	err := w.stepPostsInThread(ctx, "planner", "looking at svc-a")
	if err == nil || !strings.Contains(err.Error(), `planner posted "looking at svc-a" 2 times`) {
		t.Fatalf("posts step with a copy top-level: %v, want it posted 2 times", err)
	}
}

// A post that only landed outside the thread is named as such when the wait
// for it in the thread runs out.
func TestPostsInThreadSaysWhenThePostIsOutsideTheThread(t *testing.T) {
	w, r := postsWorld(t)
	ctx := context.Background()
	if err := w.stepCalls(ctx, "planner", "zooid_send_message", `{"room": "#ops", "text": "status: green"}`); err != nil {
		t.Fatal(err)
	}
	r.wait = time.Second // the post is there already: the wait can only run out
	err := w.stepPostsInThread(ctx, "planner", "status: green")
	if err == nil || !strings.Contains(err.Error(), "outside the thread") || !strings.Contains(err.Error(), `"status: green"`) {
		t.Fatalf("posts step for a post outside the thread: %v, want it named outside the thread", err)
	}
}
