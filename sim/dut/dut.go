// Package dut starts the daemon under test the one way the harness does:
// in-process (Start) or as a child process of the running executable
// (Spawn), served on a push socket the caller already holds, and stops it.
// The feature steps and replay use it; the command's own end-to-end tests
// start the real `zooid run` instead, since the binary is what they test.
//
// The push socket is bound by the caller before the homeserver hears of it
// and stays bound across a daemon's restarts: the daemon is handed a
// listener (in-process) or a descriptor (child) on it, never an address, so
// the port is never free for anyone else to take.
package dut

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/zooid-dev/zooid/internal/childproc"
	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/daemon"
	"github.com/zooid-dev/zooid/zooid/trace"
)

// Options say how to run the daemon under test.
type Options struct {
	// Bridge is the command the agents start as their Zooid MCP bridge.
	Bridge []string
	// TurnTimeout bounds each turn; StartTimeout the daemon's start-up.
	TurnTimeout, StartTimeout time.Duration
	// Logger gets the daemon's logs (in-process only; a child logs to its
	// log file).
	Logger *slog.Logger
	// TraceTap sees every trace record as it is written (in-process only).
	TraceTap func(trace.Record)
	// Observer hears the daemon's timings (in-process only).
	Observer daemon.Observer
}

// InProcess is a daemon running in this process.
type InProcess struct {
	*daemon.Daemon
	cancel context.CancelFunc
}

// Start configures and starts a daemon in this process, serving on push. It
// lives until Close, not as long as ctx: a step that happens to start it
// must not end it. A failed start closes push.
func Start(ctx context.Context, cfg *config.Config, push net.Listener, o Options) (*InProcess, error) {
	d, err := daemon.New(daemon.Options{
		Config: cfg, Logger: o.Logger, BridgeCommand: o.Bridge,
		TurnTimeout: o.TurnTimeout, StartTimeout: o.StartTimeout,
		PushListener: push, TraceTap: o.TraceTap, Observer: o.Observer,
	})
	if err != nil {
		_ = push.Close()
		return nil, fmt.Errorf("configuring the daemon: %w", err)
	}
	life, cancel := context.WithCancel(context.WithoutCancel(ctx))
	if err := d.Start(life); err != nil {
		cancel()
		return nil, fmt.Errorf("starting the daemon: %w", err)
	}
	return &InProcess{Daemon: d, cancel: cancel}, nil
}

// Close stops the daemon and ends its life.
func (d *InProcess) Close() error {
	err := d.Daemon.Close()
	d.cancel()
	return err
}

// childArg, with ChildEnv set to it, makes an executable that called
// MainIfChild at start run the daemon instead of its usual job.
const childArg = "zooid-daemon"

// ChildEnv is the variable that tells an executable it was spawned as the
// daemon under test (with childArg as its first argument).
const ChildEnv = "ZOOID_TEST_DAEMON"

// pushFD is the push socket's descriptor in the child: the first of
// cmd.ExtraFiles.
const pushFD = 3

// childConfig is what the parent hands the child, as JSON in a file.
type childConfig struct {
	ConfigPath    string // a zooid.yaml whose tokens come from the child's environment
	BridgeCommand []string
	TurnTimeout   time.Duration
	StartTimeout  time.Duration
}

// MainIfChild runs the daemon and exits when this process was spawned as
// the daemon under test; otherwise it returns at once. A test binary (or
// zooid-sim) that spawns daemons calls it first thing (an init or
// TestMain).
func MainIfChild() {
	if len(os.Args) > 2 && os.Args[1] == childArg && os.Getenv(ChildEnv) == childArg {
		os.Exit(childMain(os.Args[2]))
	}
}

// childMain runs the daemon of a child process; "ready" on stdout says it
// started, SIGTERM or SIGINT stop it.
func childMain(path string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	raw, err := os.ReadFile(path)
	if err != nil {
		log.Error("reading the daemon's child config", "err", err)
		return 1
	}
	var cc childConfig
	if err := json.Unmarshal(raw, &cc); err != nil {
		log.Error("decoding the daemon's child config", "err", err)
		return 1
	}
	cfg, err := config.Load(cc.ConfigPath)
	if err != nil {
		log.Error("loading zooid.yaml", "err", err)
		return 1
	}
	f := os.NewFile(uintptr(pushFD), "appservice push socket")
	ln, err := net.FileListener(f)
	_ = f.Close()
	if err != nil {
		log.Error("inheriting the push socket", "fd", pushFD, "err", err)
		return 1
	}
	d, err := daemon.New(daemon.Options{Config: cfg, Logger: log, BridgeCommand: cc.BridgeCommand,
		TurnTimeout: cc.TurnTimeout, StartTimeout: cc.StartTimeout, PushListener: ln})
	if err != nil {
		log.Error("configuring the daemon", "err", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := d.Start(ctx); err != nil {
		log.Error("starting the daemon", "err", err)
		return 1
	}
	fmt.Println("ready")
	<-ctx.Done()
	if err := d.Close(); err != nil {
		log.Error("closing the daemon", "err", err)
		return 1
	}
	return 0
}

// Child is the daemon under test as a child process, which a scenario can
// kill outright and start again on the same config, state and push socket.
type Child struct {
	exe     string
	cfgPath string // the childConfig
	logPath string
	push    *os.File
	env     []string
	runs    int

	cmd  *exec.Cmd
	done chan struct{}
}

// ChildOptions say where a child keeps its files and what it inherits.
type ChildOptions struct {
	Options
	// ConfigPath is the zooid.yaml it loads; Env the variables that
	// zooid.yaml reads (its tokens), and any others the child needs.
	ConfigPath string
	Env        []string
	// Dir holds the child config (daemon.json) and its log (daemon.log,
	// each run appended).
	Dir string
	// Push is the held push socket's file; the parent keeps its copy.
	Push *os.File
	// Exe is the executable to run (one that calls MainIfChild); default
	// this process's own.
	Exe string
}

// NewChild prepares a child daemon; Spawn starts it.
func NewChild(o ChildOptions) (*Child, error) {
	exe := o.Exe
	if exe == "" {
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("finding this executable: %w", err)
		}
		exe = self
	}
	raw, err := json.Marshal(childConfig{ConfigPath: o.ConfigPath, BridgeCommand: o.Bridge, TurnTimeout: o.TurnTimeout, StartTimeout: o.StartTimeout})
	if err != nil {
		return nil, fmt.Errorf("encoding the daemon's child config: %w", err)
	}
	c := &Child{exe: exe, cfgPath: filepath.Join(o.Dir, "daemon.json"), logPath: filepath.Join(o.Dir, "daemon.log"), push: o.Push, env: o.Env}
	if err := os.WriteFile(c.cfgPath, raw, 0o600); err != nil {
		return nil, fmt.Errorf("writing the daemon's child config: %w", err)
	}
	return c, nil
}

// Spawn starts the child (again, after a Stop or its death) with extra
// variables, and waits until it says it is ready, at most until ctx ends.
func (c *Child) Spawn(ctx context.Context, extraEnv ...string) error {
	logf, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("daemon log: %w", err)
	}
	c.runs++
	fmt.Fprintf(logf, "=== daemon run %d\n", c.runs)
	cmd := exec.Command(c.exe, childArg, c.cfgPath)
	cmd.Env = append(append(append(os.Environ(), ChildEnv+"="+childArg), c.env...), extraEnv...)
	cmd.Stderr = logf
	cmd.SysProcAttr = childproc.SysProcAttr()
	cmd.ExtraFiles = []*os.File{c.push} // pushFD in the child
	ready := &readyWriter{ch: make(chan struct{})}
	cmd.Stdout = ready
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("starting the daemon process: %w", err)
	}
	c.cmd, c.done = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(c.done)
	}()
	select {
	case <-ready.ch:
		return nil
	case <-c.done:
		return fmt.Errorf("the daemon process exited during start-up: %s", c.LogTail())
	case <-ctx.Done():
		return fmt.Errorf("the daemon process was not ready in time (%w): %s", ctx.Err(), c.LogTail())
	}
}

// Pid is the running child's process id; 0 before the first Spawn.
func (c *Child) Pid() int {
	if c.cmd == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

// Done is closed when the latest run has exited.
func (c *Child) Done() <-chan struct{} { return c.done }

// LogPath is the child's log, every run appended.
func (c *Child) LogPath() string { return c.logPath }

// Stop signals the child's process group and waits for it; a child that
// ignores the signal for 10 s is killed, and that is an error.
func (c *Child) Stop(sig syscall.Signal) error {
	if c.cmd == nil {
		return nil
	}
	select {
	case <-c.done:
		return nil
	default:
	}
	_ = syscall.Kill(-c.cmd.Process.Pid, sig)
	select {
	case <-c.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
		<-c.done
		return fmt.Errorf("the daemon process ignored %s for 10s and was killed", sig)
	}
	return nil
}

// LogTail is the end of the child's log, for failures.
func (c *Child) LogTail() string {
	b, err := os.ReadFile(c.logPath)
	if errors.Is(err, os.ErrNotExist) {
		return "(no daemon log yet)"
	}
	if err != nil {
		return fmt.Sprintf("(no daemon log: %v)", err)
	}
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return "daemon log tail:\n" + string(b)
}

// readyWriter is the child's stdout: it closes ch once "ready" is written.
type readyWriter struct {
	mu   sync.Mutex
	buf  []byte
	ch   chan struct{}
	done bool
}

func (r *readyWriter) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.done {
		r.buf = append(r.buf, b...)
		if strings.Contains(string(r.buf), "ready\n") {
			r.done = true
			close(r.ch)
		}
	}
	return len(b), nil
}
