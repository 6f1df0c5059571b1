//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// ABI is the Landlock ABI version this kernel offers; 0 when it has none
// (not built in, or not enabled at boot).
func ABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil || v < 0 {
		return 0
	}
	return v
}

// The rights of each kind of grant, before they are cut to what the
// kernel's ABI knows.
const (
	readFile  = ll.AccessFSExecute | ll.AccessFSReadFile
	readDir   = readFile | ll.AccessFSReadDir
	writeFile = readFile | ll.AccessFSWriteFile | ll.AccessFSTruncate
	writeDir  = readDir | ll.AccessFSWriteFile | ll.AccessFSTruncate |
		ll.AccessFSRemoveDir | ll.AccessFSRemoveFile | ll.AccessFSMakeChar | ll.AccessFSMakeDir |
		ll.AccessFSMakeReg | ll.AccessFSMakeSock | ll.AccessFSMakeFifo | ll.AccessFSMakeBlock |
		ll.AccessFSMakeSym | ll.AccessFSRefer | ll.AccessFSResolveUnix
	deviceFile = ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSTruncate | ll.AccessFSIoctlDev
	deviceDir  = writeDir | ll.AccessFSIoctlDev
	// fileRights are those a rule on a file (not a directory) may carry.
	fileRights = ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile | ll.AccessFSTruncate | ll.AccessFSIoctlDev
)

// handledFS is every filesystem right the kernel's ABI knows; each is
// refused unless a rule grants it.
func handledFS(abi int) uint64 {
	var h uint64
	for v, bits := range map[int]uint64{
		abiFiles: ll.AccessFSExecute | ll.AccessFSWriteFile | ll.AccessFSReadFile | ll.AccessFSReadDir |
			ll.AccessFSRemoveDir | ll.AccessFSRemoveFile | ll.AccessFSMakeChar | ll.AccessFSMakeDir |
			ll.AccessFSMakeReg | ll.AccessFSMakeSock | ll.AccessFSMakeFifo | ll.AccessFSMakeBlock | ll.AccessFSMakeSym,
		abiRefer:   ll.AccessFSRefer,
		abiTrunc:   ll.AccessFSTruncate,
		abiIoctl:   ll.AccessFSIoctlDev,
		abiSockets: ll.AccessFSResolveUnix,
	} {
		if abi >= v {
			h |= bits
		}
	}
	return h
}

// config is the Landlock configuration of p on a kernel of ABI abi, and
// its rules. Paths that are missing, or that the agent's user cannot reach
// (the wrapper runs as that user), are left out: nothing there to grant.
func config(p Policy, abi int) (landlock.Config, []landlock.Rule) {
	fsHandled := handledFS(abi)
	cfg := landlock.Config{HandledAccessFS: landlock.AccessFSSet(fsHandled)}
	if abi >= abiNet {
		if p.Connect != nil {
			cfg.HandledAccessNet |= ll.AccessNetConnectTCP
		}
		if p.Bind != nil {
			cfg.HandledAccessNet |= ll.AccessNetBindTCP
		}
	}
	if abi >= abiScopes {
		cfg.Scoped = ll.ScopeAbstractUnixSocket | ll.ScopeSignal
	}
	var rules []landlock.Rule
	add := func(paths []string, dir, file uint64) {
		for _, path := range paths {
			st, err := os.Stat(path)
			if err != nil {
				continue
			}
			rights := dir
			if !st.IsDir() {
				rights = file & fileRights
			}
			if rights &= fsHandled; rights != 0 {
				rules = append(rules, landlock.PathAccess(landlock.AccessFSSet(rights), path))
			}
		}
	}
	add(p.Read, readDir, readFile)
	add(p.Write, writeDir, writeFile)
	add(p.Devices, deviceDir, deviceFile)
	add(p.List, ll.AccessFSReadDir, 0)
	add(p.Sockets, ll.AccessFSResolveUnix, 0)
	if abi >= abiNet {
		for _, port := range p.Connect {
			rules = append(rules, landlock.ConnectTCP(port))
		}
		for _, port := range p.Bind {
			rules = append(rules, landlock.BindTCP(port))
		}
	}
	return cfg.BestEffort(), rules
}

// restrict applies p to every thread of this process, which then goes on
// held by it (as do the processes it starts).
func restrict(p Policy) error {
	cfg, rules := config(p, ABI())
	if err := cfg.Restrict(rules...); err != nil {
		return fmt.Errorf("applying the Landlock ruleset: %w", err)
	}
	return nil
}

// restrictAndExec applies p to this process and replaces it with argv[0]
// (an absolute path) run with env. The ruleset is enforced on this OS
// thread alone, which then execs: the new program is that thread, so it
// starts inside the domain, and nothing else of this process runs on.
func restrictAndExec(p Policy, argv, env []string) error {
	abi := ABI()
	cfg, rules := config(p, abi)
	fd, flags, err := cfg.NewRulesetFD(rules...)
	if err != nil {
		return fmt.Errorf("building the Landlock ruleset: %w", err)
	}
	runtime.LockOSThread() // never unlocked: this thread becomes the agent
	if fd >= 0 {
		defer unix.Close(fd)
		// Landlock needs no_new_privs (or CAP_SYS_ADMIN): a setuid program
		// run from the sandbox gains nothing.
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS): %w", err)
		}
		if err := ll.LandlockRestrictSelf(fd, flags); err != nil {
			return fmt.Errorf("landlock_restrict_self: %w", err)
		}
	}
	err = syscall.Exec(argv[0], argv, env)
	if errors.Is(err, syscall.EACCES) {
		return fmt.Errorf("executing %s: %w (its file or directory is outside what the sandbox lets it read: name it in sandbox.read)", argv[0], err)
	}
	return fmt.Errorf("executing %s: %w", argv[0], err)
}
