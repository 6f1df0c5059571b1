package config

import (
	"debug/elf"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	pathpkg "path"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Agent runtimes: where an agent process runs.
const (
	// RuntimeLocal runs the agent as a child process of the daemon.
	RuntimeLocal = "local"
	// RuntimeDocker runs the agent in a container of its own (docker run -i).
	RuntimeDocker = "docker"
)

// Where a container sees what the daemon mounts into it. The daemon mounts
// nothing else: the agent's socket directory, the bridge (read-only), the
// agent's working directory and, for the pi preset, its pi directory.
const (
	// ContainerSocketDir is the agent's socket directory inside its container.
	ContainerSocketDir = "/zooid/run"
	// ContainerBridge is the static `zooid` binary inside the container;
	// the agent starts `/zooid/bin/zooid mcp` as its MCP server.
	ContainerBridge = "/zooid/bin/zooid"
	// ContainerPiDir is a pi agent's pi directory (PI_CODING_AGENT_DIR: its
	// settings, sessions and the Zooid extension) inside its container, and
	// the container's HOME, where pi-acp keeps its session map.
	ContainerPiDir = "/zooid/pi"
	// DefaultContainerWorkdir is where the agent's directory is mounted.
	DefaultContainerWorkdir = "/work"
	// DefaultNetwork gives a container no network at all: it reaches the
	// daemon through the mounted socket only.
	DefaultNetwork = "none"
)

// Container says how a docker-runtime agent's container is made (container:
// at the top level as the workforce default, and per agent).
type Container struct {
	// Image is the image the agent runs in; the agent's acp command is run
	// in it (a path inside the image, or a name on the image's PATH).
	Image string
	// Env is added to the container's environment (after acp.env and
	// inherit_env); a value carrying a token is refused.
	Env map[string]string
	// Workdir is where the agent's directory (dir, by default its own
	// directory under the state dir) is mounted inside, and the session's
	// cwd; default /work.
	Workdir string
	// Network is the docker network; default none (no network).
	Network string
	// Bridge is the host path of a statically linked zooid binary, mounted
	// read-only as the agent's `zooid mcp`; default the running zooid
	// executable, which must then be static (CGO_ENABLED=0).
	Bridge string
}

var containerKeys = []string{"image", "env", "workdir", "network", "bridge"}

// networkRE is a docker network name. "container:<id>" (sharing another
// container's namespaces) is refused: it would put the agent beside that
// container's processes.
var networkRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// runtimeOf reads a runtime key; def is the value when it is absent.
func (p *parser) runtimeOf(f field, path, def string) string {
	v, ok := p.str(f, path)
	if !ok || v == "" {
		return def
	}
	if v != RuntimeLocal && v != RuntimeDocker {
		p.errorf(f.val, path, "must be %q or %q, got %q", RuntimeLocal, RuntimeDocker, v)
		return def
	}
	return v
}

// container reads a container mapping. Keys it does not set are taken from
// def (the workforce default; nil for the default itself); env maps merge,
// the agent's entries winning.
func (p *parser) container(f field, path string, def *Container) *Container {
	c := &Container{}
	if def != nil {
		*c = *def
		c.Env = maps.Clone(def.Env)
	}
	if f.val == nil || isNull(deref(f.val)) {
		return c
	}
	cf := p.fields(f.val, path, containerKeys...)
	if v, ok := p.str(cf["image"], path+".image"); ok && v != "" {
		c.Image = v
		p.refuseSecret(cf["image"].val, path+".image", "the image", v)
	}
	if ef, ok := cf["env"]; ok {
		if c.Env == nil {
			c.Env = map[string]string{}
		}
		for k, v := range p.fields(ef.val, path+".env") {
			if !envNameRE.MatchString(k) {
				p.errorf(v.key, path+".env", "invalid variable name %q", k)
				continue
			}
			s, ok := p.str(v, path+".env."+k)
			if !ok && !isNull(deref(v.val)) {
				continue
			}
			if strings.ContainsAny(s, "\n\r\x00") {
				p.errorf(v.val, path+".env."+k, "must be one line")
				continue
			}
			if p.refuseSecret(v.val, path+".env."+k, "the value", s) {
				continue
			}
			c.Env[k] = s
		}
	}
	if v, ok := p.str(cf["workdir"], path+".workdir"); ok && v != "" {
		switch clean := pathpkg.Clean(v); {
		case !strings.HasPrefix(v, "/"):
			p.errorf(cf["workdir"].val, path+".workdir", "must be an absolute path inside the container, got %q", v)
		case clean == "/" || reservedInContainer(clean):
			p.errorf(cf["workdir"].val, path+".workdir", "%s is taken: the workdir must not be /, nor lie in or over /zooid, /proc, /sys or /dev", clean)
		default:
			c.Workdir = clean
		}
	}
	if v, ok := p.str(cf["network"], path+".network"); ok && v != "" {
		if !networkRE.MatchString(v) {
			p.errorf(cf["network"].val, path+".network", "must be a docker network name such as none, host or a network of yours, got %q", v)
		} else {
			c.Network = v
		}
	}
	if v, ok := p.str(cf["bridge"], path+".bridge"); ok && v != "" {
		c.Bridge = p.abs(v)
	}
	return c
}

// reservedInContainer says whether dir is, holds or lies in a path the
// daemon or the kernel owns inside a container.
func reservedInContainer(dir string) bool {
	for _, r := range []string{"/zooid", "/proc", "/sys", "/dev"} {
		if dir == r || strings.HasPrefix(dir, r+"/") || strings.HasPrefix(r, dir+"/") {
			return true
		}
	}
	return false
}

// finishContainer fills a docker agent's defaults and checks what a
// container needs; for a local agent it drops the container settings.
func (p *parser) finishContainer(a *Agent, at *yaml.Node, path string) {
	if a.Runtime != RuntimeDocker {
		a.Container = nil
		return
	}
	if a.Container == nil {
		a.Container = &Container{}
	}
	c := a.Container
	if c.Image == "" && !p.hasErrorUnder(path+".container.image") && !p.hasErrorUnder("container.image") {
		p.errorf(at, path+".container.image", "is required for runtime docker (here or in the top-level container:)")
	}
	if c.Workdir == "" {
		c.Workdir = DefaultContainerWorkdir
	}
	if c.Network == "" {
		c.Network = DefaultNetwork
	}
	if a.HTTP != nil {
		p.errorf(at, path+".runtime", "runtime docker is for matrix agents for now: an http agent runs locally")
	}
}

// checkDocker is Load's part for docker agents: what the daemon will need on
// this machine, so check refuses what run could not start.
func (p *parser) checkDocker(cfg *Config) {
	var docker []*Agent
	for i := range cfg.Agents {
		if cfg.Agents[i].Runtime == RuntimeDocker {
			docker = append(docker, &cfg.Agents[i])
		}
	}
	if len(docker) == 0 {
		return
	}
	if _, err := exec.LookPath("docker"); err != nil {
		p.errorAt(p.agentLines[docker[0].Name], "agents."+docker[0].Name+".runtime", "runtime docker needs the docker command on PATH: %v", err)
	}
	checked := map[string]bool{}
	for _, a := range docker {
		bridge := a.Container.Bridge
		if bridge == "" {
			exe, err := os.Executable()
			if err != nil {
				p.errorAt(p.agentLines[a.Name], "agents."+a.Name+".container.bridge", "finding the zooid executable to mount as the bridge: %v", err)
				continue
			}
			a.Container.Bridge = exe
			bridge = exe
		}
		if checked[bridge] {
			continue
		}
		checked[bridge] = true
		if err := StaticExecutable(bridge); err != nil {
			p.errorAt(p.agentLines[a.Name], "agents."+a.Name+".container.bridge", "%v: the bridge runs inside the container, so it must be a static zooid (build it with CGO_ENABLED=0 go build ./cmd/zooid) named by container.bridge", err)
		}
	}
}

// StaticExecutable says whether path is an ELF executable that needs no
// dynamic loader (no PT_INTERP), so it runs in any container, a scratch
// image included.
func StaticExecutable(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s is not an executable this machine can run in a container: %w", path, err)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return fmt.Errorf("%s is not an executable (ELF type %s)", path, f.Type)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			return errors.New(path + " is dynamically linked")
		}
	}
	return nil
}
