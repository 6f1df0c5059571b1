// Package piext generates and installs the Zooid extension for pi. pi has no MCP
// client, so agents on the pi preset get the ten tools natively: a TypeScript
// extension, generated at run time from tools.Manifest (the definitions the MCP
// server lists), that calls the same agent socket. It names its binding by the
// pi session's id, which pi-acp reports as the ACP session id; the daemon maps
// that id to the session's binding (mcpserver.Server.BindACPSession).
package piext

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/zooid-dev/zooid/zooid/tools"
)

//go:embed extension.ts.tmpl
var template string

// FileName is the extension's file name in pi's extensions directory. Other
// files there are never touched.
const FileName = "zooid.ts"

// SocketEnv is the variable that tells the extension the agent's socket path.
const SocketEnv = "ZOOID_SOCKET"

// AgentDirEnv is pi's variable for its agent directory (settings, sessions,
// extensions); its default is ~/.pi/agent.
const AgentDirEnv = "PI_CODING_AGENT_DIR"

const versionPrefix = "// zooid-extension-version: "

// Source returns the extension's TypeScript and its version: a hash of the
// template and the tool manifest, so any change to either is a new version.
func Source() (src []byte, version string) {
	manifest, err := json.Marshal(tools.Manifest())
	if err != nil {
		panic(fmt.Sprintf("piext: encoding the tool manifest: %v", err))
	}
	sum := sha256.Sum256(append([]byte(template), manifest...))
	version = hex.EncodeToString(sum[:8])
	out := strings.ReplaceAll(template, "{{VERSION}}", version)
	out = strings.Replace(out, "{{TOOLS}}", string(manifest), 1)
	return []byte(out), version
}

// DefaultAgentDir is pi's agent directory when PI_CODING_AGENT_DIR is unset.
func DefaultAgentDir() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("finding pi's agent directory: %w", err)
	}
	return filepath.Join(home, ".pi", "agent"), nil
}

// Owner is the unix user a pi agent runs as, when it has one of its own.
type Owner struct{ UID, GID int }

// Install writes the extension to <agentDir>/extensions/zooid.ts unless a file
// of the same version is there already. It reports whether it wrote. A zooid.ts
// that is not ours (no version header) is refused rather than overwritten.
//
// With an owner (an agent with a user: of its own), the extensions directory
// and the file are handed to that user, so the pi it runs can read them. The
// agent directory may then be that user's, written by a daemon running as
// root: every path is opened through os.Root, so a symlink the user planted
// (extensions -> /etc) is refused rather than followed out of the directory.
func Install(agentDir string, owner *Owner) (bool, error) {
	wrote, err := install(agentDir, owner)
	if err != nil {
		return false, fmt.Errorf("installing the pi extension in %s: %w", agentDir, err)
	}
	return wrote, nil
}

func install(agentDir string, owner *Owner) (bool, error) {
	root, err := os.OpenRoot(agentDir)
	if err != nil {
		return false, err
	}
	defer root.Close()
	const dir = "extensions"
	if err := root.MkdirAll(dir, 0o700); err != nil {
		return false, err
	}
	if owner != nil {
		if err := root.Lchown(dir, owner.UID, owner.GID); err != nil {
			return false, err
		}
	}
	path := filepath.Join(dir, FileName)
	src, version := Source()
	old, err := root.ReadFile(path)
	switch {
	case err == nil:
		first, _, _ := bytes.Cut(old, []byte("\n"))
		if !bytes.HasPrefix(first, []byte(versionPrefix)) {
			return false, fmt.Errorf("%s exists and is not Zooid's (no %q header); move it away", filepath.Join(agentDir, path), strings.TrimSpace(versionPrefix))
		}
		if string(bytes.TrimPrefix(first, []byte(versionPrefix))) == version {
			return false, nil
		}
	case !errors.Is(err, os.ErrNotExist):
		return false, err
	}
	// Write then rename, so a pi starting meanwhile never loads half a file.
	tmp := filepath.Join(dir, ".zooid-"+rand.Text()+".ts.tmp")
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return false, err
	}
	defer root.Remove(tmp)
	if _, err := f.Write(src); err != nil {
		f.Close()
		return false, err
	}
	if owner != nil {
		if err := f.Chown(owner.UID, owner.GID); err != nil {
			f.Close()
			return false, err
		}
	}
	if err := f.Close(); err != nil {
		return false, err
	}
	if err := root.Rename(tmp, path); err != nil {
		return false, err
	}
	return true, nil
}
