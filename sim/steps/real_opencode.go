package steps

import (
	"encoding/json"
	"os"
	"path/filepath"

	"github.com/zooid-dev/zooid/modeldouble"
)

// opencode reaches the model double as a custom provider of the user's
// config (~/.config/opencode/opencode.json): the OpenAI-compatible SDK
// (@ai-sdk/openai-compatible, bundled in opencode's binary, so nothing is
// installed at run time) on the double's Chat Completions, its one model the
// default and the small model (session titles). The environment and the
// config directory turn off opencode's own traffic: models.dev, updates, LSP
// downloads, default plugins, sharing, the plugin SDK's install.
func wireOpencode(md *modeldouble.Server, a wireTarget) (map[string]string, error) {
	cfg := map[string]any{
		"$schema": "https://opencode.ai/config.json",
		"provider": map[string]any{
			"modeldouble": map[string]any{
				"npm":  "@ai-sdk/openai-compatible",
				"name": "Model double",
				"options": map[string]any{
					"baseURL": md.BaseURL(a.agent, modeldouble.OpenAI),
					"apiKey":  "modeldouble",
				},
				"models": map[string]any{
					"scripted": map[string]any{"name": "Scripted", "tool_call": true,
						"limit": map[string]int{"context": 200000, "output": 8192}},
				},
			},
		},
		"enabled_providers": []string{"modeldouble"},
		"model":             "modeldouble/scripted",
		"small_model":       "modeldouble/scripted",
		"autoupdate":        false,
		"share":             "disabled",
	}
	b, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := writeHomeFile(a.home, ".config/opencode/opencode.json", string(b)); err != nil {
		return nil, err
	}
	// opencode installs @opencode-ai/plugin from npm's registry into each
	// config directory in the background (Npm.install), unless the
	// directory has a node_modules and a lockfile that lists it.
	if err := os.MkdirAll(filepath.Join(a.home, ".config/opencode/node_modules"), 0o700); err != nil {
		return nil, err
	}
	lock := `{"lockfileVersion": 3, "packages": {"": {"dependencies": {"@opencode-ai/plugin": "*"}}}}`
	if err := writeHomeFile(a.home, ".config/opencode/package-lock.json", lock); err != nil {
		return nil, err
	}
	return map[string]string{
		"OPENCODE_DISABLE_MODELS_FETCH": "true", "OPENCODE_DISABLE_AUTOUPDATE": "true",
		"OPENCODE_DISABLE_LSP_DOWNLOAD": "true", "OPENCODE_DISABLE_DEFAULT_PLUGINS": "true",
		"OPENCODE_DISABLE_SHARE": "true",
	}, nil
}
