package steps

import (
	"context"
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
