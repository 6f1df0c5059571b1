package bridge

import (
	"os"

	"golang.org/x/sys/unix"
)

// pipeSize is the capacity asked for an agent's stdout pipe: a line up to it,
// written into a pipe the agent has emptied, is in it whole before the agent
// can read any of it (the kernel copies a write that fits under the pipe's lock).
// Linux lets any user raise a pipe to /proc/sys/fs/pipe-max-size, 1 MiB by
// default; a tool's page of 200 messages can pass the default 64 KiB.
const pipeSize = 1 << 20

// growPipe raises f's capacity to pipeSize when f is a pipe with less. It is
// best effort: where the kernel refuses, lines longer than the pipe reach the
// agent in pieces, as before.
func growPipe(f *os.File) {
	rc, err := f.SyscallConn() // not f.Fd(), which would make f blocking
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		size, err := unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0)
		if err != nil || size >= pipeSize {
			return // not a pipe, or large enough
		}
		_, _ = unix.FcntlInt(fd, unix.F_SETPIPE_SZ, pipeSize)
	})
}
