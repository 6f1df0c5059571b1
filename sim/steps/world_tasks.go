package steps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/internal/faultpoint"
	"github.com/zooid-dev/zooid/sim/dut"
	"github.com/zooid-dev/zooid/zooid/zevent"
)

// taskWorld is what the task steps remember of a scenario beyond the shared
// world: the tasks its agents started, the tool results adopted from scripted
// turns, and the daemon's process when it runs as one.
type taskWorld struct {
	tasks   []*taskRef
	seen    map[*call]bool
	adopted map[string]int // agent+tool → results of scripted turns adopted so far
	proc    *dut.Child
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
	return fmt.Sprintf("%s's task for %s %q (thread %s)", t.caller, t.agent, t.prompt, string(t.thread))
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

func init() {
	// A test binary (or zooid-sim) spawned as the daemon under test runs the
	// daemon, not the harness (dut.Child).
	dut.MainIfChild()
}

// procTurnTimeout is the daemon process's turn timeout: long, so an agent
// that hangs is still hanging when the scenario kills the daemon.
const procTurnTimeout = 60 * time.Second

// startAsProcess materialises the scenario like start, but runs the daemon
// as a child process of this executable so it can be killed outright.
func (w *world) startAsProcess(ctx context.Context) error {
	if w.started {
		return errors.New("the daemon already runs in-process; say \"the daemon runs as its own process\" before the first action")
	}
	if len(w.humanSeq) == 0 {
		return errors.New("the scenario has no human users; start with: the homeserver has users \"ori\" and \"mia\"")
	}
	if err := w.createRooms(ctx); err != nil {
		return err
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
	envList := make([]string, 0, len(env))
	for k, v := range env {
		envList = append(envList, k+"="+v)
	}
	p, err := dut.NewChild(dut.ChildOptions{
		Options:    dut.Options{Bridge: []string{exe, "mcp"}, TurnTimeout: procTurnTimeout},
		ConfigPath: cfgPath, Env: envList, Dir: w.dir, Push: w.lease.push.File,
	})
	if err != nil {
		return err
	}
	w.tw().proc = p
	w.closers = append(w.closers, func() error { return p.Stop(syscall.SIGTERM) })
	if err := w.spawnDaemon(ctx); err != nil {
		return err
	}
	if err := w.startPeerDaemon(ctx); err != nil {
		return err
	}
	w.started = true
	return nil
}

// spawnDaemon starts the daemon process (again) and waits until it says it
// is ready. Every run can be armed to die at a fault point by writing the
// point's name into the kill file (see stepArmFaultPoint); the daemon
// removes it as it dies there, so the next run is not killed again.
func (w *world) spawnDaemon(ctx context.Context) error {
	wctx, cancel := w.waitCtx(ctx)
	defer cancel()
	return w.tw().proc.Spawn(wctx, faultpoint.Env+"="+w.killFile())
}

// daemonLogTail is the end of the daemon process's log, for failures.
func (w *world) daemonLogTail() string {
	if p := w.tw().proc; p != nil {
		return p.LogTail()
	}
	return "(no daemon process)"
}

// childLogTail is the end of the daemon process's log, every run of it,
// kept as a scenario's own log is (logTail: its last logTailLines lines,
// each bounded), under a header; "" when the daemon runs in-process (its
// log is in the scenario's tail).
func (w *world) childLogTail() string {
	p := w.tw().proc
	if p == nil {
		return ""
	}
	b, err := os.ReadFile(p.LogPath())
	if err != nil {
		return fmt.Sprintf("--- the daemon process's log: %v\n", err)
	}
	t := newLogTail()
	_, _ = t.Write(b)
	lines, kept, total := t.kept()
	return fmt.Sprintf("--- the daemon process's log (%s): its last %d of %d lines\n%s--- end of the daemon process's log\n",
		p.LogPath(), kept, total, lines)
}

// resultOf waits for the task's dev.zooid.thread_result events.
func (w *world) resultOf(ctx context.Context, t *taskRef) ([]rawMsg, error) {
	r, err := w.taskRoom(ctx, t)
	if err != nil {
		return nil, err
	}
	var found []rawMsg
	err = w.eventually(ctx, fmt.Sprintf("the result of %s", t), func() (bool, string, error) {
		msgs, err := w.readRaw(ctx, r)
		if err != nil {
			return false, "", err
		}
		found = found[:0]
		var seen []string
		for _, m := range threadResults(msgs) {
			seen = append(seen, mustJSON(m.content))
			if m.thread == t.thread {
				found = append(found, m)
			}
		}
		return len(found) > 0, fmt.Sprintf("results in %s: %v", r.name, seen), nil
	})
	return found, err
}

// resultNotices are the messages of msgs carrying t's result in their content.
func resultNotices(msgs []rawMsg, t *taskRef) []rawMsg {
	var out []rawMsg
	for _, m := range msgs {
		if m.ev.Type.Type != "m.room.message" {
			continue
		}
		r, ok := m.content[zevent.KeyThreadResult].(map[string]any)
		if ok && r["thread_id"] == string(t.thread) {
			out = append(out, m)
		}
	}
	return out
}
