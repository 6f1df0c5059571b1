package daemon

import (
	"os"

	"github.com/zooid-dev/zooid/zooid/config"
)

// agentCommand is the command line that starts a's agent: its preset's or its
// own command, with zooid's own executable for an agent built into zooid (the
// demo preset) — inside a container, the bridge mounted there, which is zooid
// too.
func (d *Daemon) agentCommand(a config.ACP, inContainer bool) (string, []string) {
	command, args := a.Resolve()
	if !a.RunsSelf() {
		return command, args
	}
	if inContainer {
		return config.ContainerBridge, args
	}
	return d.selfExe(), args
}

// selfExe is this zooid: the program of the bridge command (a harness may run
// the daemon inside another binary that serves the same subcommands), else
// this executable.
func (d *Daemon) selfExe() string {
	if len(d.opts.BridgeCommand) > 0 {
		return d.opts.BridgeCommand[0]
	}
	if exe, err := os.Executable(); err == nil {
		return exe
	}
	return config.SelfCommand
}
