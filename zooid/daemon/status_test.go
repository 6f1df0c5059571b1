package daemon

import (
	"testing"

	acp "github.com/coder/acp-go-sdk"
)

func chunk(text string, meta map[string]any) acp.SessionUpdate {
	return acp.SessionUpdate{AgentMessageChunk: &acp.SessionUpdateAgentMessageChunk{
		Meta: meta, Content: acp.ContentBlock{Text: &acp.ContentBlockText{Text: text}}}}
}

// TestAdapterStatus holds the filter to pi-acp's own sentences, whole and
// word for word: the agent's words that merely resemble them are posted.
func TestAdapterStatus(t *testing.T) {
	notify := map[string]any{"piAcp": map[string]any{"notify": map[string]any{"level": "info"}}}
	for _, c := range []struct {
		adapter string
		update  acp.SessionUpdate
		status  bool
	}{
		{"pi", chunk("Retrying (attempt 1/3, waiting 2s)...", nil), true},
		{"pi", chunk("Retrying (attempt 12/30, waiting 120s)...", nil), true},
		{"pi", chunk("Retrying...", nil), true},
		{"pi", chunk("Retry finished, resuming.", nil), true},
		{"pi", chunk("Context nearing limit, running automatic compaction...", nil), true},
		{"pi", chunk("Automatic compaction finished; context was summarized to continue the session.", nil), true},
		{"pi", chunk("Queued message (position 2).", nil), true},
		{"pi", chunk("Starting queued message. (0 remaining)", nil), true},
		{"pi", chunk("Cleared queued prompts.", nil), true},
		{"pi", chunk("extension says hi", notify), true},
		// The agent's words.
		{"pi", chunk("svc-a: Retry finished, resuming.", nil), false},
		{"pi", chunk("Retrying (attempt 1/3, waiting 2s)... then it failed", nil), false},
		{"pi", chunk("Retrying (attempt one of three)...", nil), false},
		{"pi", chunk("the deploy is fine", map[string]any{"piAcp": map[string]any{"queueDepth": 1}}), false},
		// Another adapter's words are never pi-acp's status.
		{"claude", chunk("Retry finished, resuming.", nil), false},
		{"", chunk("Retrying...", nil), false},
		// Not a message chunk.
		{"pi", acp.SessionUpdate{AgentThoughtChunk: &acp.SessionUpdateAgentThoughtChunk{Content: acp.ContentBlock{Text: &acp.ContentBlockText{Text: "Retrying..."}}}}, false},
	} {
		text := ""
		if m := c.update.AgentMessageChunk; m != nil {
			text = m.Content.Text.Text
		}
		if got := adapterStatus(c.adapter, c.update); got != c.status {
			t.Errorf("adapterStatus(%q, %q) = %v, want %v", c.adapter, text, got, c.status)
		}
	}
}
