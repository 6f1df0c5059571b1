package steps

import (
	"fmt"

	"github.com/zooid-dev/zooid/modeldouble"
)

// codex (codex-acp, which embeds codex itself) reads its model API's address
// from $HOME/.codex/config.toml, not from OPENAI_BASE_URL, and takes its key
// through ACP's authenticate, which the daemon calls with the env_var method
// whose variable is set (CODEX_API_KEY; requires_openai_auth keeps that
// path). It speaks the Responses API, offering the Zooid tools as the
// namespace mcp__zooid.
//
// The double is a provider of its own with supports_websockets = false, not
// the built-in openai provider at the double's address (openai_base_url),
// which tries a WebSocket first: the double serves HTTP only and answered
// that 426 at every codex start, and codex then warmed up and logged an
// ERROR for nothing. A flake first blamed on that warm-up was not its: codex's
// MCP client lost a tools/list answer whose newline came in a write of its
// own (docs/agents.md; fixed in zooid/mcpserver and zooid/bridge).
func wireCodex(md *modeldouble.Server, a wireTarget) (map[string]string, error) {
	// Nothing of codex's own leaves the machine: no update check, no
	// analytics events, no metrics to OpenAI's Statsig exporter (the
	// otel default, which analytics.enabled = false turns off as well),
	// no feedback (Sentry) uploads.
	cfg := fmt.Sprintf(`model_provider = "modeldouble"
check_for_update_on_startup = false

[model_providers.modeldouble]
name = "modeldouble"
base_url = %q
wire_api = "responses"
requires_openai_auth = true
supports_websockets = false

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
