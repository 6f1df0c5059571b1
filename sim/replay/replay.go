// Package replay plays a recording that carries the daemon's trace through
// today's daemon and says whether it does what the trace says (`zooid replay`).
//
// Run starts a fake homeserver and the daemon in-process, with the recorded
// agents configured (their rooms and trigger) and tracing on. The agents are
// the scripted agent (fakeagent), and each prompt they get is answered
// with the turn the trace recorded for it: the prose the agent posted and the
// tool calls it made, in order, with the recorded ids mapped to the ids of
// this run. The recorded room's events are pushed in recorded order as their
// senders; the agents' own posts are not pushed, the daemon makes them again.
// Before each push (and each recorded daemon restart) Run waits on a barrier:
// until the new run's trace holds at least as many records of each kind as
// the recorded trace held at that point. Then it compares the two traces with
// trace.Compare.
//
// The package links no test framework (no godog, no containers), so the
// daemon binary's commands can call it.
package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/zooid-dev/zooid/internal/randid"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/appservice"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/fakeagent"
	"github.com/zooid-dev/zooid/fakehs"
	"github.com/zooid-dev/zooid/internal/pushdrain"
	"github.com/zooid-dev/zooid/sim/dut"
	"github.com/zooid-dev/zooid/sim/standin"
	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/recording"
	"github.com/zooid-dev/zooid/zooid/trace"
)

// DefaultWait bounds each barrier: how long Run waits for the new run to
// catch up with the recorded trace before it pushes the next event anyway
// (a run that diverges never catches up; the diff then says how).
const DefaultWait = 10 * time.Second

// Options configure Run. The zero value works in a binary that serves the
// "fake-agent" and "mcp" subcommands (zooid, zooid-sim) and in a test binary,
// whose children run as the stand-in sim/standin builds.
type Options struct {
	// AgentCommand is the argv prefix of the scripted agent; the
	// controller's arguments ("fake-agent --control … --agent NAME") are
	// appended. Default: standin.Path (this executable outside a test).
	AgentCommand []string
	// AgentEnv is added to the agents' environment.
	AgentEnv map[string]string
	// BridgeCommand is the daemon's MCP bridge argv prefix. Default:
	// standin.Path with "mcp".
	BridgeCommand []string
	// Wait bounds each barrier (DefaultWait when zero).
	Wait time.Duration
	// Quiet, when set, ends a barrier early: once nothing is in flight in
	// the daemon (no turn open, no woken session unprompted, no task
	// unreported, no event it was sent or post it made that its trace has
	// not yet seen) and its trace has not grown for Quiet, the records the
	// barrier waits for will not come. Shrink sets it: a candidate that
	// drops what the trace waits for then fails in Quiet, not in Wait.
	Quiet time.Duration
	// TurnTimeout bounds an agent turn in the daemon (the daemon's default
	// when zero).
	TurnTimeout time.Duration
	// Dir, when set, is where the run's state and new trace are kept
	// (Dir/trace); otherwise a temporary directory is used and removed.
	Dir string
	// Logger receives the homeserver's, the daemon's and the replay's logs;
	// nil discards them.
	Logger *slog.Logger
}

// Result is what one replay found.
type Result struct {
	// Want is the recorded trace of the played room and Got this run's, both
	// as compared: one room, state events (joins, room creation) left out.
	Want, Got *trace.Trace
	// Diff is trace.Compare(Want, Got); empty when the daemon reproduced
	// the recording.
	Diff trace.Diff
	// Stalls name the barriers that timed out (what the run was still
	// waiting for when it went on) and events that could not be sent; they
	// explain a Diff, they are not one.
	Stalls []string
	// Pushed is the number of recorded events sent into the daemon, Seeded
	// the number sent as history before it started.
	Pushed, Seeded int
	// LongestWait is the longest a barrier waited before the run caught up
	// (barriers that stalled not counted): how far the daemon lags the
	// replay, which bounds how long shrink's candidates wait on a quiet one.
	LongestWait time.Duration
}

// Reproduced says whether the daemon did what the trace recorded.
func (r *Result) Reproduced() bool { return len(r.Diff) == 0 }

// ErrNoTrace is returned for a recording without a trace.
var ErrNoTrace = errors.New("the recording carries no trace (record it with `zooid record --trace DIR`)")

// Run replays rec through a fresh daemon on a fresh fake homeserver and
// compares what the daemon did with rec's trace. An error means the replay
// could not run (bad recording, a part failed to start); a divergence is
// not an error but a non-empty Result.Diff.
func Run(ctx context.Context, rec *recording.Recording, opts Options) (*Result, error) {
	want, err := RecordedTrace(rec)
	if err != nil {
		return nil, err
	}
	p, err := newPlan(rec, want)
	if err != nil {
		return nil, err
	}
	r := &runner{rec: rec, plan: p, opts: opts, log: opts.Logger}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.opts.Wait <= 0 {
		r.opts.Wait = DefaultWait
	}
	defer r.close()
	if err := r.setUp(ctx); err != nil {
		return nil, err
	}
	if err := r.play(ctx); err != nil {
		return nil, err
	}
	return r.finish()
}

// RecordedTrace is the trace a recording carries, as one room: the played
// room's records in order, state events left out.
func RecordedTrace(rec *recording.Recording) (*trace.Trace, error) {
	if len(rec.Trace) == 0 {
		return nil, fmt.Errorf("%s: %w", rec.Path, ErrNoTrace)
	}
	byRoom := map[id.RoomID][]trace.Record{}
	var order []id.RoomID
	// where names trace entry i by its line in the file when the recording
	// was read from one, so a maintainer can go straight to it.
	where := func(i int) string {
		if i < len(rec.TraceLines) {
			return fmt.Sprintf("%s:%d: trace line %d", rec.Path, rec.TraceLines[i], i+1)
		}
		return fmt.Sprintf("%s: trace line %d", rec.Path, i+1)
	}
	for i, line := range rec.Trace {
		var probe struct {
			Format  string `json:"format"`
			Version int    `json:"version"`
		}
		if err := json.Unmarshal(line, &probe); err != nil {
			return nil, fmt.Errorf("%s: %w", where(i), err)
		}
		if probe.Format != "" {
			if probe.Format != trace.FormatName {
				return nil, fmt.Errorf("%s: a header of format %q, not %q", where(i), probe.Format, trace.FormatName)
			}
			if probe.Version > trace.Version || probe.Version < 1 {
				return nil, fmt.Errorf("%s: trace format version %d; this zooid reads version %d and older", where(i), probe.Version, trace.Version)
			}
			continue
		}
		var r trace.Record
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("%s: %w", where(i), err)
		}
		if err := r.Check(); err != nil {
			return nil, fmt.Errorf("%s: %w", where(i), err)
		}
		if _, ok := byRoom[r.Room]; !ok {
			order = append(order, r.Room)
		}
		byRoom[r.Room] = append(byRoom[r.Room], r)
	}
	if len(order) == 0 {
		return nil, fmt.Errorf("%s: %w", rec.Path, ErrNoTrace)
	}
	// The recorder keeps the recorded room's lines; if there are more rooms,
	// the one with the most events is the room.
	best, bestN := order[0], -1
	for _, room := range order {
		n := 0
		for _, r := range byRoom[room] {
			if r.Kind == trace.KindEvent {
				n++
			}
		}
		if n > bestN {
			best, bestN = room, n
		}
	}
	recs := byRoom[best]
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].Seq < recs[j].Seq })
	room := trace.Room{ID: best, Records: keep(recs)}
	for _, r := range recs {
		if r.Start != nil && r.Start.Alias != "" {
			room.Alias = r.Start.Alias
		}
	}
	return &trace.Trace{Rooms: []trace.Room{room}}, nil
}

// keep drops what a replay cannot reproduce and should not compare: state
// events (room creation, joins), which the replay sets up before the daemon
// runs and the recorded room may have had at other times; and second records
// of one Matrix event (see once).
func keep(recs []trace.Record) []trace.Record {
	out := make([]trace.Record, 0, len(recs))
	var o once
	for _, r := range recs {
		if r.Event != nil && isState(r.Event.Type) {
			continue
		}
		if o.again(r) {
			continue
		}
		out = append(out, r)
	}
	return out
}

// once tells a record that names a Matrix event the trace already holds a
// record of the same kind for. Only a crash writes those: an event the daemon
// routed but had not yet marked handled in its inbox is routed again at the
// next start, and a post the journal had not yet recorded is sent again with
// the same txn id (the homeserver answers with the same event, so the room
// holds it once). The room saw one event, and a replay, whose restarts are
// clean stops, writes one record: the second is no behaviour to compare.
type once struct{ events, posts map[string]bool }

func (o *once) again(r trace.Record) bool {
	var seen *map[string]bool
	var id string
	switch {
	case r.Event != nil:
		seen, id = &o.events, string(r.Event.ID)
	case r.Post != nil:
		seen, id = &o.posts, string(r.Post.ID)
	}
	if id == "" {
		return false
	}
	if *seen == nil {
		*seen = map[string]bool{}
	}
	if (*seen)[id] {
		return true
	}
	(*seen)[id] = true
	return false
}

func isState(typ string) bool {
	switch typ {
	case "m.room.message", "m.room.encrypted", "m.room.redaction":
		return false
	}
	return strings.HasPrefix(typ, "m.room.") || strings.HasPrefix(typ, "m.space.")
}

// runner is one replay's parts and progress.
type runner struct {
	rec  *recording.Recording
	plan *plan
	opts Options
	log  *slog.Logger

	dir, runDir string
	rmDir       bool
	hs          *fakehs.Server
	reg         *appservice.Registration
	push        *pushdrain.Socket
	ctl         *fakeagent.Controller
	exe         string
	d           *dut.InProcess
	room        id.RoomID // the played room on this run's server
	script      *Script
	users       map[id.UserID]*mautrix.Client // the recording's members, as they post

	mu      sync.Mutex
	changed chan struct{}
	counts  map[trace.Kind]int
	stalls  []string
	// stopping is set while a replayed restart stops the daemon; what it
	// writes then about turns (the prompts and turn ends of turns it
	// cancels, agents it stops) the recorded daemon, killed, never wrote,
	// and is left out of the comparison. Routing is not: an event routed
	// while the daemon stops is one the recorded daemon routed too, only
	// after its restart, when the homeserver pushed it again.
	stopping bool
	seen     once
	restarts int
	cut      []cutRecord
	pushed   int
	seeded   int
	longest  time.Duration
	flight   inFlight
}

func (r *runner) close() {
	if r.d != nil {
		_ = r.d.Close()
		r.d = nil
	}
	if r.ctl != nil {
		_ = r.ctl.Close()
	}
	if r.hs != nil {
		_ = r.hs.Close()
	}
	if r.push != nil {
		_ = r.push.Close()
	}
	if r.runDir != "" {
		_ = os.RemoveAll(r.runDir)
	}
	if r.rmDir && r.dir != "" {
		_ = os.RemoveAll(r.dir)
	}
}

// setUp starts the homeserver, creates the users and rooms, sends the
// history that predates the trace, and starts the agents' controller and the
// daemon.
func (r *runner) setUp(ctx context.Context) error {
	p := r.plan
	r.dir = r.opts.Dir
	if r.dir == "" {
		d, err := os.MkdirTemp("", "zooid-replay-")
		if err != nil {
			return fmt.Errorf("replay dir: %w", err)
		}
		r.dir, r.rmDir = d, true
	} else if err := os.MkdirAll(r.dir, 0o700); err != nil {
		return fmt.Errorf("replay dir: %w", err)
	}
	// The daemon's MCP sockets live in the run dir: unix socket paths are short.
	rd, err := os.MkdirTemp("/tmp", "zr")
	if err != nil {
		return fmt.Errorf("replay run dir: %w", err)
	}
	r.runDir = rd
	r.changed = make(chan struct{})
	r.counts = map[trace.Kind]int{}
	// Users keep their recorded ids in a replay.
	r.script = newScript(p, len(r.rec.Events), func(n string) id.UserID { return p.user[n] })
	r.users = map[id.UserID]*mautrix.Client{}

	push, err := pushdrain.Bind("127.0.0.1:0")
	if err != nil {
		return err
	}
	r.push = push
	var agentRE []string
	for _, a := range p.agents {
		agentRE = append(agentRE, regexp.QuoteMeta(string(p.user[a])))
	}
	notLimited := false
	r.reg = &appservice.Registration{
		ID: "zooid-replay", URL: "http://" + push.Addr,
		AppToken: "as-" + randid.Hex(16), ServerToken: "hs-" + randid.Hex(16),
		SenderLocalpart: "zooid-replay", RateLimited: &notLimited,
		Namespaces: appservice.Namespaces{UserIDs: appservice.NamespaceList{{Regex: "^(" + strings.Join(agentRE, "|") + ")$", Exclusive: true}}},
	}
	if len(agentRE) == 0 {
		return fmt.Errorf("%s: the recording names no agent (members with role agent)", r.rec.Path)
	}
	hs, err := fakehs.Start(fakehs.WithServerName(p.server), fakehs.WithAppservice(r.reg),
		fakehs.WithLogger(r.log.With("component", "fakehs")), fakehs.WithPushBackoff(20*time.Millisecond, 500*time.Millisecond))
	if err != nil {
		return fmt.Errorf("starting the fake homeserver: %w", err)
	}
	r.hs = hs
	drain, err := startDrain(push)
	if err != nil {
		return err
	}
	defer drain.stop()

	for _, m := range r.rec.Members {
		uid := p.user[m]
		_, tok, err := hs.RegisterUser(uid.Localpart(), m)
		if err != nil {
			return fmt.Errorf("registering %s: %w", m, err)
		}
		if r.users[uid], err = mautrix.NewClient(hs.URL(), uid, tok); err != nil {
			return fmt.Errorf("a client for %s: %w", m, err)
		}
	}
	creator := p.user[r.rec.Members[0]]
	for _, m := range r.rec.Members {
		if _, agent := r.rec.Agents[m]; !agent {
			creator = p.user[m]
			break
		}
	}
	rooms := map[string]id.RoomID{}
	for _, alias := range p.rooms {
		localpart, _, _ := strings.Cut(strings.TrimPrefix(alias, "#"), ":")
		created, err := r.users[creator].CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "public_chat", RoomAliasName: localpart, Name: r.rec.Name})
		if err != nil {
			return fmt.Errorf("creating %s: %w", alias, err)
		}
		rid := created.RoomID
		rooms[alias] = rid
		for _, m := range r.rec.Members {
			u := p.user[m]
			if u == creator {
				continue
			}
			if _, agent := r.rec.Agents[m]; agent && !slicesContains(p.agentRooms[m], alias) {
				continue
			}
			if _, err := r.users[u].JoinRoomByID(ctx, rid); err != nil {
				return fmt.Errorf("%s joining %s: %w", m, alias, err)
			}
		}
	}
	r.room = rooms[p.alias]
	for _, i := range p.seed {
		if err := r.send(ctx, i); err != nil {
			return err
		}
		r.seeded++
	}
	// Everything so far was pushed to the drain, not the daemon: wait until
	// the last event of each room went there, so the daemon starts on a
	// quiet push queue.
	var last []id.EventID
	for _, rid := range rooms {
		if evs := hs.Events(rid); len(evs) > 0 {
			last = append(last, evs[len(evs)-1].ID)
		}
	}
	if err := drain.waitFor(ctx, last, r.opts.Wait*3); err != nil {
		return err
	}
	drain.stop()

	ctl, err := fakeagent.StartController("")
	if err != nil {
		return fmt.Errorf("starting the scripted agents' controller: %w", err)
	}
	r.ctl = ctl
	ctl.Respond(r.script.Respond)
	exe, err := standin.Path()
	if err != nil {
		return fmt.Errorf("the program the replayed agents run as: %w", err)
	}
	r.exe = exe
	return r.startDaemon(ctx)
}

// config is the zooid.yaml of the replay: the recorded agents as scripted
// agents on this run's homeserver, tracing into dir/trace.
func (r *runner) config() *config.Config {
	p := r.plan
	cfg := &config.Config{
		Transports: []config.Transport{{
			Name: "matrix", Type: config.TypeMatrix,
			Matrix: &config.MatrixTransport{
				Homeserver: r.hs.URL(), ServerName: p.server,
				ASToken: r.reg.AppToken, HSToken: r.reg.ServerToken,
				Listen: r.push.Addr, ID: r.reg.ID, SenderLocalpart: r.reg.SenderLocalpart,
			},
		}},
		StateDir: filepath.Join(r.dir, "state"),
		RunDir:   r.runDir,
		Trace:    &config.Trace{Dir: filepath.Join(r.dir, "trace")},
	}
	agentCmd := r.opts.AgentCommand
	if len(agentCmd) == 0 {
		agentCmd = []string{r.exe}
	}
	for _, a := range p.agents {
		var rooms []config.RoomRef
		for _, alias := range p.agentRooms[a] {
			rooms = append(rooms, config.RoomRef(alias))
		}
		args := append(append([]string(nil), agentCmd[1:]...), r.ctl.Args(a)...)
		cfg.Agents = append(cfg.Agents, config.Agent{
			Name: a,
			ACP:  config.ACP{Command: agentCmd[0], Args: args, Env: r.opts.AgentEnv},
			Dir:  filepath.Join(r.dir, "agents", a),
			Matrix: &config.AgentMatrix{
				Transport: "matrix", UserID: p.user[a], DisplayName: a,
				Rooms: rooms, Trigger: r.rec.Agents[a].Trigger,
			},
		})
	}
	return cfg
}

func (r *runner) startDaemon(ctx context.Context) error {
	r.mu.Lock()
	r.flight.restarted()
	r.mu.Unlock()
	for _, a := range r.plan.agents {
		if err := os.MkdirAll(filepath.Join(r.dir, "agents", a), 0o700); err != nil {
			return fmt.Errorf("agent dir: %w", err)
		}
	}
	ln, err := r.push.Listener()
	if err != nil {
		return err
	}
	bridge := r.opts.BridgeCommand
	if len(bridge) == 0 {
		bridge = []string{r.exe, "mcp"}
	}
	d, err := dut.Start(ctx, r.config(), ln, dut.Options{
		Logger: r.log.With("component", "daemon"),
		Bridge: bridge, TurnTimeout: r.opts.TurnTimeout, TraceTap: r.tap,
	})
	if err != nil {
		return err
	}
	r.d = d
	return nil
}

func (r *runner) stopDaemon() error {
	r.mu.Lock()
	r.stopping = true
	r.restarts++
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.stopping = false
		r.mu.Unlock()
	}()
	err := r.d.Close()
	r.d = nil
	if err != nil {
		return fmt.Errorf("stopping the daemon for the recorded restart: %w", err)
	}
	return nil
}

// tap sees every record of this run's trace as the daemon writes it.
func (r *runner) tap(rec trace.Record) {
	if rec.Room != r.room || (rec.Event != nil && isState(rec.Event.Type)) {
		return
	}
	r.mu.Lock()
	r.flight.observe(rec)
	again := r.seen.again(rec)
	if again {
		// Counted once, as keep compares it; the barrier hears of the
		// change to what is in flight.
		close(r.changed)
		r.changed = make(chan struct{})
	}
	r.mu.Unlock()
	if again {
		return
	}
	r.script.Observe(rec)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopping && rec.Kind != trace.KindEvent {
		r.cut = append(r.cut, cutRecord{rec, r.restarts})
		return
	}
	r.counts[rec.Kind]++
	close(r.changed)
	r.changed = make(chan struct{})
}

// play walks the plan: barrier, then push or restart, to the end.
func (r *runner) play(ctx context.Context) error {
	for _, st := range r.plan.steps {
		r.barrier(ctx, st.want, st.what)
		if err := ctx.Err(); err != nil {
			return err
		}
		if st.restart {
			if err := r.stopDaemon(); err != nil {
				return err
			}
			if err := r.startDaemon(ctx); err != nil {
				return err
			}
			continue
		}
		if err := r.send(ctx, st.event); err != nil {
			r.stall(err.Error())
			continue
		}
		r.pushed++
	}
	r.barrier(ctx, r.plan.total, "the end of the recording")
	return ctx.Err()
}

func (r *runner) stall(s string) {
	r.mu.Lock()
	r.stalls = append(r.stalls, s)
	r.mu.Unlock()
	r.log.Warn("replay", "stall", s)
}

// barrier waits until this run has at least the recorded number of records
// of each kind, or the wait bound passes.
func (r *runner) barrier(ctx context.Context, want map[trace.Kind]int, what string) {
	began := time.Now()
	deadline := time.NewTimer(r.opts.Wait)
	defer deadline.Stop()
	// quiet runs while nothing is in flight and the trace does not grow.
	quiet := time.NewTimer(time.Hour)
	quiet.Stop()
	defer quiet.Stop()
	for {
		r.mu.Lock()
		var short []string
		for _, k := range kinds {
			if have := r.counts[k]; have < want[k] {
				short = append(short, fmt.Sprintf("%d of %d %s records", have, want[k], k))
			}
		}
		ch := r.changed
		idle := r.flight.idle()
		if len(short) == 0 {
			r.longest = max(r.longest, time.Since(began))
		}
		r.mu.Unlock()
		if len(short) == 0 {
			return
		}
		quiet.Stop()
		if r.opts.Quiet > 0 && idle {
			quiet.Reset(r.opts.Quiet)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		case <-deadline.C:
			r.stall(fmt.Sprintf("before %s: waited %s and had %s", what, r.opts.Wait, strings.Join(short, ", ")))
			return
		case <-quiet.C:
			r.stall(fmt.Sprintf("before %s: nothing in flight for %s and had %s; the daemon will not write them", what, r.opts.Quiet, strings.Join(short, ", ")))
			return
		}
	}
}

// kinds are the record kinds a barrier counts (start records come with the
// daemon, not with what it is pushed).
var kinds = []trace.Kind{trace.KindEvent, trace.KindPrompt, trace.KindTool, trace.KindPost, trace.KindTask, trace.KindAgent, trace.KindTurnEnd}

// send sends recording event i as its sender, relations pointing at this
// run's ids.
func (r *runner) send(ctx context.Context, i int) error {
	ev := r.rec.Events[i]
	ids := r.script.liveIDs()
	for _, t := range []int{ev.Thread, ev.ReplyTo, ev.Edits, ev.ReactsTo} {
		if t >= 0 && ids[t] == "" {
			return fmt.Errorf("event %d (%s): the event it relates to (%d) does not exist in this run; not sent", i, short(r.rec.Text(i)), t)
		}
	}
	if ev.Other != nil && ids[ev.Other.Target] == "" {
		return fmt.Errorf("event %d: the event it relates to (%d) does not exist in this run; not sent", i, ev.Other.Target)
	}
	if ev.Thread >= 0 && ev.ReplyTo < 0 {
		// The fallback reply points at the thread's latest event; one the
		// daemon has not made (yet) must not stop the send.
		for j := ev.Thread + 1; j < i; j++ {
			if r.rec.Events[j].Thread == ev.Thread && ids[j] == "" {
				ids[j] = ids[ev.Thread]
			}
		}
	}
	content := r.rec.Content(i, func(n string) id.UserID { return r.plan.user[n] }, ids)
	typ := ev.Type
	if typ == "" {
		typ = recording.TypeMessage
	}
	uid := r.plan.user[ev.Sender]
	sent, err := r.users[uid].SendMessageEvent(ctx, r.room, event.Type{Type: typ, Class: event.MessageEventType}, content)
	if err != nil {
		return fmt.Errorf("sending event %d as %s: %w", i, ev.Sender, err)
	}
	r.script.SetEventID(i, sent.EventID)
	if r.d != nil { // history sent before the daemon runs is never traced
		r.mu.Lock()
		r.flight.sent(sent.EventID)
		r.mu.Unlock()
	}
	return nil
}

// finish stops the daemon and compares its trace with the recorded one.
func (r *runner) finish() (*Result, error) {
	if err := r.d.Close(); err != nil {
		r.log.Warn("closing the daemon", "err", err)
	}
	r.d = nil
	all, err := trace.Read(filepath.Join(r.dir, "trace"))
	if err != nil {
		return nil, fmt.Errorf("reading this run's trace: %w", err)
	}
	got := &trace.Trace{Rooms: []trace.Room{{ID: r.room, Alias: r.plan.want.Rooms[0].Alias}}}
	if room, ok := all.Room(r.room); ok {
		got.Rooms[0].Records = r.uncut(keep(room.Records))
	}
	res := &Result{Want: r.plan.want, Got: got, Pushed: r.pushed, Seeded: r.seeded}
	r.mu.Lock()
	res.LongestWait = r.longest
	r.mu.Unlock()
	res.Diff = trace.Compare(r.plan.want, got)
	r.mu.Lock()
	res.Stalls = append(append(res.Stalls, r.stalls...), r.script.Notes()...)
	r.mu.Unlock()
	return res, nil
}

// cutRecord is a record written while the n-th replayed restart stopped
// the daemon.
type cutRecord struct {
	rec trace.Record
	n   int
}

// uncut drops from recs the records written while a replayed restart
// stopped the daemon: for each, the last record of its kind and session
// before that restart's start record.
func (r *runner) uncut(recs []trace.Record) []trace.Record {
	r.mu.Lock()
	cut := append([]cutRecord(nil), r.cut...)
	r.mu.Unlock()
	var starts []int
	for i, x := range recs {
		if x.Start != nil && x.Start.Restart {
			starts = append(starts, i)
		}
	}
	drop := map[int]bool{}
	for _, c := range cut {
		if c.rec.Kind == trace.KindStart || c.n < 1 || c.n > len(starts) {
			continue
		}
		for i := starts[c.n-1] - 1; i >= 0; i-- {
			if !drop[i] && recs[i].Kind == c.rec.Kind && recs[i].Session == c.rec.Session {
				drop[i] = true
				break
			}
		}
	}
	out := make([]trace.Record, 0, len(recs))
	for i, x := range recs {
		if !drop[i] {
			out = append(out, x)
		}
	}
	return out
}

func short(s string) string {
	if len(s) > 40 {
		return fmt.Sprintf("%q…", s[:40])
	}
	return fmt.Sprintf("%q", s)
}

func slicesContains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}
