//go:build linux

// Package netjail runs a command in a network namespace of its own that has
// only a loopback interface, with chosen loopback TCP ports forwarded to the
// same ports of the host's loopback: a real agent in a test reaches its model
// double and nothing else. An agent that ignores its base URL (or resolves a
// host name, or phones home) fails at once with "network unreachable"
// instead of reaching past the machine. A new network namespace needs root
// (CAP_SYS_ADMIN); Supported says whether this process may make one.
//
// The command is `netjail --forward 127.0.0.1:PORT … -- COMMAND ARGS…`. It
// runs in two stages in one process group (so the daemon's signal to the
// agent's group reaches every stage): the outer stage, in the host's
// namespace, serves a unix socket per forwarded port that dials the port on
// the host; the inner stage, started in a new network namespace, brings the
// loopback up, listens on each forwarded port and splices each connection to
// its unix socket (the file system is shared across the namespaces), then
// runs the command and exits with its status.
package netjail

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// innerEnv carries the forwarding sockets from the outer stage to the inner
// one: "127.0.0.1:PORT=SOCKET,…".
const innerEnv = "ZOOID_NETJAIL_INNER"

// Supported says whether this process can make network namespaces.
func Supported() bool { return os.Geteuid() == 0 }

// Main runs the netjail command with args (after its name) and returns the
// exit code: the command's, or 2 for bad arguments, 1 for a jail that could
// not be made.
func Main(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("netjail", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var forwards []string
	fs.Func("forward", "a loopback TCP address (127.0.0.1:PORT) to reach from inside; repeatable", func(s string) error {
		host, port, err := net.SplitHostPort(s)
		if err != nil || net.ParseIP(host) == nil || !net.ParseIP(host).IsLoopback() {
			return fmt.Errorf("%q is not a loopback address with a port", s)
		}
		forwards = append(forwards, net.JoinHostPort(host, port))
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cmd := fs.Args()
	if len(cmd) == 0 {
		fmt.Fprintln(stderr, "netjail: usage: netjail [--forward 127.0.0.1:PORT]… -- COMMAND [ARGS…]")
		return 2
	}
	if inner, ok := os.LookupEnv(innerEnv); ok {
		return runInner(inner, cmd, stderr)
	}
	return runOuter(forwards, stderr)
}

// runOuter serves the forwards on unix sockets and starts the inner stage
// in a new network namespace.
func runOuter(forwards []string, stderr io.Writer) int {
	dir, err := os.MkdirTemp("", "netjail-")
	if err != nil {
		fmt.Fprintf(stderr, "netjail: %v\n", err)
		return 1
	}
	defer os.RemoveAll(dir)
	var pairs []string
	for i, addr := range forwards {
		sock := filepath.Join(dir, fmt.Sprintf("%d.sock", i))
		ln, err := net.Listen("unix", sock)
		if err != nil {
			fmt.Fprintf(stderr, "netjail: %v\n", err)
			return 1
		}
		defer ln.Close()
		go forward(ln, "tcp", addr)
		pairs = append(pairs, addr+"="+sock)
	}
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(stderr, "netjail: %v\n", err)
		return 1
	}
	// Re-run the same command (whatever dispatcher the executable has) with
	// the same arguments: the dispatcher's own leading words stay as they were.
	c := exec.Command(self, os.Args[1:]...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	c.Env = append(os.Environ(), innerEnv+"="+strings.Join(pairs, ","))
	// A PID namespace too: its first process is the inner stage, and when
	// that dies (with this one, by Pdeathsig) the kernel kills everything
	// left in the namespace. Without it a grandchild the adapter started
	// (codex-acp's native binary, which does not exit at the end of its
	// stdin) outlived a killed daemon, holding its sessions' files.
	c.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET | syscall.CLONE_NEWPID, Pdeathsig: syscall.SIGKILL}
	return runPassingSignals(c, stderr)
}

// runInner brings up the loopback of the new namespace, serves the forwarded
// ports on it and runs the command.
func runInner(inner string, cmd []string, stderr io.Writer) int {
	if err := loopbackUp(); err != nil {
		fmt.Fprintf(stderr, "netjail: bringing up lo: %v\n", err)
		return 1
	}
	for _, p := range strings.Split(inner, ",") {
		if p == "" {
			continue
		}
		addr, sock, ok := strings.Cut(p, "=")
		if !ok {
			fmt.Fprintf(stderr, "netjail: bad %s entry %q\n", innerEnv, p)
			return 1
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			fmt.Fprintf(stderr, "netjail: %v\n", err)
			return 1
		}
		defer ln.Close()
		go forward(ln, "unix", sock)
	}
	c := exec.Command(cmd[0], cmd[1:]...)
	c.Stdin, c.Stdout, c.Stderr = os.Stdin, os.Stdout, os.Stderr
	c.Env = slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, innerEnv+"=") })
	c.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return runPassingSignals(c, stderr)
}

// runPassingSignals runs c, passing on the signals a supervisor sends this
// stage alone (the agent's process group gets them anyway), and returns
// its exit code.
func runPassingSignals(c *exec.Cmd, stderr io.Writer) int {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	if err := c.Start(); err != nil {
		fmt.Fprintf(stderr, "netjail: starting %s: %v\n", c.Path, err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- c.Wait() }()
	for {
		select {
		case s := <-sigs:
			_ = c.Process.Signal(s)
		case err := <-done:
			var ee *exec.ExitError
			switch {
			case err == nil:
				return 0
			case errors.As(err, &ee):
				if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
					return 128 + int(ws.Signal())
				}
				return ee.ExitCode()
			default:
				fmt.Fprintf(stderr, "netjail: %v\n", err)
				return 1
			}
		}
	}
}

// forward splices every connection accepted on ln to a new connection to
// (network, addr) until ln is closed.
func forward(ln net.Listener, network, addr string) {
	for {
		in, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer in.Close()
			out, err := net.Dial(network, addr)
			if err != nil {
				return
			}
			defer out.Close()
			done := make(chan struct{}, 2)
			go func() { _, _ = io.Copy(out, in); closeWrite(out); done <- struct{}{} }()
			go func() { _, _ = io.Copy(in, out); closeWrite(in); done <- struct{}{} }()
			<-done
			<-done
		}()
	}
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// loopbackUp sets the IFF_UP flag of lo, as `ip link set lo up` does: a new
// network namespace's loopback starts down.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}
