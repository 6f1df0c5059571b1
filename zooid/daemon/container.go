package daemon

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/zooid-dev/zooid/zooid/acpagent"
	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/container"
	"github.com/zooid-dev/zooid/zooid/mcpserver"
	"github.com/zooid-dev/zooid/zooid/piext"
)

// dockerCLIEnv names the daemon's variables the docker CLI itself may need
// (where the engine is, its config and TLS material). They reach the CLI on
// the host, never the container.
var dockerCLIEnv = []string{"PATH", "HOME", "DOCKER_HOST", "DOCKER_CONFIG", "DOCKER_CONTEXT", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY", "XDG_RUNTIME_DIR"}

// startDocker prepares the docker runtime when an agent uses it, and removes
// the containers a killed predecessor with this state dir left behind.
func (d *Daemon) startDocker(ctx context.Context) error {
	if !slices.ContainsFunc(d.opts.Config.Agents, func(a config.Agent) bool { return a.Runtime == config.RuntimeDocker }) {
		return nil
	}
	var cliEnv []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if slices.Contains(dockerCLIEnv, name) && !carriesSecret(kv, d.secrets()) {
			cliEnv = append(cliEnv, kv)
		}
	}
	d.docker = &container.Docker{
		Daemon: container.Identity(d.opts.Config.StateDir),
		EnvDir: filepath.Join(d.opts.Config.StateDir, "containers"),
		CLIEnv: cliEnv,
		Log:    d.log.With("component", "docker"),
	}
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := d.docker.RemoveOrphans(rctx); err != nil {
		return fmt.Errorf("docker runtime: %w", err)
	}
	return nil
}

// containerEnv is a container's whole environment: the daemon variables the
// agent's inherit_env names, then acp.env, then container.env. The host's
// allowlist (PATH, HOME, ...) does not apply: the image has its own.
func containerEnv(secrets []string, a config.Agent) []string {
	env := buildEnv(nil, secrets, a.ACP)
	for _, name := range a.ACP.InheritEnv {
		if v, ok := os.LookupEnv(name); ok && !carriesSecret(name+"="+v, secrets) {
			if _, override := a.ACP.Env[name]; !override {
				env = append(env, name+"="+v)
			}
		}
	}
	keys := make([]string, 0, len(a.Container.Env))
	for k := range a.Container.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if kv := k + "=" + a.Container.Env[k]; !carriesSecret(kv, secrets) {
			env = append(env, kv)
		}
	}
	return env
}

// containerPiEnv gives a pi agent's container what piEnv gives a local one,
// as the container sees it: its pi directory and its socket at their mount
// points (a PI_CODING_AGENT_DIR in acp.env names the host directory that is
// mounted). HOME is the pi directory too, unless the operator set one:
// pi-acp keeps its session map under ~/.pi, which must outlive the container
// for a session to be loaded after a restart.
func containerPiEnv(env []string, pi bool) []string {
	if !pi {
		return env
	}
	home := true
	env = slices.DeleteFunc(env, func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		if name == "HOME" {
			home = false
		}
		return name == piext.AgentDirEnv || name == piext.SocketEnv
	})
	env = append(env, piext.AgentDirEnv+"="+config.ContainerPiDir, piext.SocketEnv+"="+config.ContainerSocketDir+"/"+mcpserver.SocketName)
	if home {
		env = append(env, "HOME="+config.ContainerPiDir)
	}
	return env
}

// containerSpec is the docker run command that starts rt's agent in a
// container of its own, and the container to remove when it ends.
func (d *Daemon) containerSpec(rt *agentRuntime) (acpagent.Spec, *container.Started, error) {
	command, args := d.agentCommand(rt.cfg.ACP, true)
	sockDir, ok := d.mcp.SocketDir(rt.cfg.Name)
	if !ok {
		return acpagent.Spec{}, nil, fmt.Errorf("agent %s has no socket directory", rt.cfg.Name)
	}
	// The container runs as the agent's user: when it has one (its socket
	// directory is that user's), else as the daemon's.
	uid, gid := os.Getuid(), os.Getgid()
	if u := rt.cfg.User; u != nil {
		uid, gid = int(u.UID), int(u.GID)
	}
	started, err := d.docker.Prepare(container.Run{
		UID:       uid,
		GID:       gid,
		Agent:     rt.cfg.Name,
		Settings:  rt.cfg.Container,
		Command:   command,
		Args:      args,
		Env:       containerPiEnv(containerEnv(d.secrets(), rt.cfg), rt.piDir != ""),
		SocketDir: sockDir,
		WorkDir:   rt.workDir,
		PiDir:     rt.piDir,
	})
	if err != nil {
		return acpagent.Spec{}, nil, err
	}
	return acpagent.Spec{Command: started.Command, Args: started.Args, Env: d.docker.CLIEnv, Dir: d.opts.Config.StateDir}, started, nil
}

// removeContainer removes an agent's container once its docker CLI is gone:
// a docker run killed by signal leaves its container running.
func (d *Daemon) removeContainer(c *container.Started) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := d.docker.Remove(ctx, c); err != nil {
		d.log.Error("removing agent container", "container", c.Name, "err", err)
	}
}
