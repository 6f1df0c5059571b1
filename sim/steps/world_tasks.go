package steps

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
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/fakeagent"
	"github.com/zooid-dev/zooid/internal/childproc"
	"github.com/zooid-dev/zooid/internal/faultpoint"
	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/daemon"
	"github.com/zooid-dev/zooid/zooid/zevent"
)

// taskWorld is what the task steps remember of a scenario beyond the shared
// world: the tasks its agents started, the tool results adopted from scripted
// turns, and the daemon's process when it runs as one.
type taskWorld struct {
	tasks   []*taskRef
	seen    map[*call]bool
	adopted map[string]int // agent+tool → results of scripted turns adopted so far
	proc    *daemonProc
}

// taskRef is one task thread some agent of the scenario started.
type taskRef struct {
	caller  string
	agent   string
	prompt  string
	notify  string
	thread  id.EventID
	room    *room
	session acp.SessionId // the caller's ACP session that delegated it
	origin  *post         // the caller's thread root, when the harness knows it
}

func (t *taskRef) String() string {
	return fmt.Sprintf("%s's task for %s %q (thread %s)", t.caller, t.agent, t.prompt, short(string(t.thread)))
}

var (
	taskWorldsMu sync.Mutex
	taskWorlds   = map[*world]*taskWorld{}
)

// tw is the scenario's task state, made on first use and dropped when the
// scenario closes. It lives beside the world so the shared harness files
// need no task fields.
func (w *world) tw() *taskWorld {
	taskWorldsMu.Lock()
	defer taskWorldsMu.Unlock()
	t, ok := taskWorlds[w]
	if !ok {
		t = &taskWorld{seen: map[*call]bool{}, adopted: map[string]int{}}
		taskWorlds[w] = t
		w.closers = append(w.closers, func() error {
			taskWorldsMu.Lock()
			delete(taskWorlds, w)
			taskWorldsMu.Unlock()
			return nil
		})
	}
	return t
}

// syncTasks records the tasks of every zooid_start_task_threads result the
// scenario has seen since the last sync. Steps run one at a time and each
// makes at most one call, so tasks are recorded in the order they started.
func (w *world) syncTasks() {
	tw := w.tw()
	for _, an := range w.agentSeq {
		for _, c := range w.calls[an] {
			if tw.seen[c] {
				continue
			}
			tw.seen[c] = true
			if c.tool != "zooid_start_task_threads" || c.body == nil {
				continue
			}
			w.recordStarted(c)
		}
	}
}

func (w *world) recordStarted(c *call) {
	tw := w.tw()
	specs, _ := c.args["tasks"].([]any)
	results, _ := c.body["results"].([]any)
	notify, _ := c.body["notify"].(string)
	var origin *post
	if f := w.focus[c.agent]; f != nil {
		origin = w.rootPost(f)
	}
	for i, r := range results {
		rm, _ := r.(map[string]any)
		if rm["status"] != "started" || i >= len(specs) {
			continue
		}
		spec, _ := specs[i].(map[string]any)
		agent, _ := spec["agent"].(string)
		prompt, _ := spec["prompt"].(string)
		thread, _ := rm["thread_id"].(string)
		t := &taskRef{caller: c.agent, agent: agent, prompt: prompt, notify: notify,
			thread: id.EventID(thread), session: c.res.SessionID, origin: origin}
		if origin != nil {
			t.room = origin.room
		}
		tw.tasks = append(tw.tasks, t)
	}
}

// task finds the task whose prompt contains s.
func (w *world) task(s string) (*taskRef, error) {
	w.syncTasks()
	var found []*taskRef
	for _, t := range w.tw().tasks {
		if strings.Contains(t.prompt, s) {
			found = append(found, t)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return nil, fmt.Errorf("no task started so far has a prompt containing %q; tasks: %v", s, w.tw().tasks)
	default:
		return nil, fmt.Errorf("%d tasks have a prompt containing %q; be more specific: %v", len(found), s, found)
	}
}

// taskRoom finds the room of a task's thread (where its caller delegated),
// and makes the root a post of the harness so thread steps can name it.
func (w *world) taskRoom(ctx context.Context, t *taskRef) (*room, error) {
	if t.room == nil {
		for _, rn := range w.roomSeq {
			r := w.rooms[rn]
			if !r.created {
				continue
			}
			if _, err := w.humans[w.humanSeq[0]].cli.GetEvent(ctx, r.id, t.thread); err == nil {
				t.room = r
				break
			}
		}
		if t.room == nil {
			return nil, fmt.Errorf("the root of %s is in no room of the scenario", t)
		}
	}
	for _, p := range w.posts {
		if p.id == t.thread {
			return t.room, nil
		}
	}
	w.posts = append(w.posts, &post{room: t.room, id: t.thread, sender: t.caller, text: t.prompt, core: t.prompt, root: t.thread})
	return t.room, nil
}

// rawMsg is one event read back with its whole content.
type rawMsg struct {
	ev      *event.Event
	thread  id.EventID // m.thread root; empty when top-level
	content map[string]any
}

// readRaw reads a room's newest events of any message type through the
// client-server API as the first human, oldest first.
func (w *world) readRaw(ctx context.Context, r *room) ([]rawMsg, error) {
	var out []rawMsg
	err := w.pageBack(ctx, r, 5, func(ev *event.Event) {
		if ev.StateKey != nil {
			return
		}
		m := rawMsg{ev: ev, content: ev.Content.Raw}
		if m.content == nil {
			_ = json.Unmarshal(ev.Content.VeryRaw, &m.content)
		}
		m.thread = zevent.ThreadRoot(ev)
		out = append(out, m)
	})
	if err != nil {
		return nil, err
	}
	slices.Reverse(out)
	return out, nil
}

// threadResults are the dev.zooid.thread_result events of a room, in timeline order.
func threadResults(msgs []rawMsg) []rawMsg {
	var out []rawMsg
	for _, m := range msgs {
		if m.ev.Type.Type == zevent.EventThreadResult.Type {
			out = append(out, m)
		}
	}
	return out
}

// daemonProcArg (with fakeagent.ExecEnv set to it) makes this executable run the daemon
// instead of its usual job, so a scenario can kill it with SIGKILL.
const daemonProcArg = "zooid-daemon"

// daemonProcConfig is what the parent hands the daemon process.
type daemonProcConfig struct {
	ConfigPath    string // a zooid.yaml whose tokens come from the process's environment
	BridgeCommand []string
	TurnTimeout   time.Duration
	// PushFD is the descriptor, inherited from the parent, of the bound
	// appservice push socket (the lease's); the parent keeps its own copy, so
	// the port stays bound across a killed and restarted daemon.
	PushFD int
}

// pushFD is the push socket's descriptor in the daemon process: the first
// of cmd.ExtraFiles.
const pushFD = 3

func init() {
	// Like fakeagent.ExecIfRequested: a test binary (or zooid sim) started with
	// this argument and environment is the daemon, not the harness.
	if len(os.Args) > 2 && os.Args[1] == daemonProcArg && os.Getenv(fakeagent.ExecEnv) == daemonProcArg {
		os.Exit(daemonProcessMain(os.Args[2]))
	}
}

// daemonProcessMain runs the daemon of a scenario as its own process: the
// config comes as JSON from the parent, "ready" on stdout says it started.
func daemonProcessMain(path string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	raw, err := os.ReadFile(path)
	if err != nil {
		log.Error("reading daemon config", "err", err)
		return 1
	}
	var pc daemonProcConfig
	if err := json.Unmarshal(raw, &pc); err != nil {
		log.Error("decoding daemon config", "err", err)
		return 1
	}
	cfg, err := config.Load(pc.ConfigPath)
	if err != nil {
		log.Error("loading zooid.yaml", "err", err)
		return 1
	}
	opts := daemon.Options{Config: cfg, Logger: log, BridgeCommand: pc.BridgeCommand, TurnTimeout: pc.TurnTimeout}
	if pc.PushFD != 0 {
		f := os.NewFile(uintptr(pc.PushFD), "appservice push socket")
		ln, err := net.FileListener(f)
		_ = f.Close()
		if err != nil {
			log.Error("inheriting the push socket", "fd", pc.PushFD, "err", err)
			return 1
		}
		opts.PushListener = ln
	}
	d, err := daemon.New(opts)
	if err != nil {
		log.Error("configuring daemon", "err", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := d.Start(ctx); err != nil {
		log.Error("starting daemon", "err", err)
		return 1
	}
	fmt.Println("ready")
	<-ctx.Done()
	if err := d.Close(); err != nil {
		log.Error("closing daemon", "err", err)
		return 1
	}
	return 0
}

// procTurnTimeout is the daemon process's turn timeout: long, so an agent
// that hangs is still hanging when the scenario kills the daemon.
const procTurnTimeout = 60 * time.Second

// daemonProc is the scenario's daemon running as a child process.
type daemonProc struct {
	cfgPath string
	logPath string
	env     map[string]string // the tokens zooid.yaml reads from the environment
	cmd     *exec.Cmd
	done    chan struct{}
	runs    int
}

// startAsProcess materialises the scenario like start, but runs the daemon
// as a child process of this executable so it can be killed outright.
func (w *world) startAsProcess(ctx context.Context) error {
	if w.started {
		return errors.New("the daemon already runs in-process; say \"the daemon runs as its own process\" before the first action")
	}
	if len(w.humanSeq) == 0 {
		return errors.New("the scenario has no human users; start with: the homeserver has users \"ori\" and \"mia\"")
	}
	for _, rn := range w.roomSeq {
		if err := w.createRoom(ctx, w.rooms[rn]); err != nil {
			return err
		}
	}
	if err := w.handOverPushes(ctx); err != nil {
		return err
	}
	exe, err := w.prepareAgents()
	if err != nil {
		return err
	}
	cfgPath, env, err := w.writeConfig(exe)
	if err != nil {
		return err
	}
	pc := daemonProcConfig{ConfigPath: cfgPath, BridgeCommand: []string{exe, "mcp"}, TurnTimeout: procTurnTimeout, PushFD: pushFD}
	raw, err := json.Marshal(pc)
	if err != nil {
		return fmt.Errorf("encoding the daemon config: %w", err)
	}
	p := &daemonProc{cfgPath: filepath.Join(w.dir, "daemon.json"), logPath: filepath.Join(w.dir, "daemon.log"), env: env}
	if err := os.WriteFile(p.cfgPath, raw, 0o600); err != nil {
		return fmt.Errorf("writing the daemon config: %w", err)
	}
	w.tw().proc = p
	w.closers = append(w.closers, func() error { return w.stopProcess(syscall.SIGTERM) })
	// The daemon itself is this executable's zooid-daemon command.
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this executable: %w", err)
	}
	if err := w.spawnDaemon(ctx, self); err != nil {
		return err
	}
	w.started = true
	return nil
}

// spawnDaemon starts the daemon process and waits until it says it is ready.
func (w *world) spawnDaemon(ctx context.Context, exe string) error {
	p := w.tw().proc
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("daemon log: %w", err)
	}
	p.runs++
	fmt.Fprintf(logf, "=== daemon run %d\n", p.runs)
	cmd := exec.Command(exe, daemonProcArg, p.cfgPath)
	// Every run can be armed to die at a fault point by writing the point's
	// name into this file (see stepArmFaultPoint); the daemon removes it as it
	// dies there, so the next run is not killed again.
	cmd.Env = append(os.Environ(), fakeagent.ExecEnv+"="+daemonProcArg, faultpoint.Env+"="+w.killFile())
	for k, v := range p.env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = logf
	cmd.SysProcAttr = childproc.SysProcAttr()
	cmd.ExtraFiles = []*os.File{w.lease.push.file} // pushFD in the child
	ready := &readyWriter{ch: make(chan struct{})}
	cmd.Stdout = ready
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("starting the daemon process: %w", err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	wctx, cancel := w.waitCtx(ctx)
	defer cancel()
	select {
	case <-ready.ch:
		return nil
	case <-p.done:
		return fmt.Errorf("the daemon process exited during start-up: %s", w.daemonLogTail())
	case <-wctx.Done():
		return fmt.Errorf("the daemon process was not ready within %s: %s", w.run.wait, w.daemonLogTail())
	}
}

// readyWriter is the daemon process's stdout: it closes ch once "ready" is written.
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

// stopProcess signals the daemon's process group and waits for it; a
// process that ignores SIGTERM for 10s is killed.
func (w *world) stopProcess(sig syscall.Signal) error {
	p := w.tw().proc
	if p == nil || p.cmd == nil {
		return nil
	}
	select {
	case <-p.done:
		return nil
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, sig)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		return fmt.Errorf("the daemon process ignored %s for 10s and was killed", sig)
	}
	return nil
}

// daemonLogTail is the end of the daemon process's log, for failures.
func (w *world) daemonLogTail() string {
	p := w.tw().proc
	if p == nil {
		return "(no daemon process)"
	}
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no daemon log: %v)", err)
	}
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return "daemon log tail:\n" + string(b)
}
