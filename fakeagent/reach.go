package fakeagent

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	acp "github.com/coder/acp-go-sdk"
)

// Try makes one attempt of a Reach action from this process and reports
// what the kernel answered. target is
//
//   - a path: opened for reading (a directory: its listing); one ending in
//     ".sock" is connected to as a unix socket;
//   - "write:PATH": opened for writing (appending, created if missing;
//     nothing is written);
//   - "signal:PID": signal 0 sent to the process (the permission check of
//     a signal, delivering none);
//   - "ptrace:PID": attached to with PTRACE_SEIZE, then detached (Linux);
//   - "abstract:NAME": connected to as the abstract unix socket NAME.
func Try(target string) ReachResult {
	r := ReachResult{Path: target}
	var err error
	switch kind, arg, _ := strings.Cut(target, ":"); kind {
	case "write":
		var f *os.File
		if f, err = os.OpenFile(arg, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600); err == nil {
			f.Close()
		}
	case "abstract":
		var c net.Conn
		if c, err = net.Dial("unix", "@"+arg); err == nil {
			c.Close()
		}
	case "signal", "ptrace":
		pid, perr := strconv.Atoi(arg)
		switch {
		case perr != nil || pid <= 0:
			err = errors.New("not a process id: " + arg)
		case kind == "signal":
			err = syscall.Kill(pid, 0)
		default:
			err = ptraceAttach(pid)
		}
	default:
		if strings.HasSuffix(target, ".sock") {
			var c net.Conn
			if c, err = net.Dial("unix", target); err == nil {
				c.Close()
			}
			break
		}
		var f *os.File
		if f, err = os.Open(target); err == nil {
			f.Close()
		}
	}
	if err != nil {
		r.Err = err.Error()
		r.EACCES, r.EPERM = errors.Is(err, syscall.EACCES), errors.Is(err, syscall.EPERM)
	}
	return r
}

// runTimeout bounds a Run action's command.
const runTimeout = 30 * time.Second

// run starts argv as the agent's child, as an agent runs a tool, and
// reports its combined output.
func run(ctx context.Context, session acp.SessionId, argv []string) Probe {
	pr := Probe{SessionID: session, Op: "run", Path: strings.Join(argv, " ")}
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	pr.Out = out.String()
	if err != nil {
		pr.Err = err.Error()
	}
	return pr
}
