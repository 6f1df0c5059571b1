// Package container runs agents in Docker containers through the docker CLI
// (no Docker client library: the daemon stays small, and the CLI is what an
// operator already has and configures). The agent is the container's own
// process, started with `docker run -i --rm`, so ACP runs over the CLI's
// stdio exactly as over a local agent's. A container gets three mounts and
// nothing else of the host: its agent's socket directory, the static bridge
// (read-only) and the agent's working directory; a pi agent's also gets its
// pi directory, where the daemon installs the Zooid extension.
//
// Every container carries the daemon's identity as a label (LabelDaemon), so
// a daemon removes the containers a killed predecessor left (RemoveOrphans)
// and never touches anyone else's.
package container

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/zooid-dev/zooid/zooid/config"
)

// Labels every container of the daemon carries.
const (
	// LabelDaemon holds the daemon's identity (Identity).
	LabelDaemon = "dev.zooid.daemon"
	// LabelAgent holds the agent's name.
	LabelAgent = "dev.zooid.agent"
)

// Identity names a daemon for its containers: a hash of the host name and the
// absolute state dir. One daemon at a time holds a state dir (its databases
// are locked), so the containers labelled with this identity are that
// daemon's, or leftovers of an earlier one with the same state dir.
func Identity(stateDir string) string {
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		abs = stateDir
	}
	host, _ := os.Hostname()
	sum := sha256.Sum256([]byte(host + "\x00" + abs))
	return hex.EncodeToString(sum[:12])
}

// Docker starts and removes one daemon's containers with the docker CLI.
type Docker struct {
	// CLI is the docker command; default "docker" from PATH.
	CLI string
	// Daemon is the daemon's identity (Identity).
	Daemon string
	// EnvDir holds the containers' env files (0600, one per container,
	// removed with it): values passed in a file stay out of the CLI's argv,
	// which any local process can read. It must not be mounted anywhere.
	EnvDir string
	// CLIEnv is the docker CLI's own environment (PATH, HOME, DOCKER_HOST,
	// ...). The agent never sees it.
	CLIEnv []string
	Log    *slog.Logger
}

// Run is one agent container to start.
type Run struct {
	// Agent is the agent's name.
	Agent string
	// Settings are the agent's container settings (image, network, workdir).
	Settings *config.Container
	// Command and Args are run in the image.
	Command string
	Args    []string
	// Env is the container's environment as KEY=VALUE.
	Env []string
	// SocketDir is the host directory holding only the agent's socket.
	SocketDir string
	// WorkDir is the host directory mounted at Settings.Workdir.
	WorkDir string
	// PiDir, for an agent on the pi preset, is its host pi directory,
	// mounted at config.ContainerPiDir; "" for other agents.
	PiDir string
	// UID and GID run the container's processes: the agent's user: when it
	// has one, else the daemon's.
	UID, GID int
}

// Started is a container being started: Command and Args run the docker CLI
// (its stdio is the agent's), Name removes it.
type Started struct {
	Name    string
	Command string
	Args    []string
	envFile string
}

// Prepare writes the container's env file and returns the docker run command
// line. The container is named zooid-<daemon>-<agent>-<random>, labelled
// with the daemon and the agent, runs as r.UID and r.GID with no
// capabilities and no privilege gain, keeps no log (its stdout is the ACP
// stream), and sees the host only through the three mounts (four for pi).
func (d *Docker) Prepare(r Run) (*Started, error) {
	if r.Settings == nil || r.Settings.Image == "" {
		return nil, fmt.Errorf("container for %s: no image", r.Agent)
	}
	for what, p := range map[string]string{"socket directory": r.SocketDir, "bridge": r.Settings.Bridge, "working directory": r.WorkDir, "pi directory": r.PiDir} {
		if what == "pi directory" && p == "" {
			continue
		}
		if !filepath.IsAbs(p) || strings.ContainsAny(p, ",\"\n") {
			return nil, fmt.Errorf("container for %s: the %s %q must be an absolute path without commas or quotes (docker --mount syntax)", r.Agent, what, p)
		}
	}
	name := "zooid-" + d.Daemon + "-" + r.Agent + "-" + strings.ToLower(rand.Text()[:8])
	if err := os.MkdirAll(d.EnvDir, 0o700); err != nil {
		return nil, fmt.Errorf("container env dir: %w", err)
	}
	envFile := filepath.Join(d.EnvDir, name+".env")
	var env bytes.Buffer
	for _, kv := range r.Env {
		if strings.ContainsAny(kv, "\n\r\x00") {
			return nil, fmt.Errorf("container for %s: variable %s spans lines; an env file can't carry it", r.Agent, strings.SplitN(kv, "=", 2)[0])
		}
		env.WriteString(kv + "\n")
	}
	if err := os.WriteFile(envFile, env.Bytes(), 0o600); err != nil {
		return nil, fmt.Errorf("container env file: %w", err)
	}
	s := r.Settings
	args := []string{"run", "-i", "--rm",
		"--name", name,
		"--label", LabelDaemon + "=" + d.Daemon,
		"--label", LabelAgent + "=" + r.Agent,
		"--network", s.Network,
		"--user", strconv.Itoa(r.UID) + ":" + strconv.Itoa(r.GID),
		"--cap-drop", "ALL",
		"--security-opt", "no-new-privileges",
		"--log-driver", "none",
		"--mount", "type=bind,source=" + r.SocketDir + ",target=" + config.ContainerSocketDir,
		"--mount", "type=bind,source=" + s.Bridge + ",target=" + config.ContainerBridge + ",readonly",
		"--mount", "type=bind,source=" + r.WorkDir + ",target=" + s.Workdir,
	}
	if r.PiDir != "" {
		args = append(args, "--mount", "type=bind,source="+r.PiDir+",target="+config.ContainerPiDir)
	}
	args = append(args, "--workdir", s.Workdir, "--env-file", envFile, s.Image, r.Command)
	args = append(args, r.Args...)
	return &Started{Name: name, Command: d.cli(), Args: args, envFile: envFile}, nil
}

func (d *Docker) cli() string {
	if d.CLI != "" {
		return d.CLI
	}
	return "docker"
}

func (d *Docker) log() *slog.Logger {
	if d.Log != nil {
		return d.Log
	}
	return slog.New(slog.DiscardHandler)
}

// docker runs one CLI command and returns its trimmed stdout.
func (d *Docker) docker(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, d.cli(), args...)
	cmd.Env = d.CLIEnv
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("docker %s: %w: %s", args[0], err, strings.TrimSpace(errOut.String()))
	}
	return strings.TrimSpace(out.String()), nil
}

// InitPid is the host pid of the container's first process, the agent: the
// process the agent's socket binding is tied to (its bridge descends from
// it; the docker CLI on the host does not). It waits for the container to be
// running, bounded by ctx.
func (d *Docker) InitPid(ctx context.Context, s *Started) (int, error) {
	for {
		out, err := d.docker(ctx, "inspect", "--format", "{{.State.Running}} {{.State.Pid}}", s.Name)
		if err == nil {
			running, pid, _ := strings.Cut(out, " ")
			if n, perr := strconv.Atoi(pid); perr == nil && running == "true" && n > 0 {
				return n, nil
			}
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = errors.New("not running")
			}
			return 0, fmt.Errorf("container %s: %w (%v)", s.Name, ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Remove removes the container (killing it if it runs) and its env file. A
// container already gone is no error.
func (d *Docker) Remove(ctx context.Context, s *Started) error {
	defer os.Remove(s.envFile)
	if _, err := d.docker(ctx, "rm", "--force", s.Name); err != nil && !strings.Contains(err.Error(), "No such container") {
		return fmt.Errorf("removing container %s: %w", s.Name, err)
	}
	return nil
}

// RemoveOrphans removes every container labelled with this daemon's identity
// (left by a daemon that was killed) and stale env files; it returns the names
// removed. Containers of other daemons are never touched.
func (d *Docker) RemoveOrphans(ctx context.Context) ([]string, error) {
	out, err := d.docker(ctx, "ps", "--all", "--filter", "label="+LabelDaemon+"="+d.Daemon, "--format", "{{.Names}}")
	if err != nil {
		return nil, fmt.Errorf("listing this daemon's containers: %w", err)
	}
	var names []string
	for _, n := range strings.Fields(out) {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) > 0 {
		if _, err := d.docker(ctx, append([]string{"rm", "--force"}, names...)...); err != nil {
			return nil, fmt.Errorf("removing orphaned containers %v: %w", names, err)
		}
		d.log().Warn("removed containers a previous daemon left running", "containers", names)
	}
	if files, err := filepath.Glob(filepath.Join(d.EnvDir, "*.env")); err == nil {
		for _, f := range files {
			_ = os.Remove(f)
		}
	}
	return names, nil
}
