package acpagent

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	acp "github.com/coder/acp-go-sdk"
)

// lookCommand finds a command without a slash on the PATH of the child's own
// environment, falling back to the daemon's PATH (exec.Command's lookup) when
// env has no PATH or no match. An agent whose acp.env puts an adapter's bin
// directory on its PATH (a project-local npm install, say) must find that
// adapter even though the daemon's own PATH does not have it.
func lookCommand(command string, env []string) string {
	if command == "" || strings.ContainsRune(command, '/') {
		return command
	}
	path, ok := "", false
	for _, kv := range env {
		if v, found := strings.CutPrefix(kv, "PATH="); found {
			path, ok = v, true // the last one wins, as exec.Cmd dedups Env
		}
	}
	if !ok {
		return command
	}
	for _, dir := range filepath.SplitList(path) {
		if !filepath.IsAbs(dir) {
			continue // a relative entry would resolve against the daemon's directory, not the agent's
		}
		p := filepath.Join(dir, command)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p
		}
	}
	return command
}

// LookCommand finds the program Start runs for command in an agent whose
// environment is env: on env's PATH first, then on the daemon's. It fails as
// Start would, before anything starts, so zooid check can say what the first
// mention would otherwise meet.
func LookCommand(command string, env []string) (string, error) {
	p := lookCommand(command, env)
	if !strings.ContainsRune(p, '/') {
		return exec.LookPath(p)
	}
	fi, err := os.Stat(p)
	switch {
	case err != nil:
		return "", err
	case !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0:
		return "", fmt.Errorf("%s is not an executable file", p)
	}
	return p, nil
}

// ResolveCommand is the program Start would run for command with the
// child's environment env, as an absolute path (LookCommand's answer). A
// wrapper that execs the agent itself (the sandbox) needs the program decided
// before the child starts.
func ResolveCommand(command string, env []string) (string, error) {
	path, err := LookCommand(command, env)
	if err != nil {
		return "", fmt.Errorf("finding %s on the agent's PATH or the daemon's: %w", command, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("finding %s: %w", command, err)
	}
	return abs, nil
}

// authRequired says err is ACP's auth_required error (-32000).
func authRequired(err error) bool {
	var re *acp.RequestError
	return errors.As(err, &re) && re.Code == -32000
}

// envAuthMethod is the first env_var authentication method the agent offered
// whose required variables are all set, non-empty, in its environment; "" if
// there is none.
func (c *Conn) envAuthMethod() string {
	set := map[string]bool{}
	for _, kv := range c.env {
		if k, v, ok := strings.Cut(kv, "="); ok && v != "" {
			set[k] = true
		}
	}
	for _, m := range c.authMethods {
		e := m.EnvVar
		if e == nil || len(e.Vars) == 0 {
			continue
		}
		ok := true
		for _, v := range e.Vars {
			if !set[v.Name] && !v.Optional {
				ok = false
			}
		}
		if ok {
			return e.Id
		}
	}
	return ""
}
