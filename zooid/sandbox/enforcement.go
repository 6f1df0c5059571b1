package sandbox

import "fmt"

// The Landlock ABI versions that bring what an agent is held to.
const (
	abiFiles   = 1 // reading, writing, executing files; ptrace across domains
	abiRefer   = 2 // renaming and linking between the agent's own directories (not a hold: ABI 1 refuses all of it)
	abiTrunc   = 3 // truncating files
	abiNet     = 4 // TCP connect and bind
	abiIoctl   = 5 // ioctl on device files
	abiScopes  = 6 // signals and abstract unix sockets outside the domain
	abiSockets = 9 // connecting to pathname unix sockets
	// ABIWanted is the ABI that holds an agent to everything this package
	// asks of Landlock.
	ABIWanted = abiSockets
)

// Enforcement says, for a kernel with Landlock ABI abi, what a sandboxed
// agent is held to (held) and what this kernel cannot hold it to (missing),
// each a short phrase for `zooid check` and the daemon's start-up log. net
// says the agent's sandbox restricts TCP (connect or bind given).
func Enforcement(abi int, net bool) (held, missing []string) {
	need := func(v int, what string) {
		if abi >= v {
			held = append(held, what)
		} else {
			missing = append(missing, fmt.Sprintf("%s (Landlock ABI %d)", what, v))
		}
	}
	need(abiFiles, "files: the system's read-only, its own read-write, zooid.yaml, the state dir and other agents' directories refused")
	need(abiFiles, "ptrace of the daemon and other agents refused")
	need(abiTrunc, "truncating files it may only read refused")
	need(abiIoctl, "device ioctls refused but on its terminals")
	need(abiScopes, "signals to the daemon and other agents refused")
	need(abiScopes, "abstract unix sockets outside its sandbox refused")
	need(abiSockets, "connecting to unix sockets other than its own refused (another agent's refuses the session anyway: its peer check)")
	if net {
		need(abiNet, "TCP limited to its sandbox's ports")
	}
	return held, missing
}
