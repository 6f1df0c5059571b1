package daemon

import (
	"os"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/zooid-dev/zooid/zooid/config"
)

// AllowedEnv names the variables of the daemon's environment every agent
// gets: enough to find programs, a home, a user name, a locale, a terminal,
// a temp dir and a time zone. Nothing else passes unless the agent's config
// names it in inherit_env: the operator's shell may hold a human's access
// token or a cloud credential, and agents must not pick those up by accident.
var AllowedEnv = []string{"PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TERM", "COLORTERM", "TMPDIR", "TZ"}

// allowedPrefixes are variable families passed like AllowedEnv (the locale
// categories LC_ALL, LC_CTYPE, ...).
var allowedPrefixes = []string{"LC_"}

// secrets lists every token in the config: none of them may reach an agent.
func (d *Daemon) secrets() []string { return d.opts.Config.Secrets() }

// agentEnv is the environment an agent process starts with: the allowlisted
// variables of the daemon's environment and those acp.InheritEnv names, then
// the preset's variables and acp.Env (config.ACP.Environment). The config refuses a token in acp.Env or in an inherited
// variable; the by-value scrub here is a second line for a variable that
// changed since (secrets are at least config.MinSecretLen long, so it can't
// match by accident).
func agentEnv(secrets []string, acp config.ACP) []string {
	acp.Env = acp.Environment()
	return buildEnv(os.Environ(), secrets, acp)
}

// agentEnvFor is agentEnv for agent a: an agent with a user of its own also
// gets that user's HOME, USER and LOGNAME instead of the daemon's (without a
// passwd entry: HOME is its working directory, USER and LOGNAME are unset),
// unless its env sets them.
func agentEnvFor(secrets []string, a config.Agent, workDir string) []string {
	env := agentEnv(secrets, a.ACP)
	if a.User == nil {
		return env
	}
	home := a.User.Home
	if home == "" {
		home = workDir
	}
	set := map[string]string{"HOME": home}
	if a.User.Name != "" {
		set["USER"], set["LOGNAME"] = a.User.Name, a.User.Name
	}
	out := env[:0:0]
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if name == "HOME" || name == "USER" || name == "LOGNAME" {
			if _, configured := a.ACP.Env[name]; !configured {
				continue
			}
		}
		out = append(out, kv)
	}
	for _, name := range []string{"HOME", "USER", "LOGNAME"} {
		if v, ok := set[name]; ok {
			if _, configured := a.ACP.Env[name]; !configured {
				out = append(out, name+"="+v)
			}
		}
	}
	return out
}

func buildEnv(daemonEnv, secrets []string, acp config.ACP) []string {
	var env []string
	for _, kv := range daemonEnv {
		name, _, _ := strings.Cut(kv, "=")
		if _, override := acp.Env[name]; override || !allowed(name, acp.InheritEnv) || carriesSecret(kv, secrets) {
			continue
		}
		env = append(env, kv)
	}
	keys := make([]string, 0, len(acp.Env))
	for k := range acp.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		kv := k + "=" + acp.Env[k]
		if carriesSecret(kv, secrets) {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func allowed(name string, inherit []string) bool {
	if slices.Contains(AllowedEnv, name) || slices.Contains(inherit, name) {
		return true
	}
	for _, p := range allowedPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
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

// credential is what agent a's process is started as: its user, or nil for
// the daemon's own.
func credential(a config.Agent) *syscall.Credential {
	if a.User == nil {
		return nil
	}
	return a.User.Credential()
}
