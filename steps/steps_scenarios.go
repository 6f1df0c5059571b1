package steps

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/fakehs"
	"github.com/zooid-dev/zooid/scenarios"
)

func scenarioSteps(w *world) []stepDef {
	return []stepDef{
		{area: "setup", pattern: `^"(#[a-z0-9-]+)" is replayed from the recorded scenario "([a-z0-9-]+)"$`,
			example: `"#ops" is replayed from the recorded scenario "svc-a-incident"`,
			doc:     "Gives a room the history of scenarios/<name>.json (see scenarios/README.md): imported on fakehs, sent on a real server. Members the scenario has not declared become humans; declare agents first.",
			fn:      w.stepReplayed},
		{area: "tools", pattern: `^([a-z0-9-]+) reads the recorded thread "([^"]+)" of "(#[a-z0-9-]+)"$`,
			example: `agent-a reads the recorded thread "alarm" of "#ops"`,
			doc:     "Calls zooid_get_thread_history on the replayed thread whose root has that label in the recording.",
			fn:      w.stepReadsRecordedThread},
		{area: "results", pattern: `^the threads are the recorded top-level messages of "(#[a-z0-9-]+)", newest first$`,
			example: `the threads are the recorded top-level messages of "#ops", newest first`,
			doc:     "The last result lists the replayed top-level messages and thread roots (after the harness's own top-level posts) newest first, with their senders, edited text and reply counts.",
			fn:      w.stepRecordedThreads},
		{area: "results", pattern: `^the messages are the recorded thread "([^"]+)" of "(#[a-z0-9-]+)", root first$`,
			example: `the messages are the recorded thread "alarm" of "#ops", root first`,
			doc:     "The last result is that replayed thread exactly: root, then replies in order (and any posted since), each with the root as thread_id and its edited text.",
			fn:      w.stepRecordedThread},
		{area: "results", pattern: `^the messages hold the recorded history of "(#[a-z0-9-]+)" in order$`,
			example: `the messages hold the recorded history of "#ops" in order`,
			doc:     "Every replayed message appears once, in recorded order, with its thread_id and edited text; reactions and edits are not messages.",
			fn:      w.stepRecordedHistory},
	}
}

// ScenariosDir is the module's scenarios directory, where recordings live.
func ScenariosDir() (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "scenarios"), nil
}

func (w *world) stepReplayed(ctx context.Context, roomName, name string) error {
	if w.started {
		return fmt.Errorf("a replayed room must be declared before the first action")
	}
	dir, err := ScenariosDir()
	if err != nil {
		return err
	}
	rec, err := scenarios.Load(filepath.Join(dir, name+".json"))
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
	r.replay = &replay{rec: rec}
	return nil
}

// replay is a room's recorded history.
type replay struct {
	rec   *scenarios.Recording
	drain *pushDrain // set when its history was sent and the pushes must be swallowed
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
			w.fillSeeded(r, evIDs, seed)
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
func (w *world) replayed(roomName string) (*room, *scenarios.Recording, error) {
	r, ok := w.rooms[roomName]
	if !ok || r.replay == nil {
		return nil, nil, fmt.Errorf("%s is not replayed from a recording; use: %q is replayed from the recorded scenario \"name\"", roomName, roomName)
	}
	if !r.created {
		return nil, nil, fmt.Errorf("%s has not been created yet", roomName)
	}
	return r, r.replay.rec, nil
}

func (w *world) stepReadsRecordedThread(ctx context.Context, agent, label, roomName string) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	r, rec, err := w.replayed(roomName)
	if err != nil {
		return err
	}
	i, err := rec.Find(label)
	if err != nil {
		return err
	}
	_, err = w.call(ctx, agent, "zooid_get_thread_history", map[string]any{"thread_id": string(r.seeded[i].id)})
	return err
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
func (w *world) recordedEntry(r *room, rec *scenarios.Recording, i int) (expected, error) {
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

func (w *world) stepRecordedThreads(roomName string) error {
	c, err := w.okCall()
	if err != nil {
		return err
	}
	r, rec, err := w.replayed(roomName)
	if err != nil {
		return err
	}
	var want []expected
	for _, i := range rec.TopLevel() {
		x, err := w.recordedEntry(r, rec, i)
		if err != nil {
			return err
		}
		want = append(want, x)
	}
	for _, p := range w.posts {
		if p.room == r && p.root == p.id {
			x, err := w.postEntry(p)
			if err != nil {
				return err
			}
			want = append(want, x)
		}
	}
	// Newest first.
	for a, b := 0, len(want)-1; a < b; a, b = a+1, b-1 {
		want[a], want[b] = want[b], want[a]
	}
	l, err := c.list()
	if err != nil {
		return err
	}
	more, _ := c.body["has_more"].(bool)
	if len(l) > len(want) || (!more && len(l) != len(want)) {
		return fmt.Errorf("want %d entries (has_more %v), got %d:%s", len(want), more, len(l), diffIDs(wantIDs(want), l))
	}
	for k, e := range l {
		if err := want[k].check(e, true); err != nil {
			return fmt.Errorf("entry %d: %w:%s", k, err, diffIDs(wantIDs(want), l))
		}
	}
	return nil
}

func (w *world) stepRecordedThread(label, roomName string) error {
	c, err := w.okCall()
	if err != nil {
		return err
	}
	r, rec, err := w.replayed(roomName)
	if err != nil {
		return err
	}
	root, err := rec.Find(label)
	if err != nil {
		return err
	}
	x, err := w.recordedEntry(r, rec, root)
	if err != nil {
		return err
	}
	x.root = x.id // the root carries its own id as thread_id in thread history
	want := []expected{x}
	for _, i := range rec.Replies(root) {
		x, err := w.recordedEntry(r, rec, i)
		if err != nil {
			return err
		}
		want = append(want, x)
	}
	for _, p := range w.posts {
		if p.room == r && p.root == r.seeded[root].id && p.id != p.root {
			x, err := w.postEntry(p)
			if err != nil {
				return err
			}
			want = append(want, x)
		}
	}
	l, err := c.list()
	if err != nil {
		return err
	}
	if len(l) != len(want) {
		return fmt.Errorf("thread %q of %s: want %d messages, got %d:%s", label, roomName, len(want), len(l), diffIDs(wantIDs(want), l))
	}
	for k, e := range l {
		if err := want[k].check(e, false); err != nil {
			return fmt.Errorf("message %d: %w", k, err)
		}
	}
	if more, _ := c.body["has_more"].(bool); more {
		return fmt.Errorf("the whole thread fits the page yet has_more is true")
	}
	return nil
}

func (w *world) stepRecordedHistory(roomName string) error {
	c, err := w.okCall()
	if err != nil {
		return err
	}
	r, rec, err := w.replayed(roomName)
	if err != nil {
		return err
	}
	l, err := c.list()
	if err != nil {
		return err
	}
	pos := map[id.EventID]int{}
	for k, e := range l {
		s, _ := e["id"].(string)
		if _, dup := pos[id.EventID(s)]; dup {
			return fmt.Errorf("%s appears twice in the result", s)
		}
		pos[id.EventID(s)] = k
	}
	last := -1
	for i := range rec.Events {
		k, seen := pos[r.seeded[i].id]
		if !rec.IsHistory(i) {
			if seen {
				return fmt.Errorf("recorded event %d (%s) is not a message, yet it is entry %d", i, rec.Events[i].Type, k)
			}
			continue
		}
		if !seen {
			return fmt.Errorf("recorded event %d (%q) is missing from the result", i, rec.Text(i))
		}
		if k < last {
			return fmt.Errorf("recorded event %d is entry %d, before the previous recorded message (entry %d)", i, k, last)
		}
		last = k
		x, err := w.recordedEntry(r, rec, i)
		if err != nil {
			return err
		}
		if err := x.check(l[k], false); err != nil {
			return fmt.Errorf("entry %d: %w", k, err)
		}
	}
	return nil
}

func wantIDs(xs []expected) []id.EventID {
	out := make([]id.EventID, len(xs))
	for i, x := range xs {
		out[i] = x.id
	}
	return out
}
