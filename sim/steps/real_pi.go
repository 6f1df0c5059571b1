package steps

import (
	"os"
	"path/filepath"

	"github.com/zooid-dev/zooid/modeldouble"
)

// piPackageDir is where the pinned pi, pi-acp and the Node they need are
// installed, relative to the repository root (npm ci by scripts/setup.sh).
const piPackageDir = "zooid/piext/testdata/pi"

// pi (pi-acp, which starts `pi --mode rpc` per session) reads its models
// from models.json in its agent directory: the double is a provider of its
// own there, speaking the Anthropic Messages API, and settings.json makes it
// the default. The directory is the daemon's default for the agent,
// <state_dir>/pi/<name>, as an operator who sets no PI_CODING_AGENT_DIR gets
// it, so the state-dir check meets what pi keeps there; the daemon installs
// the Zooid extension beside these files (pi-acp passes the MCP server of
// session/new to no one).
func wirePi(md *modeldouble.Server, a wireTarget) (map[string]string, error) {
	dir := filepath.Join(a.stateDir, "pi", a.agent)
	files := map[string]string{
		"models.json": `{"providers": {"modeldouble": {"baseUrl": "` + md.BaseURL(a.agent, modeldouble.Anthropic) + `",` +
			` "api": "anthropic-messages", "apiKey": "modeldouble", "models": [{"id": "double-1"}]}}}`,
		"settings.json": `{"defaultProvider": "modeldouble", "defaultModel": "double-1", "quietStartup": true}`,
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	for name, s := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o600); err != nil {
			return nil, err
		}
	}
	return map[string]string{
		// No update check, and none by pi-acp, which asks npm for pi's
		// latest version at session/new; offline, npm answers at once.
		"PI_OFFLINE":         "1",
		"npm_config_offline": "true",
	}, nil
}
