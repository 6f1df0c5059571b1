package mcpserver_test

// Helpers the interop tests check the busy world's pages with.

import (
	"testing"
	"time"

	"github.com/zooid-dev/zooid/zooid/tools"
)

func stampOf(ts time.Time) string { return ts.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

func checkMessage(t *testing.T, got tools.Message, want wantMsg) {
	t.Helper()
	if got.ID != want.id || got.Sender != want.sender || got.Text != want.text || got.Timestamp != stampOf(want.ts) || got.ThreadID != want.thread {
		t.Fatalf("message mismatch:\n got %+v\nwant %+v (ts %s)", got, want, stampOf(want.ts))
	}
	name, isAgent := agentOf(want.sender)
	if got.IsAgent != isAgent || got.AgentName != name {
		t.Fatalf("is_agent/agent_name of %s: %v %q", want.sender, got.IsAgent, got.AgentName)
	}
}

func wantThreads(w *world) []wantMsg {
	var out []wantMsg
	for i := len(w.want) - 1; i >= 0; i-- {
		if w.want[i].topLevel {
			out = append(out, w.want[i])
		}
	}
	return out
}
