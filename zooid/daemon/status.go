package daemon

import (
	"regexp"

	acp "github.com/coder/acp-go-sdk"
)

// piACPStatus are the sentences pi-acp (0.0.34) sends as agent_message_chunk
// about its own work, not the model's: each as a whole chunk of its own,
// word for word (pi-acp's dist/index.js: formatAutoRetryMessage, the
// auto_retry_*, auto_compaction_* and turn queue cases). ACP has no update
// for adapter status, so without this the daemon posted "Retrying (attempt
// 1/3, waiting 2s)..." into the thread as the agent's words.
var piACPStatus = regexp.MustCompile(`^(?:` +
	`Retrying \(attempt \d+/\d+, waiting \d+s\)\.\.\.|Retrying\.\.\.|Retry finished, resuming\.|` +
	`Context nearing limit, running automatic compaction\.\.\.|` +
	`Automatic compaction finished; context was summarized to continue the session\.|` +
	`Queued message \(position \d+\)\.|Starting queued message\. \(\d+ remaining\)|Cleared queued prompts\.` +
	`)$`)

// adapterStatus says an agent_message_chunk is the adapter speaking about its
// own work rather than the agent's reply, which the daemon logs and does not
// post. It matches only what an adapter is known to send that way (whole
// chunks, exact forms), so a model that says the same words inside a longer
// reply is still posted; docs/agents.md lists what is matched.
func adapterStatus(adapter string, u acp.SessionUpdate) bool {
	m := u.AgentMessageChunk
	if m == nil || m.Content.Text == nil {
		return false
	}
	switch adapter {
	case "pi":
		// pi-acp marks the notifications of pi extensions (ctx.ui.notify).
		if meta, ok := m.Meta["piAcp"].(map[string]any); ok && meta["notify"] != nil {
			return true
		}
		return piACPStatus.MatchString(m.Content.Text.Text)
	}
	return false
}
