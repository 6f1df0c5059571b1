package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/zooid-dev/zooid/zooid/acpagent"
	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/sandbox"
)

// sandboxed says agent a runs held by Landlock: a local agent whose
// sandbox is not none (a docker agent's container is its sandbox).
func sandboxed(a config.Agent) bool {
	return a.Runtime != config.RuntimeDocker && a.Sandbox != nil && a.Sandbox.Mode != sandbox.None
}

// logSandboxes says once at start how this daemon's local agents are held:
// loudly for an agent whose sandbox is none, and what this kernel's
// Landlock cannot hold the others to.
func (d *Daemon) logSandboxes() {
	abi := sandbox.ABI()
	var held []string
	net := false
	for _, a := range d.opts.Config.Agents {
		switch {
		case a.Runtime == config.RuntimeDocker:
		case !sandboxed(a):
			d.log.Warn("agent runs without a sandbox (sandbox: none): it can read and write everything the daemon's user can, zooid.yaml and the state dir included, and ptrace and signal the daemon and other agents",
				"agent", a.Name, "uid", uidOf(a))
		default:
			held = append(held, a.Name)
			net = net || a.Sandbox.Connect != nil || a.Sandbox.Bind != nil
		}
	}
	if len(held) == 0 {
		return
	}
	_, missing := sandbox.Enforcement(abi, net)
	switch {
	case abi == 0:
		d.log.Warn("this kernel has no Landlock: agents run unsandboxed (best effort: nothing to apply)", "agents", held)
	case len(missing) > 0:
		d.log.Warn("agents are sandboxed with Landlock, best effort: this kernel cannot hold them to all of it",
			"abi", abi, "wanted", sandbox.ABIWanted, "not_enforced", strings.Join(missing, "; "), "agents", held)
	default:
		d.log.Info("agents are sandboxed with Landlock", "abi", abi, "agents", held)
	}
}

func uidOf(a config.Agent) string {
	if a.User != nil {
		return a.User.String()
	}
	return fmt.Sprint(os.Geteuid())
}

// tmpDir is a sandboxed agent's own temp dir, <state_dir>/tmp/<name>,
// emptied at each daemon start: the system's /tmp is shared with every
// process of the machine and is outside the sandbox, so the agent's TMPDIR
// points here. An agent with a user of its own gets it as its user's (0700),
// through a tmp/ the others can pass but not list (0711).
func (d *Daemon) tmpDir(a config.Agent) (string, error) {
	parent := filepath.Join(d.opts.Config.StateDir, "tmp")
	dir := filepath.Join(parent, a.Name)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return "", fmt.Errorf("agent %s: creating temp dirs: %w", a.Name, err)
	}
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("agent %s: emptying its temp dir %s: %w", a.Name, dir, err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", fmt.Errorf("agent %s: creating its temp dir: %w", a.Name, err)
	}
	if u := a.User; u != nil {
		if err := os.Chmod(parent, 0o711); err != nil {
			return "", fmt.Errorf("agent %s: temp dirs: %w", a.Name, err)
		}
		if err := os.Lchown(dir, int(u.UID), int(u.GID)); err != nil {
			return "", fmt.Errorf("agent %s: handing its temp dir %s to %s: %w", a.Name, dir, u, err)
		}
	}
	return dir, nil
}

// sandboxCommand is the argv prefix of the wrapper that applies a sandbox:
// the bridge's program (this executable unless the options name another)
// serves `sandbox` as it serves `mcp`.
func (d *Daemon) sandboxCommand() ([]string, error) {
	if len(d.opts.BridgeCommand) > 0 {
		return []string{d.opts.BridgeCommand[0], "sandbox"}, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this executable to sandbox agents with: %w", err)
	}
	return []string{exe, "sandbox"}, nil
}

// sandboxSpec wraps spec so that rt's agent starts held by its sandbox:
// `<zooid> sandbox -- <its program> <args>`, the policy in the wrapper's
// environment, TMPDIR its own temp dir. A spec of an agent without one is
// returned as it is.
func (d *Daemon) sandboxSpec(rt *agentRuntime, spec acpagent.Spec) (acpagent.Spec, error) {
	a := rt.cfg
	if !sandboxed(a) {
		return spec, nil
	}
	// A program found nowhere is left to the wrapper to look up and report
	// missing, so the agent fails to start as it would unsandboxed.
	program, err := acpagent.ResolveCommand(spec.Command, spec.Env)
	if err != nil {
		program = spec.Command
	}
	wrapper, err := d.sandboxCommand()
	if err != nil {
		return spec, err
	}
	env := slices.Clone(spec.Env)
	if _, set := a.ACP.Env["TMPDIR"]; !set && rt.tmpDir != "" {
		env = setEnv(env, "TMPDIR", rt.tmpDir)
	}
	req := sandbox.Request{
		Write:   append([]string{spec.Dir, rt.tmpDir, rt.piDir}, a.Sandbox.Write...),
		Read:    append([]string{wrapper[0]}, a.Sandbox.Read...),
		Bins:    filepath.SplitList(envValue(env, "PATH")),
		Command: program,
		Protect: d.protectedFrom(rt),
		Connect: a.Sandbox.Connect,
		Bind:    a.Sandbox.Bind,
	}
	for _, v := range []string{"HOME", "TMPDIR"} {
		if p := envValue(env, v); filepath.IsAbs(p) && filepath.Clean(p) != "/" {
			req.Write = append(req.Write, p)
		}
	}
	if rt.socket != "" {
		req.Socket = filepath.Dir(rt.socket)
	}
	policy, notes := sandbox.Plan(req)
	rt.noteOnce.Do(func() {
		for _, n := range notes {
			d.log.Warn("sandbox: "+n, "agent", a.Name)
		}
	})
	kv, err := sandbox.EnvOf(policy)
	if err != nil {
		return spec, err
	}
	spec.Env = append(env, kv)
	spec.Args = sandbox.Command(wrapper[1:], program, spec.Args)
	spec.Command = wrapper[0]
	return spec, nil
}

// protectedFrom is what rt's agent must not reach, whatever grant would
// hold it: zooid.yaml, its token files, the state dir, the run dir, the
// trace dir, and every other agent's working and pi directory (unless the
// operator shared one through this agent's sandbox.read or sandbox.write,
// or it is this agent's own too).
func (d *Daemon) protectedFrom(rt *agentRuntime) []string {
	cfg := d.opts.Config
	var out []string
	if cfg.File != "" {
		if abs, err := filepath.Abs(cfg.File); err == nil {
			out = append(out, abs)
		}
	}
	out = append(out, cfg.SecretFiles...)
	out = append(out, cfg.StateDir)
	if d.mcp != nil {
		out = append(out, d.mcp.RunDir())
	} else if cfg.RunDir != "" {
		out = append(out, cfg.RunDir)
	}
	if cfg.Trace != nil && cfg.Trace.Dir != "" {
		out = append(out, cfg.Trace.Dir)
	}
	own := []string{rt.workDir, rt.piDir}
	for _, other := range d.agents {
		if other == rt {
			continue
		}
		dirs := []string{cfg.WorkDir(&other.cfg), other.piDir}
		for _, dir := range dirs {
			if dir == "" {
				continue
			}
			if abs, err := filepath.Abs(dir); err == nil && !slices.Contains(own, abs) && !rt.cfg.SandboxReaches(abs) {
				out = append(out, abs)
			}
		}
	}
	return out
}

// envValue is the value of name in env (the last one wins, as exec does).
func envValue(env []string, name string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == name {
			v = val
		}
	}
	return v
}

// setEnv is env with name set to value, replacing any earlier setting.
func setEnv(env []string, name, value string) []string {
	env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
	return append(env, name+"="+value)
}
