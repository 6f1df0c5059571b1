package daemon

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/piext"
)

// usesPi says the agent runs pi through pi-acp: pi has no MCP client, so it
// gets the Zooid tools as a native extension instead (zooid/piext).
func usesPi(a config.Agent) bool { return a.ACP.Preset == "pi" && a.ACP.Command == "" }

// piAgentDir is the agent's pi directory: the PI_CODING_AGENT_DIR its config
// sets, else its own directory under the state dir, so the extension is never
// written into the user's own ~/.pi/agent (where it would load into every pi
// they run) and two agents never share pi settings or sessions.
func (d *Daemon) piAgentDir(a config.Agent) (string, error) {
	dir := a.ACP.Env[piext.AgentDirEnv]
	if dir == "" {
		dir = filepath.Join(d.opts.Config.StateDir, "pi", a.Name)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("agent %s: pi directory %q: %w", a.Name, dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return "", fmt.Errorf("agent %s: creating pi directory: %w", a.Name, err)
	}
	return abs, nil
}

// installPi writes the Zooid extension into a pi agent's directory at start
// (replacing an older version of it, touching no other extension) and returns
// that directory.
func (d *Daemon) installPi(a config.Agent) (string, error) {
	dir, err := d.piAgentDir(a)
	if err != nil {
		return "", err
	}
	wrote, err := piext.Install(dir)
	if err != nil {
		return "", fmt.Errorf("agent %s: %w", a.Name, err)
	}
	if wrote {
		d.log.Info("installed the Zooid pi extension", "agent", a.Name, "dir", filepath.Join(dir, "extensions"))
	}
	return dir, nil
}

// piEnv is what a pi agent's process needs besides its allowlisted
// environment: its pi directory and the socket the extension calls. Neither
// is a secret; the extension names its session by the ACP session id, which
// the daemon maps to the session's binding.
func piEnv(rt *agentRuntime) []string {
	if rt.piDir == "" {
		return nil
	}
	return []string{piext.AgentDirEnv + "=" + rt.piDir, piext.SocketEnv + "=" + rt.socket}
}
