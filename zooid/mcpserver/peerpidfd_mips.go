//go:build linux && (mips || mipsle || mips64 || mips64le)

package mcpserver

// soPeerPidfd is not asked for on MIPS (its socket options are numbered
// apart); the check falls back to the pid alone.
const soPeerPidfd = 0
