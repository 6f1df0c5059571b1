package steps

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"
)

// BenchmarkScenarioSetup measures what every scenario pays before its first
// step acts: a fresh fakehs, two humans, a room with three agents bound (one
// with trigger any) and the daemon started and joined. The target is
// milliseconds, so hundreds of scenarios stay cheap.
func BenchmarkScenarioSetup(b *testing.B) {
	benchSetup(b, 0)
}

// BenchmarkScenarioSetupBusyRoom adds a generated history of 2000 messages
// in 40 threads, imported in one go.
func BenchmarkScenarioSetupBusyRoom(b *testing.B) {
	benchSetup(b, 2000)
}

func benchSetup(b *testing.B, messages int) {
	r := &runner{backend: fakeBackend{}, log: slog.New(slog.DiscardHandler), wait: 10 * time.Second, turnTimeout: 3 * time.Second}
	ctx := context.Background()
	for b.Loop() {
		w := newWorld(r)
		if err := w.stepUsers(ctx, `"ori" and "mia"`); err != nil {
			b.Fatal(err)
		}
		if err := w.stepAgents(ctx, `"agent-a" and "agent-b"`, `"#ops"`, ""); err != nil {
			b.Fatal(err)
		}
		if err := w.stepAgents(ctx, `"agent-c"`, `"#ops"`, "any"); err != nil {
			b.Fatal(err)
		}
		if messages > 0 {
			if err := w.stepBusyRoom(ctx, "#ops", "2000", "40", "ori, mia, agent-a and agent-b"); err != nil {
				b.Fatal(err)
			}
		}
		if err := w.start(ctx); err != nil {
			b.Fatal(err)
		}
		if err := w.close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTurn measures one conversational turn end to end — a human reply
// in a thread pushed to the daemon, the agent prompted over ACP, its reply
// posted and read back — with the flight recorder off and on. Each turn
// writes an event record for the reply and for the agent's post, a prompt, a
// post and an fsync'd turn end.
func BenchmarkTurn(b *testing.B) {
	for _, traced := range []bool{false, true} {
		name := "trace=off"
		if traced {
			name = "trace=on"
		}
		b.Run(name, func(b *testing.B) { benchTurn(b, traced) })
	}
}

func benchTurn(b *testing.B, traced bool) {
	r := &runner{backend: fakeBackend{}, log: slog.New(slog.DiscardHandler), wait: 10 * time.Second, turnTimeout: 3 * time.Second}
	ctx := context.Background()
	w := newWorld(r)
	defer w.close()
	if err := w.stepUsers(ctx, `"ori" and "mia"`); err != nil {
		b.Fatal(err)
	}
	if err := w.stepAgents(ctx, `"agent-a"`, `"#ops"`, ""); err != nil {
		b.Fatal(err)
	}
	if traced {
		if err := w.stepKeepsTrace(); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.stepWillReply("agent-a", "pong 0"); err != nil {
		b.Fatal(err)
	}
	if err := w.stepSays(ctx, "ori", "#ops", "@agent-a ping 0"); err != nil {
		b.Fatal(err)
	}
	if err := w.stepPostsInThread(ctx, "agent-a", "pong 0"); err != nil {
		b.Fatal(err)
	}
	i := 0
	for b.Loop() {
		i++
		reply := fmt.Sprintf("pong %d", i)
		if err := w.stepWillReply("agent-a", reply); err != nil {
			b.Fatal(err)
		}
		if err := w.stepReplies(ctx, "ori", fmt.Sprintf("ping %d", i)); err != nil {
			b.Fatal(err)
		}
		if err := w.stepPostsInThread(ctx, "agent-a", reply); err != nil {
			b.Fatal(err)
		}
	}
}
