package steps

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/zooid-dev/zooid/zooid/trace"
)

// tracedRun plays one small room — a mention, a reply in its thread, a tool
// call and a task — with the flight recorder on, waits until every turn's end
// is traced, and returns the trace.
func tracedRun(t *testing.T) *trace.Trace {
	t.Helper()
	r := &runner{backend: fakeBackend{}, log: slog.New(slog.DiscardHandler), wait: 20 * time.Second, turnTimeout: 10 * time.Second}
	ctx := context.Background()
	w := newWorld(r)
	defer w.close()
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.stepUsers(ctx, `"ori" and "mia"`))
	must(w.stepAgents(ctx, `"planner" and "coder"`, `"#ops"`, ""))
	w.traceDir = dir
	must(w.stepWillReply("planner", "looking at svc-a"))
	must(w.stepSays(ctx, "ori", "#ops", "@planner please check svc-a"))
	must(w.stepPostsInThread(ctx, "planner", "looking at svc-a"))
	must(w.stepWillReply("planner", "svc-b noted"))
	must(w.stepReplies(ctx, "mia", "and svc-b too"))
	must(w.stepPostsInThread(ctx, "planner", "svc-b noted"))
	must(w.stepCalls(ctx, "planner", "zooid_get_recent_threads", `{"limit": 5}`))
	must(w.stepReplyAfter("coder", "svc-a is clean", "0.5"))
	must(w.stepCalls(ctx, "planner", "zooid_start_task_threads", `{"tasks": [{"agent": "coder", "prompt": "audit svc-a"}]}`))
	// Queued after the call's own turn: the result's wake takes it.
	must(w.stepWillReply("planner", "noted: svc-a is clean"))
	must(w.stepTaskEnds(ctx, "audit svc-a", "complete", "", "svc-a is clean"))
	must(w.stepPostsInThread(ctx, "planner", "noted: svc-a is clean"))
	must(w.stepTraceWoke(ctx, "#ops", "noted: svc-a is clean", "nobody", trace.WhyAgentPost))
	must(w.stepTraceTask(ctx, "#ops", "coder", trace.StepReported, ""))
	// Every prompt's turn has ended and every post has been seen back:
	// nothing is still being written.
	must(w.eventually(ctx, "every traced turn to end", func() (bool, string, error) {
		tr, err := trace.Read(dir)
		if err != nil {
			return false, err.Error(), nil
		}
		prompts, ends, unechoed := 0, 0, map[string]bool{}
		for _, room := range tr.Rooms {
			for _, rec := range room.Records {
				switch {
				case rec.Kind == trace.KindPrompt:
					prompts++
				case rec.Kind == trace.KindTurnEnd:
					ends++
				case rec.Post != nil && rec.Post.ID != "":
					unechoed[string(rec.Post.ID)] = true
				}
			}
			for _, rec := range room.Records {
				if rec.Event != nil {
					delete(unechoed, string(rec.Event.ID))
				}
			}
		}
		// Every post has also come back as an inbound event with its decision.
		return prompts > 0 && prompts == ends && len(unechoed) == 0, fmt.Sprintf("%d prompts, %d turn ends, %d posts not seen back", prompts, ends, len(unechoed)), nil
	}))
	must(w.close())
	tr, err := trace.Read(dir)
	must(err)
	// A task is reported once, though the caller's wake runs a report of its
	// own after the first one may have finished.
	reported := 0
	for _, room := range tr.Rooms {
		for _, rec := range room.Records {
			if rec.Task != nil && rec.Task.Step == trace.StepReported {
				reported++
			}
		}
	}
	if reported != 1 {
		t.Fatalf("the task is reported %d times in the trace, want once", reported)
	}
	return tr
}

// Two runs of one room on two fresh homeservers (every id differs) compare
// equal; the same run with one routing decision edited yields one difference
// that names it.
func TestTracesOfTwoRunsCompare(t *testing.T) {
	want, got := tracedRun(t), tracedRun(t)
	if d := trace.Compare(want, got); len(d) != 0 {
		t.Fatalf("two runs of the same room differ:\n%s", d)
	}
	if len(want.Rooms) != 1 || len(want.Rooms[0].Records) < 20 {
		t.Fatalf("the trace is too small to prove anything: %d rooms", len(want.Rooms))
	}
	edited := false
	for i, rec := range got.Rooms[0].Records {
		if rec.Event != nil && strings.Contains(rec.Event.Text, "and svc-b too") {
			e := *rec.Event
			e.Woke, e.Nobody = nil, trace.WhyNotNotified
			got.Rooms[0].Records[i].Event = &e
			edited = true
		}
	}
	if !edited {
		t.Fatal("no event of the reply in got's trace to edit")
	}
	d := trace.Compare(want, got)
	if len(d) != 1 || d[0].Stream != "routing" || !strings.Contains(d[0].What, `"and svc-b too": want woke planner (addressee, thread `) || !strings.HasSuffix(d[0].What, "got woke nobody (nobody_addressed)") {
		t.Fatalf("want one routing difference naming the reply and both decisions, got:\n%s", d)
	}
}
