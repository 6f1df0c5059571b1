package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/tools"
)

const (
	roomA = id.RoomID("!a:hs")
	roomB = id.RoomID("!b:hs")
)

// sent is one recorded Send call.
type sent struct {
	As      id.UserID
	Room    id.RoomID
	Type    event.Type
	Content map[string]any
	Txn     string
	EventID id.EventID
	Err     error
}

// fakeHS records sends and, like a homeserver, answers a repeated txn id (per user)
// with the event id it gave the first time.
type fakeHS struct {
	mu    sync.Mutex
	calls []sent
	txns  map[string]id.EventID
	n     int
	// prefix starts event ids ("$ev" by default); processes sharing a journal differ.
	prefix string
	// fail, when set, decides whether a call fails (before it lands).
	fail func(s sent, nthForTxn int) error
	// hook runs before the call is answered (outside the lock).
	hook func(s sent)
}

func newFakeHS() *fakeHS { return &fakeHS{txns: map[string]id.EventID{}} }

func (f *fakeHS) Send(ctx context.Context, as id.UserID, room id.RoomID, typ event.Type, content any, txn string) (id.EventID, error) {
	raw, err := json.Marshal(content)
	if err != nil {
		return "", fmt.Errorf("marshal: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", fmt.Errorf("unmarshal: %w", err)
	}
	s := sent{As: as, Room: room, Type: typ, Content: m, Txn: txn}
	f.mu.Lock()
	hook := f.hook
	f.mu.Unlock()
	if hook != nil {
		hook(s)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	nth := 0
	for _, c := range f.calls {
		if c.Txn == txn && c.As == as {
			nth++
		}
	}
	if f.fail != nil {
		if err := f.fail(s, nth); err != nil {
			s.Err = err
			f.calls = append(f.calls, s)
			return "", err
		}
	}
	if err := ctx.Err(); err != nil {
		s.Err = err
		f.calls = append(f.calls, s)
		return "", err
	}
	key := string(as) + "|" + txn
	evID, ok := f.txns[key]
	if !ok {
		f.n++
		p := f.prefix
		if p == "" {
			p = "$ev"
		}
		evID = id.EventID(fmt.Sprintf("%s%d", p, f.n))
		f.txns[key] = evID
	}
	s.EventID = evID
	f.calls = append(f.calls, s)
	return evID, nil
}

// ok returns the successful calls of type typ.
func (f *fakeHS) ok(typ string) []sent {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []sent
	for _, c := range f.calls {
		if c.Err == nil && c.Type.Type == typ {
			out = append(out, c)
		}
	}
	return out
}

func (f *fakeHS) setHook(h func(s sent)) {
	f.mu.Lock()
	f.hook = h
	f.mu.Unlock()
}

func (f *fakeHS) setFail(fail func(s sent, nth int) error) {
	f.mu.Lock()
	f.fail = fail
	f.mu.Unlock()
}

func (f *fakeHS) all() []sent {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sent(nil), f.calls...)
}

// notices returns successful m.room.message calls with msgtype m.notice.
func (f *fakeHS) notices() []sent {
	var out []sent
	for _, c := range f.ok("m.room.message") {
		if c.Content["msgtype"] == "m.notice" {
			out = append(out, c)
		}
	}
	return out
}

type wake struct {
	Parent Parent
	Text   string
}

type env struct {
	t     *testing.T
	dir   string
	hs    *fakeHS
	mu    sync.Mutex
	wakes []wake
	m     *Manager

	holdWakes bool     // the caller is mid-turn: wakes wait in its queue
	held      []func() // their delivered callbacks, in order

	now     func() time.Time // the managers' clock; nil: time.Now
	timeout time.Duration    // the managers' Options.Timeout; zero: the default

	workstation string // the managers' Options.Workstation
	// other answers the managers' Options.OtherAgent; nil: none.
	other func(room id.RoomID, addr string) (id.UserID, string, bool)
}

var agents = map[string]struct {
	user  id.UserID
	rooms []id.RoomID
}{
	"alice": {"@alice:hs", []id.RoomID{roomA, roomB}},
	"bob":   {"@bob:hs", []id.RoomID{roomA, roomB}},
	"carol": {"@carol:hs", []id.RoomID{roomA}},
	"dave":  {"@dave:hs", []id.RoomID{roomB}},
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), hs: newFakeHS()}
	e.open()
	return e
}

func (e *env) options() Options {
	return Options{
		StateDir: e.dir,
		Send:     e.hs.Send,
		Agents: func(name string) (id.UserID, []id.RoomID, bool) {
			a, ok := agents[name]
			return a.user, a.rooms, ok
		},
		Wake: func(p Parent, text string, delivered func()) {
			e.mu.Lock()
			e.wakes = append(e.wakes, wake{p, text})
			hold := e.holdWakes
			if hold {
				e.held = append(e.held, delivered)
			}
			e.mu.Unlock()
			if !hold {
				delivered() // the caller was idle: the turn starts at once
			}
		},
		Logger:      testLogger(),
		PostTimeout: 5 * time.Second,
		Now:         e.now,
		Timeout:     e.timeout,
		Workstation: e.workstation,
		OtherAgent:  e.other,
	}
}

func testLogger() *slog.Logger {
	if os.Getenv("ZOOID_TASKS_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func (e *env) open() {
	e.t.Helper()
	m, err := Open(e.options())
	if err != nil {
		e.t.Fatalf("Open: %v", err)
	}
	e.m = m
	e.t.Cleanup(func() { _ = m.Close() })
}

// reopen simulates a restart: the manager is closed without Recover and a new one
// opens the same journal.
func (e *env) reopen() {
	e.t.Helper()
	if err := e.m.Close(); err != nil {
		e.t.Fatalf("Close: %v", err)
	}
	e.open()
}

func (e *env) wakesCopy() []wake {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]wake(nil), e.wakes...)
}

func caller(agent string, room id.RoomID, thread id.EventID) tools.Caller {
	return tools.Caller{
		Agent:      agent,
		UserID:     agents[agent].user,
		Transport:  "matrix",
		Room:       room,
		Thread:     thread,
		Kind:       tools.Conversation,
		SessionKey: agent + "|" + string(thread),
	}
}

func assignee(t Task) tools.Caller {
	return tools.Caller{
		Agent: t.Agent, UserID: t.AgentUser, Transport: "matrix", Room: t.Room,
		Thread: t.ThreadID, Kind: tools.TaskAssignee, SessionKey: t.Agent + "|" + string(t.ThreadID),
	}
}

func specs(names ...string) []tools.TaskSpec {
	out := make([]tools.TaskSpec, len(names))
	for i, n := range names {
		out[i] = tools.TaskSpec{Agent: n, Prompt: "please do thing " + fmt.Sprint(i)}
	}
	return out
}

func (e *env) start(c tools.Caller, notify string, names ...string) tools.StartResult {
	e.t.Helper()
	res, err := e.m.Start(context.Background(), c, tools.StartRequest{Tasks: specs(names...), Notify: notify})
	if err != nil {
		e.t.Fatalf("Start: %v", err)
	}
	if len(res.Results) != len(names) {
		e.t.Fatalf("Start returned %d results for %d tasks", len(res.Results), len(names))
	}
	return res
}

// startOne starts one task and returns it.
func (e *env) startOne(c tools.Caller, notify, agent string) Task {
	e.t.Helper()
	res := e.start(c, notify, agent)
	r := res.Results[0]
	if r.Status != tools.TaskStarted {
		e.t.Fatalf("task for %s: %+v, want started", agent, r)
	}
	task, ok := e.m.TaskByThread(c.Room, r.ThreadID)
	if !ok {
		e.t.Fatalf("TaskByThread(%s) not found after start", r.ThreadID)
	}
	return task
}

func statuses(res tools.StartResult) []string {
	out := make([]string, len(res.Results))
	for i, r := range res.Results {
		out[i] = r.Status + ":" + r.Reason
	}
	return out
}

func field(m map[string]any, path ...string) any {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[p]
	}
	return cur
}
