package steps

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/fakeagent"
	"github.com/zooid-dev/zooid/fakehs"
	"github.com/zooid-dev/zooid/sim/replay"
	"github.com/zooid-dev/zooid/zooid/e2ee"
	"github.com/zooid-dev/zooid/zooid/recording"
	"github.com/zooid-dev/zooid/zooid/trace"
)

// Recorded rooms (scenarios/): loading a recording, sending it in as history or
// playing it into the daemon, and what its entries should read back as.

// ScenariosDir is the module's scenarios directory, where recordings live.
func ScenariosDir() (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "scenarios"), nil
}

// loadRecording reads a recording by name (scenarios/<name>.json of this
// module) or by path (anything with a slash or ending in .json, relative
// to the working directory), so `zooid sim` outside the repository can use one.
func loadRecording(ref string) (*recording.Recording, error) {
	if strings.ContainsRune(ref, '/') || strings.ContainsRune(ref, filepath.Separator) || strings.HasSuffix(ref, ".json") {
		return recording.Load(ref)
	}
	if err := checkName(ref); err != nil {
		return nil, fmt.Errorf("recording %q is neither a name in scenarios/ nor a path to a .json file", ref)
	}
	dir, err := ScenariosDir()
	if err != nil {
		return nil, fmt.Errorf("recording %q: %w (give a path to the file instead)", ref, err)
	}
	return recording.Load(filepath.Join(dir, ref+".json"))
}

// recordedRoom declares a room that holds a recording.
func (w *world) recordedRoom(ctx context.Context, roomName, ref string, play bool) error {
	if w.started {
		return fmt.Errorf("a recorded room must be declared before the first action")
	}
	rec, err := loadRecording(ref)
	if err != nil {
		return err
	}
	r, err := w.room(ctx, roomName)
	if err != nil {
		return err
	}
	if r.busy != nil {
		return fmt.Errorf("%s already has a generated history", roomName)
	}
	if r.replay != nil {
		return fmt.Errorf("%s is already replayed from %s", roomName, r.replay.rec.Path)
	}
	if err := w.declareRecordedAgents(ctx, rec, roomName); err != nil {
		return err
	}
	r.replay = &recordedRoom{rec: rec, play: play}
	if play && len(rec.Trace) > 0 {
		sc, err := replay.NewScript(rec, func(n string) id.UserID { u, _ := w.userID(n); return u })
		if err != nil {
			return err
		}
		// A shared Synapse suffixes this run's aliases: a recorded tool
		// call naming one of the recording's rooms names this run's.
		sc.MapAliases(func(room string) id.RoomAlias {
			if w.lease == nil {
				return "" // no homeserver yet, so no prompt either
			}
			return w.names().alias(room)
		})
		r.replay.script = &recordedScript{Script: sc}
		if w.traceDir == "" {
			// The recorded turns name events by id: the live trace says
			// which of this run's events they are.
			w.traceDir = filepath.Join(w.dir, "trace")
		}
	}
	if play {
		for _, m := range rec.Members {
			if _, agent := w.agents[m]; !agent {
				if err := w.addHuman(ctx, m); err != nil {
					return fmt.Errorf("playing %s into %s: member %s: %w", rec.Path, roomName, m, err)
				}
			}
		}
	}
	return nil
}

// declareRecordedAgents configures the recording's agents the scenario has
// not declared: bound to the recorded room (as roomName) and the other rooms
// it names, with the recorded trigger.
func (w *world) declareRecordedAgents(ctx context.Context, rec *recording.Recording, roomName string) error {
	for _, m := range rec.Members {
		a, ok := rec.Agents[m]
		if !ok {
			continue
		}
		if _, declared := w.agents[m]; declared {
			continue
		}
		rooms := []string{roomName}
		for _, rn := range a.Rooms {
			if rn != rec.Room && !slices.Contains(rooms, rn) {
				rooms = append(rooms, rn)
			}
		}
		if err := w.stepAgents(ctx, `"`+m+`"`, quoteList(rooms), a.Trigger); err != nil {
			return fmt.Errorf("configuring recorded agent %s of %s: %w", m, rec.Path, err)
		}
	}
	return nil
}

// quoteList writes names as the setup steps list them: "a", "b" and "c".
func quoteList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = `"` + x + `"`
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " and " + q[len(q)-1]
}

// recordedRoot is the event id of the recorded thread root labelled label.
func (w *world) recordedRoot(roomName, label string) (*room, id.EventID, error) {
	r, ok := w.rooms[roomName]
	if !ok || r.replay == nil {
		return nil, "", fmt.Errorf("%s is not replayed or played from a recording", roomName)
	}
	i, err := r.replay.rec.Find(label)
	if err != nil {
		return nil, "", err
	}
	if i >= len(r.seeded) || r.seeded[i].id == "" {
		return nil, "", fmt.Errorf("recorded event %q of %s has not been played yet", label, roomName)
	}
	return r, r.seeded[i].id, nil
}

// recordedThreadOf finds a replayed or played thread root whose text
// contains s, as a post the thread steps can use.
func (w *world) recordedThreadOf(s string) (*post, []string) {
	var seen []string
	for _, rn := range w.roomSeq {
		r := w.rooms[rn]
		if r.replay == nil {
			continue
		}
		for _, e := range r.seeded {
			if e.id == "" || !e.isRoot {
				continue
			}
			if strings.Contains(e.body, s) {
				return &post{room: r, id: e.id, sender: e.sender, text: e.body, core: e.body, root: e.id}, nil
			}
			seen = append(seen, strconv.Quote(e.body))
		}
	}
	return nil, seen
}

// recordedRoom is a room's recorded history, sent in or played.
type recordedRoom struct {
	rec   *recording.Recording
	drain *pushDrain // set when its history was sent and the pushes must be swallowed
	// play: the room starts empty and the recording is sent into the running
	// daemon by steps; next is the first event not sent yet.
	play   bool
	next   int
	joined map[string]bool // recorded agents joined to send their events
	// imported: the history went in through an importer, which keeps the
	// recorded timestamps (sending stamps the time of sending).
	imported bool
	// script, for a played recording that carries the daemon's trace,
	// answers the agents' prompts with their recorded turns; the events the
	// daemon posted are then made by the daemon, not sent.
	script *recordedScript
	// waited are the recorded turns the play has already waited for.
	waited map[replay.RecordedTurn]bool
}

// recordedScript is a played recording's replay.Script and what of the
// live trace it has been fed.
type recordedScript struct {
	*replay.Script
	mu   sync.Mutex
	room id.RoomID // the played room, once the play starts
	seen uint64    // the last live trace record fed
}

// pushDrain is the fakehs lease's hold on the push port, with the last event of
// each room whose history was sent (and so pushed): the hand-over waits for
// them, or the daemon would take that history for new messages. On a shared
// homeserver the lease drains and waits by itself.
type pushDrain struct {
	d     *drain
	lasts []id.EventID
}

// drainSentHistory makes sure pushes of history sent into a room are
// swallowed before the daemon starts, and returns where to note the room's
// last event once sent.
func (w *world) drainSentHistory() (*pushDrain, error) {
	for _, rn := range w.roomSeq {
		if rp := w.rooms[rn].replay; rp != nil && rp.drain != nil {
			return rp.drain, nil
		}
	}
	if w.lease.hold == nil {
		// A shared homeserver's lease drains pushes itself and waits for
		// the last seeded event at hand-over.
		return nil, nil
	}
	p := &pushDrain{d: w.lease.hold}
	handOver := w.lease.handOver
	w.lease.handOver = func(ctx context.Context, last id.EventID) error {
		for _, e := range p.lasts {
			if err := p.d.waitFor(ctx, e); err != nil {
				return err
			}
		}
		return handOver(ctx, last)
	}
	return p, nil
}

// replayRoom creates a room with its recorded history, the way seedRoom does
// for a generated one: imported where the homeserver can and every relation
// is expressible by index, sent event by event (as each sender) otherwise.
// r.seeded gets one entry per recorded event, so the hand-over waits for the
// last of them and "#room/thread-N" names the N-th recorded thread root.
func (w *world) replayRoom(ctx context.Context, r *room, creator *human) error {
	rec := r.replay.rec
	for _, m := range rec.Members {
		_, human := w.humans[m]
		_, agent := w.agents[m]
		if !human && !agent {
			if err := w.addHuman(ctx, m); err != nil {
				return fmt.Errorf("replaying %s into %s: member %s: %w", rec.Path, r.name, m, err)
			}
		}
	}
	ids := map[string]id.UserID{}
	for _, m := range rec.Members {
		uid, err := w.userID(m)
		if err != nil {
			return fmt.Errorf("replaying %s into %s: %w", rec.Path, r.name, err)
		}
		ids[m] = uid
	}
	user := func(name string) id.UserID { return ids[name] }
	members := []id.UserID{}
	for _, hn := range w.humanSeq {
		members = append(members, w.humans[hn].id)
	}
	for _, m := range rec.Members {
		if _, ok := w.agents[m]; ok {
			members = append(members, ids[m])
		}
	}
	seed := roomSeed{creator: creator.id, name: r.name, aliasLocalpart: w.names().aliasLocalpart(r.name), members: members}
	r.seeded = make([]seeded, len(rec.Events))
	for i, e := range rec.Events {
		r.seeded[i] = seeded{sender: e.Sender, body: rec.Text(i), isRoot: len(rec.Replies(i)) > 0}
		se := seedEvent{sender: ids[e.Sender], ts: e.Timestamp, threadRoot: e.Thread, typ: e.Type,
			content: rec.Content(i, user, nil),
			send:    func(earlier []id.EventID) map[string]any { return rec.Content(i, user, earlier) }}
		if rel, target, key := rec.Relation(i); rel != "" {
			se.relation = &fakehs.SeedRelation{RelType: rel, Target: target, Key: key}
		}
		seed.events = append(seed.events, se)
	}
	if rec.Importable() {
		roomID, evIDs, ok, err := w.lease.hs.importRoom(seed)
		if err != nil {
			return fmt.Errorf("replaying %s: %w", rec.Path, err)
		}
		if ok {
			if len(evIDs) != len(rec.Events) {
				return fmt.Errorf("replaying %s into %s: homeserver returned %d event ids for %d events", rec.Path, r.name, len(evIDs), len(rec.Events))
			}
			r.id, r.created = roomID, true
			r.replay.imported = true
			fillSeeded(r.seeded, evIDs, seed.events)
			return nil
		}
	}
	pushed := false // the homeserver pushes history only of rooms an agent is in
	for _, m := range rec.Members {
		if _, ok := w.agents[m]; ok {
			pushed = true
		}
	}
	if pushed {
		p, err := w.drainSentHistory()
		if err != nil {
			return fmt.Errorf("replaying %s: %w", rec.Path, err)
		}
		r.replay.drain = p
	}
	if err := w.seedBySending(ctx, r, seed); err != nil {
		return fmt.Errorf("replaying %s: %w", rec.Path, err)
	}
	if p := r.replay.drain; p != nil && len(r.seeded) > 0 {
		p.lasts = append(p.lasts, r.seeded[len(r.seeded)-1].id)
	}
	return nil
}

// replayed is a replayed room's recording, or an error naming the step to use.
func (w *world) replayed(roomName string) (*room, *recording.Recording, error) {
	r, ok := w.rooms[roomName]
	if !ok || r.replay == nil {
		return nil, nil, fmt.Errorf("%s is not replayed from a recording; use: %q is replayed from the recorded scenario \"name\"", roomName, roomName)
	}
	if !r.created {
		return nil, nil, fmt.Errorf("%s has not been created yet", roomName)
	}
	return r, r.replay.rec, nil
}

// expected is one entry a history result should hold.
type expected struct {
	id      id.EventID
	sender  id.UserID
	text    string
	root    id.EventID // thread root for a reply
	replies int        // for a thread overview
	label   string     // where it came from, for messages
}

// recordedEntry is what event i of the recording should read back as.
func (w *world) recordedEntry(r *room, rec *recording.Recording, i int) (expected, error) {
	e := rec.Events[i]
	uid, err := w.userID(e.Sender)
	if err != nil {
		return expected{}, err
	}
	user := func(n string) id.UserID { u, _ := w.userID(n); return u }
	x := expected{id: r.seeded[i].id, sender: uid, text: rec.TextAs(i, user), root: r.seeded[i].root,
		replies: len(rec.Replies(i)), label: fmt.Sprintf("recorded event %d", i)}
	if e.Label != "" {
		x.label += " (" + e.Label + ")"
	}
	for _, p := range w.posts {
		if p.root == x.id && p.id != x.id {
			x.replies++
		}
	}
	return x, nil
}

// postEntry is what a harness post should read back as.
func (w *world) postEntry(p *post) (expected, error) {
	uid, err := w.userID(p.sender)
	if err != nil {
		return expected{}, err
	}
	body, _, err := w.expandMentions(p.text)
	if err != nil {
		return expected{}, err
	}
	// Replies to a harness post include the agents' own notices, which
	// the harness doesn't track: reply_count is not checked (-1).
	x := expected{id: p.id, sender: uid, text: body, replies: -1, label: "harness post " + string(p.id)}
	if p.root != p.id {
		x.root = p.root
	}
	return x, nil
}

// check compares one result entry with what it should be.
func (x expected) check(e map[string]any, overview bool) error {
	var bad []string
	if got, _ := e["id"].(string); id.EventID(got) != x.id {
		bad = append(bad, fmt.Sprintf("id %s, want %s", got, x.id))
	}
	if got, _ := e["sender"].(string); id.UserID(got) != x.sender {
		bad = append(bad, fmt.Sprintf("sender %s, want %s", got, x.sender))
	}
	if got, _ := e["text"].(string); got != x.text {
		bad = append(bad, fmt.Sprintf("text %q, want %q", got, x.text))
	}
	tid, _ := e["thread_id"].(string)
	switch {
	case x.root != "" && id.EventID(tid) != x.root:
		bad = append(bad, fmt.Sprintf("thread_id %q, want %s", tid, x.root))
	case x.root == "" && tid != "" && id.EventID(tid) != x.id:
		bad = append(bad, fmt.Sprintf("thread_id %q on a top-level message", tid))
	}
	if overview && x.replies >= 0 {
		if got := fmt.Sprint(e["reply_count"]); got != fmt.Sprint(x.replies) {
			bad = append(bad, fmt.Sprintf("reply_count %s, want %d", got, x.replies))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s: %s", x.label, strings.Join(bad, "; "))
	}
	return nil
}

// okCallOnReplayed is the last tool call, which must have succeeded, and the
// replayed room it is checked against, with its recording.
func (w *world) okCallOnReplayed(roomName string) (*call, *room, *recording.Recording, error) {
	c, err := w.okCall()
	if err != nil {
		return nil, nil, nil, err
	}
	r, rec, err := w.replayed(roomName)
	if err != nil {
		return nil, nil, nil, err
	}
	return c, r, rec, nil
}

func wantIDs(xs []expected) []id.EventID {
	out := make([]id.EventID, len(xs))
	for i, x := range xs {
		out[i] = x.id
	}
	return out
}

// record runs the recorder on a room of the scenario; withTrace carries the
// daemon's trace of it along (the daemon must keep one).
func (w *world) record(ctx context.Context, roomName, agent string, withTrace bool) error {
	return w.recordWith(ctx, roomName, agent, withTrace, false)
}

// recordWith is record; withDevice decrypts the room's encrypted events
// with the agent's device, as zooid record --decrypt does.
func (w *world) recordWith(ctx context.Context, roomName, agent string, withTrace, withDevice bool) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	r, ok := w.rooms[roomName]
	if !ok || !r.created {
		return fmt.Errorf("%s is not a room of this scenario", roomName)
	}
	if _, err := w.agent(agent); err != nil {
		return err
	}
	names := map[id.UserID]string{}
	agents := map[id.UserID]recording.Agent{}
	for n, h := range w.humans {
		names[h.id] = n
	}
	for n, a := range w.agents {
		uid := w.agentUser(n)
		names[uid] = n
		if slices.Contains(a.rooms, roomName) {
			agents[uid] = recording.Agent{Rooms: []string{roomName}, Trigger: a.trigger}
		}
	}
	opts := recording.RecordOptions{
		Homeserver: w.lease.hs.baseURL(), Token: w.lease.reg.AppToken, AsUser: w.agentUser(agent),
		Room: string(r.id), Limit: 1000, Names: names, Agents: agents,
	}
	if withTrace {
		if w.traceDir == "" {
			return errors.New("the daemon keeps no trace; add: the daemon keeps a trace")
		}
		opts.TraceFile = w.traceDir
	}
	if withDevice {
		if !w.encryption {
			return errors.New("the daemon does not read encrypted rooms, so its agents have no devices; add: the daemon reads encrypted rooms")
		}
		cli, err := mautrix.NewClient(opts.Homeserver, opts.AsUser, opts.Token)
		if err != nil {
			return err
		}
		cli.SetAppServiceUserID = true
		dev, err := e2ee.OpenReader(ctx, filepath.Join(w.stateDir(), "e2ee"), opts.AsUser, cli, w.log)
		if err != nil {
			return fmt.Errorf("opening %s's device: %w", agent, err)
		}
		defer func() { _ = dev.Close() }()
		opts.Decrypt = dev.Decrypt
	}
	// A server may show a sent event to /messages a moment later (Synapse's
	// workers, fakehs's degraded profile): record until what the harness put
	// in the room is there, so the next step compares a whole recording.
	put := 0
	for _, e := range r.seeded {
		if e.id != "" {
			put++
		}
	}
	var rec *recording.Recording
	var notes []string
	err := w.eventually(ctx, fmt.Sprintf("recording the %d events put in %s", put, roomName), func() (bool, string, error) {
		var err error
		rec, notes, err = recording.Record(ctx, opts)
		if err != nil {
			return false, "", fmt.Errorf("recording %s as %s: %w", roomName, agent, err)
		}
		if len(rec.Events) < put {
			return false, fmt.Sprintf("%d events", len(rec.Events)), nil
		}
		if withTrace {
			// The trace must have caught up too: every recorded event routed,
			// every prompt's turn ended, every post seen coming back.
			if quiet, seen := traceSettled(rec); !quiet {
				return false, seen, nil
			}
		}
		return true, "", nil
	})
	if err != nil {
		return err
	}
	// Saying how many it decrypted is not leaving something out.
	notes = slices.DeleteFunc(notes, func(n string) bool { return withDevice && strings.HasPrefix(n, "decrypted ") })
	if len(notes) > 0 {
		return fmt.Errorf("recording %s left something out: %s", roomName, strings.Join(notes, "; "))
	}
	w.recording, w.recordedFrom = rec, r
	return nil
}

// madeByDaemon waits until the daemon has posted recording event i itself,
// as the recording's trace says it did, and returns its id in this run.
func (w *world) madeByDaemon(ctx context.Context, sc *recordedScript, rec *recording.Recording, i int) (id.EventID, error) {
	var eid id.EventID
	err := w.eventually(ctx, fmt.Sprintf("the daemon posting recorded event %d as %s (%q), as the recording's trace says", i, rec.Events[i].Sender, rec.Text(i)), func() (bool, string, error) {
		w.feedScript(sc)
		eid = sc.EventID(i)
		return eid != "", "not posted", nil
	})
	return eid, err
}

// feedScript gives a played recording's script the live trace records it
// has not seen, so it knows this run's ids.
func (w *world) feedScript(sc *recordedScript) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.room == "" || w.traceDir == "" {
		return
	}
	tr, err := trace.Read(w.traceDir)
	if err != nil {
		return // a half-written file; the next feed reads it whole
	}
	room, ok := tr.Room(sc.room)
	if !ok {
		return
	}
	for _, r := range room.Records {
		if r.Seq > sc.seen {
			sc.Observe(r)
			sc.seen = r.Seq
		}
	}
}

// respondRecorded answers an agent's prompt with its recorded turn when a
// played recording carries the trace (see replay.Script).
func (w *world) respondRecorded(scripts []*recordedScript) func(string, fakeagent.Prompt) (fakeagent.Turn, bool) {
	return func(agent string, p fakeagent.Prompt) (fakeagent.Turn, bool) {
		for _, sc := range scripts {
			w.feedScript(sc)
			if t, ok := sc.Respond(agent, p); ok {
				return t, true
			}
		}
		return nil, false
	}
}

// waitRecordedTurns waits, before recording event i is sent, for the turns
// the recorded daemon had started by then (replay.Script.TurnsBefore): each
// prompt in the live trace, and the end of each turn that had ended. So an
// event that came in while a turn ran comes in while it runs again, never
// before it starts or after it ends, whatever the machine's speed.
func (w *world) waitRecordedTurns(ctx context.Context, r *room, i int) error {
	rp := r.replay
	for _, t := range rp.script.TurnsBefore(i) {
		if rp.waited[t] || t.Trigger >= len(r.seeded) || (t.Trigger >= 0 && r.seeded[t.Trigger].id == "") {
			continue
		}
		if err := w.waitLiveTurn(ctx, r, t); err != nil {
			return err
		}
		if rp.waited == nil {
			rp.waited = map[replay.RecordedTurn]bool{}
		}
		rp.waited[t] = true
	}
	return nil
}

// waitLiveTurn waits for the live trace to hold the prompt of recorded turn
// t (the agent prompted for the trigger's live event, the Nth time), and its
// turn_end when t had ended.
func (w *world) waitLiveTurn(ctx context.Context, r *room, t replay.RecordedTurn) error {
	var eid id.EventID
	on := "on no event (the daemon's own turn)"
	if t.Trigger >= 0 {
		eid = r.seeded[t.Trigger].id
		on = fmt.Sprintf("on recorded event %d (%s)", t.Trigger, eid)
	}
	what := fmt.Sprintf("%s prompted (prompt %d %s) before the next recorded event, as the recorded daemon was", t.Agent, t.Nth+1, on)
	if t.Ended {
		what = fmt.Sprintf("%s's turn (prompt %d %s) ending before the next recorded event, as the recorded one did", t.Agent, t.Nth+1, on)
	}
	return w.eventually(ctx, what, func() (bool, string, error) {
		tr, err := trace.Read(w.traceDir)
		if err != nil {
			return false, err.Error(), nil
		}
		rt, ok := tr.Room(r.id)
		if !ok {
			return false, "no trace of the room yet", nil
		}
		n := 0
		turn := ""
		for _, rec := range rt.Records {
			switch {
			case turn == "" && rec.Prompt != nil && rec.Prompt.Agent == t.Agent && rec.Prompt.Trigger == eid:
				if n == t.Nth {
					turn = rec.Prompt.Turn
					if !t.Ended {
						return true, "", nil
					}
				}
				n++
			case turn != "" && rec.TurnEnd != nil && rec.TurnEnd.Agent == t.Agent && rec.TurnEnd.Turn == turn:
				return true, "", nil
			}
		}
		if turn == "" {
			return false, fmt.Sprintf("%d such prompts", n), nil
		}
		return false, "prompted, the turn not ended", nil
	})
}
