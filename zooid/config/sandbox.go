package config

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/zooid-dev/zooid/zooid/sandbox"
)

// Sandbox is how a local agent's process is held (sandbox: at the top level
// as every local agent's default, and per agent; zooid/sandbox applies it).
type Sandbox struct {
	// Mode is sandbox.Landlock (the default) or sandbox.None.
	Mode string
	// Read and Write are paths (absolute, existing) the agent may read, or
	// read and write, beyond the system's files and its own directories.
	Read, Write []string
	// Connect and Bind are the TCP ports it may connect to and bind; nil
	// leaves that direction unrestricted, an empty list allows none.
	Connect, Bind sandbox.Ports
}

var sandboxKeys = []string{"type", "read", "write", "connect", "bind"}

// sandboxPath is one read or write entry, for Load's checks on disk.
type sandboxPath struct {
	path, key string
	line      int
}

// sandboxOf reads a sandbox value: a mode (landlock or none) or a mapping
// of type, read, write, connect and bind. Keys it does not set are taken
// from def (the top-level default; nil for the default itself): an agent's
// key replaces the default's, lists included.
func (p *parser) sandboxOf(f field, path string, def *Sandbox) *Sandbox {
	s := &Sandbox{Mode: sandbox.Landlock}
	if def != nil {
		*s = *def
	}
	n := deref(f.val)
	if f.val == nil || isNull(n) {
		return s
	}
	if n.Kind == yaml.ScalarNode {
		if v, ok := p.str(f, path); ok {
			s.Mode = p.sandboxMode(n, path, v, s.Mode)
		}
		return s
	}
	sf := p.fields(f.val, path, sandboxKeys...)
	if v, ok := p.str(sf["type"], path+".type"); ok {
		s.Mode = p.sandboxMode(sf["type"].val, path+".type", v, s.Mode)
	}
	if rf, ok := sf["read"]; ok {
		s.Read = p.sandboxPathList(rf, path+".read")
	}
	if wf, ok := sf["write"]; ok {
		s.Write = p.sandboxPathList(wf, path+".write")
	}
	if cf, ok := sf["connect"]; ok {
		s.Connect = p.ports(cf, path+".connect", 1)
	}
	if bf, ok := sf["bind"]; ok {
		s.Bind = p.ports(bf, path+".bind", 0)
	}
	return s
}

func (p *parser) sandboxMode(n *yaml.Node, path, v, def string) string {
	if v != sandbox.Landlock && v != sandbox.None {
		p.errorf(n, path, "must be %q or %q, got %q", sandbox.Landlock, sandbox.None, v)
		return def
	}
	return v
}

// sandboxPathList reads a list of absolute paths, recording each for Load.
func (p *parser) sandboxPathList(f field, path string) []string {
	list := p.strList(f, path)
	items := []*yaml.Node{}
	if n := deref(f.val); n != nil && n.Kind == yaml.SequenceNode {
		items = n.Content
	}
	out := []string{}
	for i, v := range list {
		at, key := f.val, fmt.Sprintf("%s[%d]", path, i)
		if i < len(items) {
			at = items[i]
		}
		if !filepath.IsAbs(v) {
			p.errorf(at, key, "must be an absolute path, got %q", v)
			continue
		}
		v = filepath.Clean(v)
		p.refuseSecret(at, key, "the path", v)
		p.sandboxPaths = append(p.sandboxPaths, sandboxPath{path: v, key: key, line: at.Line})
		out = append(out, v)
	}
	return out
}

// ports reads a list of TCP ports (min to 65535); the list may be empty,
// which is not the same as absent.
func (p *parser) ports(f field, path string, min int) sandbox.Ports {
	n := deref(f.val)
	if isNull(n) {
		p.errorf(f.key, path, "must be a list of ports ([] allows none; leave the key out to leave TCP open)")
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, path, "must be a list of ports, got %s", kindName(n))
		return nil
	}
	out := sandbox.Ports{}
	for i, item := range n.Content {
		v, ok := p.str(field{val: item}, fmt.Sprintf("%s[%d]", path, i))
		if !ok {
			continue
		}
		port, err := strconv.Atoi(v)
		if err != nil || port < min || port > 65535 {
			p.errorf(item, fmt.Sprintf("%s[%d]", path, i), "must be a port from %d to 65535, got %q", min, v)
			continue
		}
		out = append(out, uint16(port))
	}
	return out
}

// finishSandbox keeps a local agent's sandbox and drops a docker agent's:
// its container is its sandbox, so sandbox settings of its own are refused
// rather than silently ignored.
func (p *parser) finishSandbox(a *Agent, f map[string]field, path string) {
	if a.Runtime != RuntimeDocker {
		return
	}
	if sf, ok := f["sandbox"]; ok {
		p.errorf(sf.key, path+".sandbox", "is for local agents: a runtime docker agent's container is its sandbox")
	}
	a.Sandbox = nil
}

// checkSandboxPaths is Load's part for sandbox.read and sandbox.write: each
// path must exist, and none may be, or lie in, what the daemon keeps from
// agents (zooid.yaml, its token files, the state dir, the run dir, the trace
// dir): the sandbox would refuse it anyway, and saying so here beats an
// agent that fails at run time.
func (p *parser) checkSandboxPaths(cfg *Config) {
	kept := map[string]string{}
	if abs, err := filepath.Abs(p.file); err == nil {
		kept[abs] = "zooid.yaml"
	}
	for _, sf := range p.secretFiles {
		kept[sf.path] = "a token file (" + sf.key + ")"
	}
	kept[cfg.StateDir] = "the state dir"
	if cfg.RunDir != "" {
		kept[cfg.RunDir] = "the run dir"
	}
	if cfg.Trace != nil && cfg.Trace.Dir != "" {
		kept[cfg.Trace.Dir] = "the trace dir"
	}
	for _, sp := range p.sandboxPaths {
		if _, err := os.Stat(sp.path); err != nil {
			p.errorAt(sp.line, sp.key, "%v", err)
			continue
		}
		for k, what := range kept {
			if sp.path == k || strings.HasPrefix(sp.path, strings.TrimSuffix(k, "/")+"/") {
				p.errorAt(sp.line, sp.key, "%s is %s, which no agent may reach", sp.path, inOrIs(sp.path, k, what))
			}
		}
	}
}

func inOrIs(path, kept, what string) string {
	if path == kept {
		return what
	}
	return "in " + what + " " + kept
}

// SandboxReaches says whether agent a's own sandbox.read or sandbox.write
// names path or a directory it lies in, or lies in path: the operator shares
// it, so the daemon does not carve it out of a's grants as another agent's.
func (a *Agent) SandboxReaches(path string) bool {
	if a.Sandbox == nil {
		return false
	}
	for _, e := range slices.Concat(a.Sandbox.Read, a.Sandbox.Write) {
		if e == path || strings.HasPrefix(path, e+"/") || strings.HasPrefix(e, path+"/") {
			return true
		}
	}
	return false
}
