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
//
// For an agent with a user of its own, the default directory is made like
// its default working directory: the daemon's to make, the agent's to use
// (its user owns it, 0700; pi keeps sessions there), reached through a
// state dir and pi/ that are 0711 (openStateDirToAgentUsers). A configured
// directory is the operator's and is used as it is.
func (d *Daemon) piAgentDir(a config.Agent) (string, error) {
	dir, configured := a.ACP.Env[piext.AgentDirEnv]
	if !configured || dir == "" {
		dir = filepath.Join(d.opts.Config.StateDir, "pi", a.Name)
		configured = false
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("agent %s: pi directory %q: %w", a.Name, dir, err)
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return "", fmt.Errorf("agent %s: creating pi directory: %w", a.Name, err)
	}
	if a.User != nil && !configured {
		if err := os.Chmod(filepath.Dir(abs), 0o711); err != nil {
			return "", fmt.Errorf("agent %s: pi directory: %w", a.Name, err)
		}
		if err := os.Lchown(abs, int(a.User.UID), int(a.User.GID)); err != nil {
			return "", fmt.Errorf("agent %s: handing its pi directory %s to %s: %w", a.Name, abs, a.User, err)
		}
		if err := os.Chmod(abs, 0o700); err != nil {
			return "", fmt.Errorf("agent %s: pi directory %s: %w", a.Name, abs, err)
		}
	}
	return abs, nil
}

// installPi writes the Zooid extension into a pi agent's directory at start
// (replacing an older version of it, touching no other extension) and returns
// that directory. An agent with a user of its own gets the extension as that
// user's files, so its pi can read them.
func (d *Daemon) installPi(a config.Agent) (string, error) {
	dir, err := d.piAgentDir(a)
	if err != nil {
		return "", err
	}
	var owner *piext.Owner
	if u := a.User; u != nil {
		owner = &piext.Owner{UID: int(u.UID), GID: int(u.GID)}
	}
	wrote, err := piext.Install(dir, owner)
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
