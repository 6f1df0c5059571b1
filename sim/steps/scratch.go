package steps

import (
	"sync"
	"syscall"
)

// shmRoot is where a scenario's scratch directory goes when it can: a tmpfs.
const shmRoot = "/dev/shm"

// shmNeeds is the free space shmRoot must have to be used: a container's
// default /dev/shm (64 MiB) is too small for several scenarios' state at once.
const shmNeeds = 256 << 20

// scratchRoot is the directory a scenario's scratch directory (the daemon's
// state files, the agents' directories and sockets) is made in: /dev/shm
// when it is a writable tmpfs with room, else /tmp. The daemon fsyncs its
// three bbolt files as it opens them and at every write; on this machine's
// disk those fsyncs were most of a scenario's world setup (27 of 36 ms at
// load 15; 7 ms on tmpfs). No scenario is about surviving a power loss: a
// killed daemon's writes survive in the page cache on either.
var scratchRoot = sync.OnceValue(func() string {
	var st syscall.Statfs_t
	const tmpfsMagic = 0x01021994
	if err := syscall.Statfs(shmRoot, &st); err != nil || st.Type != tmpfsMagic || uint64(st.Bavail)*uint64(st.Bsize) < shmNeeds {
		return "/tmp"
	}
	if err := syscall.Access(shmRoot, 0o2|0o1); err != nil { // W_OK|X_OK
		return "/tmp"
	}
	return shmRoot
})
