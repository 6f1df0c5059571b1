package daemon

import (
	"os"
	"sort"
	"strings"

	"github.com/zooid-dev/zooid/zooid/config"
)

// secrets lists every token in the config: none of them may reach an agent.
func (d *Daemon) secrets() []string { return configSecrets(d.opts.Config) }

func configSecrets(cfg *config.Config) []string {
	var out []string
	for _, t := range cfg.Transports {
		if t.Matrix != nil {
			out = append(out, t.Matrix.ASToken, t.Matrix.HSToken)
		}
		if t.HTTP != nil {
			out = append(out, t.HTTP.Token)
		}
	}
	return out
}

// agentEnv is the environment an agent process starts with: the daemon's own
// (agents need PATH, HOME and their API keys) minus every variable carrying a
// Zooid secret, plus the agent's configured variables. Secrets are matched by
// value, because the operator may have named their variables anything.
func agentEnv(secrets []string, extra map[string]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if carriesSecret(kv, secrets) {
			continue
		}
		env = append(env, kv)
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		kv := k + "=" + extra[k]
		if carriesSecret(kv, secrets) {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func carriesSecret(kv string, secrets []string) bool {
	_, value, _ := strings.Cut(kv, "=")
	for _, s := range secrets {
		if s != "" && strings.Contains(value, s) {
			return true
		}
	}
	return false
}
