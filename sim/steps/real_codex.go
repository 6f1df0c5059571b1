package steps

import (
	"fmt"

	"github.com/zooid-dev/zooid/modeldouble"
)

// codex (codex-acp, which embeds codex itself) reads its model API's address
// only from openai_base_url in $HOME/.codex/config.toml, not from
// OPENAI_BASE_URL, and takes its key through ACP's authenticate, which the
// daemon calls with the env_var method whose variable is set (CODEX_API_KEY).
// It speaks the Responses API, offering the Zooid tools as the namespace
// mcp__zooid; it first tries the Responses API over a WebSocket, which the
// double refuses with 426 so that codex uses HTTPS at once (modeldouble).
func wireCodex(md *modeldouble.Server, a wireTarget) (map[string]string, error) {
	// Nothing of codex's own leaves the machine: no update check, no
	// analytics events, no metrics to OpenAI's Statsig exporter (the
	// otel default, which analytics.enabled = false turns off as well),
	// no feedback (Sentry) uploads.
	cfg := fmt.Sprintf(`openai_base_url = %q
check_for_update_on_startup = false

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
metrics_exporter = "none"
`, md.BaseURL(a.agent, modeldouble.OpenAI))
	if err := writeHomeFile(a.home, ".codex/config.toml", cfg); err != nil {
		return nil, err
	}
	return map[string]string{"CODEX_API_KEY": "modeldouble"}, nil
}
