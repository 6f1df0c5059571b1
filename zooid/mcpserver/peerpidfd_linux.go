//go:build linux && !(mips || mipsle || mips64 || mips64le)

package mcpserver

// soPeerPidfd is SO_PEERPIDFD (Linux 6.5+) where it has the generic value.
const soPeerPidfd = 77
