package mcpserver

import "errors"

// Process names the agent process a binding was made for: its pid, its start
// time (so a reused pid is not taken for it) and its uid. Only this process and
// its descendants are served on the binding (see peerAllowed), so the agent
// itself (an in-process extension) and the bridge it starts both qualify.
type Process struct {
	// Pid is the process id.
	Pid int
	// start is the process's start time in clock ticks since boot
	// (/proc/<pid>/stat field 22), which tells a reused pid apart.
	start uint64
	uid   uint32
}

// errNoPeerChecks is ProcessOf's answer where the kernel can't name a socket's
// peer process; the server then serves no binding rather than an unchecked one.
var errNoPeerChecks = errors.New("socket peer checks need Linux (SO_PEERCRED and /proc)")

// UID is the process's real uid as read when it was named.
func (p Process) UID() uint32 { return p.uid }
