package steps

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/zooid-dev/zooid/internal/randid"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/appservice"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/docker/synapse"
	"github.com/zooid-dev/zooid/internal/pushdrain"
)

// Seeded-room snapshots (Complement's blueprints are the model). Sending an
// 800-message room to Synapse one event at a time takes tens of seconds
// (about 32 events a second here), and eighteen scenarios each want their own. So a Synapse run starts its
// container from a snapshot image that already holds a pool of identical
// seeded rooms, one per scenario that asks for it: each copy has its own
// appservice registration (its agents' namespace), its own humans and its
// own alias, and a scenario that claims a copy takes over all three, so its
// writes never meet another scenario's. The snapshot is built once and
// reused for as long as its key (the Synapse image's id, the recipes, and
// snapshotVersion) is unchanged.

// poolRecipe is a busy room a snapshot holds ready-seeded, in Pool copies.
// A scenario gets a copy when its busy-room step, its humans (in the order
// declared; the first creates the room) and its agents among the senders
// match; any other busy room is seeded by sending, as before.
type poolRecipe struct {
	Room    string   `json:"room"`
	Total   int      `json:"total"`
	Threads int      `json:"threads"`
	Senders []string `json:"senders"`
	Humans  []string `json:"humans"`
	Pool    int      `json:"pool"`
}

// poolRecipes are the busy rooms every Synapse run has ready. The room is
// 800 messages (2,000 until issue 38: 36,000 sends for a cold CI's snapshot,
// now 12,800): enough for every paging scenario to walk four pages of 200,
// stop mid-walk after three, and find more than 200 entries in the overview. Pool is how
// many copies there are: mcp_paging and mcp_reading have 16 scenarios on
// this room, and each writes to it (a tool call is woken by a mention), so
// each spends a copy; a scenario that finds every copy spent seeds its room
// by sending, which took 21 s of a CI's Synapse pass, its slowest scenario
// (TestSnapshotHasACopyForEveryScenario holds Pool to the features: one copy a scenario).
// The room tools' scenarios that read no history live in room_state.feature,
// on a room without one: three copies fewer, 2,400 sends of a cold build.
// Changing the list rebuilds the snapshot (once; then it is reused).
var poolRecipes = []poolRecipe{
	{Room: "#ops", Total: 800, Threads: 40, Senders: []string{"ori", "mia", "agent-a", "agent-b"}, Humans: []string{"ori", "mia"}, Pool: 16},
}

// snapshotVersion is part of the key: bump it when the way a snapshot is
// built or described changes.
const snapshotVersion = 1

// snapshotRepo is the image repository of the snapshots; the tag is the key.
const snapshotRepo = "zooid-synapse-snapshot"

// Labels of a snapshot image.
const (
	snapshotKeyLabel   = "dev.zooid.snapshot.key"
	snapshotPoolLabel  = "dev.zooid.snapshot.pool"   // JSON: []poolEntry without events
	snapshotEventsPath = "/data/zooid-snapshot.json" // JSON: [][]id.EventID, per entry
)

// poolEntry is one seeded copy: the registration it belongs to, the names
// it lends a scenario, its humans and its room.
type poolEntry struct {
	Recipe      int                  `json:"recipe"`
	RegID       string               `json:"reg_id"`
	ASToken     string               `json:"as_token"`
	HSToken     string               `json:"hs_token"`
	AgentPrefix string               `json:"agent_prefix"`
	HumanPrefix string               `json:"human_prefix"`
	AliasSuffix string               `json:"alias_suffix"`
	Humans      map[string]poolHuman `json:"humans"`
	Room        id.RoomID            `json:"room"`

	events []id.EventID // the room's generated messages, oldest first
}

// poolHuman is a human registered in the snapshot.
type poolHuman struct {
	ID    id.UserID `json:"id"`
	Token string    `json:"token"`
}

func (e *poolEntry) names(server string) names {
	return names{serverName: server, humanPrefix: e.HumanPrefix, agentPrefix: e.AgentPrefix, aliasSuffix: e.AliasSuffix}
}

// reg is the entry's registration, pushing to listen.
func (e *poolEntry) reg(server, listen string) *appservice.Registration {
	r := registration(e.names(server), listen)
	r.ID, r.AppToken, r.ServerToken = e.RegID, e.ASToken, e.HSToken
	return r
}

// spec is the recipe's busy room.
func (r *poolRecipe) spec() *busySpec {
	return &busySpec{total: r.Total, threads: r.Threads, senders: r.Senders}
}

// senderIDs are the ids of the recipe's senders in the entry's names.
func (r *poolRecipe) senderIDs(e *poolEntry, server string) []id.UserID {
	n := e.names(server)
	out := make([]id.UserID, len(r.Senders))
	for i, s := range r.Senders {
		if h, ok := e.Humans[s]; ok {
			out[i] = h.ID
		} else {
			out[i] = n.agent(s)
		}
	}
	return out
}

// snapshotKey names a snapshot by what it holds.
func snapshotKey(baseImageID string, recipes []poolRecipe) string {
	k, _ := synapse.SnapshotKey(baseImageID, snapshotVersion, recipes) // recipes always encode
	return k
}

// snapshot finds or builds the snapshot of recipes on the Synapse image
// base, and returns its image ref and its pool (events not yet read).
func snapshot(ctx context.Context, base string, recipes []poolRecipe, log func(string, ...any)) (string, []*poolEntry, error) {
	var entries []*poolEntry
	begin := time.Now()
	ref, img, built, err := synapse.FindOrBuildSnapshot(ctx, base, synapse.SnapshotSpec{
		Repo: snapshotRepo, Version: snapshotVersion, Recipe: recipes,
		Build: func(ctx context.Context, base, ref string) (err error) {
			entries, err = buildSnapshot(ctx, base, ref, recipes)
			return err
		},
	}, func(format string, args ...any) { log("zooid sim: "+format, args...) })
	if err != nil {
		return "", nil, err
	}
	if built {
		log("zooid sim: Synapse snapshot %s built in %s (%d seeded rooms)", ref, time.Since(begin).Round(time.Second), len(entries))
		return ref, entries, nil
	}
	if err := json.Unmarshal([]byte(img.Labels[snapshotPoolLabel]), &entries); err != nil {
		return "", nil, fmt.Errorf("snapshot %s: reading its pool label: %w", ref, err)
	}
	log("zooid sim: Synapse snapshot %s reused (%d seeded rooms)", ref, len(entries))
	return ref, entries, nil
}

// buildSnapshot starts Synapse from base with one registration per pool
// entry, seeds every entry's room by sending, waits until Synapse has pushed
// all of it, and commits the container as ref.
func buildSnapshot(ctx context.Context, base, ref string, recipes []poolRecipe) ([]*poolEntry, error) {
	const server = "localhost"
	opts := []synapse.Option{synapse.WithImage(base), synapse.WithServerName(server)}
	var entries []*poolEntry
	var socks []*pushdrain.Socket
	var drains []*drain
	defer func() {
		for _, d := range drains {
			_ = d.stop()
		}
		for _, s := range socks {
			_ = s.Close()
		}
	}()
	for ri, r := range recipes {
		for j := range r.Pool {
			e := &poolEntry{Recipe: ri, Humans: map[string]poolHuman{},
				AgentPrefix: fmt.Sprintf("zp%dn%d-", ri, j), HumanPrefix: fmt.Sprintf("hp%dn%d-", ri, j), AliasSuffix: fmt.Sprintf("-p%dn%d", ri, j)}
			sock, err := pushdrain.Bind("127.0.0.1:0")
			if err != nil {
				return nil, err
			}
			socks = append(socks, sock)
			reg := registration(e.names(server), sock.Addr)
			e.RegID, e.ASToken, e.HSToken = reg.ID, reg.AppToken, reg.ServerToken
			d, err := startDrain(sock, reg.ServerToken)
			if err != nil {
				return nil, err
			}
			drains = append(drains, d)
			entries = append(entries, e)
			opts = append(opts, synapse.WithAppservice(reg))
		}
	}
	c, err := synapse.Run(ctx, opts...)
	if err != nil {
		return nil, err
	}
	defer func() { _ = c.Terminate(context.WithoutCancel(ctx)) }()
	// Synapse takes one event at a time per room but overlaps rooms a little.
	sem := make(chan struct{}, 4)
	errs := make([]error, len(entries))
	var wg sync.WaitGroup
	for i, e := range entries {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = seedEntry(ctx, c, &recipes[e.Recipe], e, drains[i], server)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	pool, err := json.Marshal(entries)
	if err != nil {
		return nil, fmt.Errorf("encoding the pool: %w", err)
	}
	events := make([][]id.EventID, len(entries))
	for i, e := range entries {
		events[i] = e.events
	}
	evJSON, err := json.Marshal(events)
	if err != nil {
		return nil, fmt.Errorf("encoding the pool's events: %w", err)
	}
	if err := c.Commit(ctx, ref, map[string][]byte{snapshotEventsPath: evJSON},
		map[string]string{snapshotPoolLabel: string(pool), snapshotKeyLabel: ref, synapse.RoleLabel: "test-synapse-snapshot"}); err != nil {
		return nil, err
	}
	return entries, nil
}

// seedEntry registers an entry's humans and sends its room, then waits
// until Synapse has pushed the last message to the entry's drain, so the
// snapshot holds no pushes still due.
func seedEntry(ctx context.Context, c *synapse.Container, r *poolRecipe, e *poolEntry, d *drain, server string) error {
	humans := map[id.UserID]*mautrix.Client{}
	var creator *mautrix.Client
	for _, h := range r.Humans {
		uid, tok, err := c.RegisterNamedUser(ctx, e.HumanPrefix+h, "pw-"+randid.Hex(8), h, false)
		if err != nil {
			return err
		}
		e.Humans[h] = poolHuman{ID: uid, Token: tok}
		cli, err := mautrix.NewClient(c.BaseURL(), uid, tok)
		if err != nil {
			return fmt.Errorf("client for %s: %w", uid, err)
		}
		humans[uid] = cli
		if creator == nil {
			creator = cli
		}
	}
	ids := r.senderIDs(e, server)
	members := []id.UserID{}
	for _, h := range r.Humans {
		members = append(members, e.Humans[h].ID)
	}
	for i, s := range r.Senders {
		if !slices.Contains(r.Humans, s) {
			members = append(members, ids[i])
		}
	}
	n := e.names(server)
	seed := roomSeed{creator: creator.UserID, name: r.Room, aliasLocalpart: n.aliasLocalpart(r.Room), members: members}
	_, seed.events = r.spec().generate(ids, time.Now())
	clientFor := func(ctx context.Context, uid id.UserID) (*mautrix.Client, error) {
		if cli, ok := humans[uid]; ok {
			return cli, nil
		}
		return appserviceUser(ctx, c.BaseURL(), e.ASToken, uid)
	}
	roomID, evIDs, err := sendSeed(ctx, creator, clientFor, seed)
	if err != nil {
		return err
	}
	e.Room, e.events = roomID, evIDs
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return d.waitFor(wctx, evIDs[len(evIDs)-1])
}

// pooled is an entry of the run's pool with its push port.
type pooled struct {
	*poolEntry
	push  *pushdrain.Socket
	drain *drain
	inUse bool // a scenario holds it
	spent bool // a scenario changed the room: never handed out again
}

// pool is the run's seeded rooms. A scenario holds a copy alone; when it
// gives it back, the copy goes back into the pool if the room's newest event
// is still the last generated message (the scenario only read it), and is
// spent otherwise.
type pool struct {
	mu      sync.Mutex
	recipes []poolRecipe
	entries []*pooled
	changed chan struct{} // closed when a copy is given back
}

// claim hands out a free copy of the recipe that matches the room and the
// scenario's humans. While every such copy is held by another scenario it
// waits for one to come back (a copy costs a scenario's steps, a send of
// the room far more); it returns nil when none matches, when all are spent,
// or when ctx ends.
func (p *pool) claim(ctx context.Context, r *room, humans []string) (*pooled, *poolRecipe) {
	if p == nil || r.busy == nil {
		return nil, nil
	}
	for {
		p.mu.Lock()
		held := false
		for _, e := range p.entries {
			rc := &p.recipes[e.Recipe]
			if e.spent || rc.Room != r.name || rc.Total != r.busy.total || rc.Threads != r.busy.threads ||
				!slices.Equal(rc.Senders, r.busy.senders) || !slices.Equal(rc.Humans, humans) {
				continue
			}
			if e.inUse {
				held = true
				continue
			}
			e.inUse = true
			p.mu.Unlock()
			return e, rc
		}
		if p.changed == nil {
			p.changed = make(chan struct{})
		}
		changed := p.changed
		p.mu.Unlock()
		if !held {
			return nil, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, nil
		}
	}
}

// giveBack ends a scenario's hold on a copy.
func (p *pool) giveBack(e *pooled, clean bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	e.inUse, e.spent = false, !clean
	if p.changed != nil {
		close(p.changed)
		p.changed = nil
	}
}

// spent counts the copies scenarios changed (never handed out again) and
// all copies; a nil pool has none.
func (p *pool) spent() (spent, total int) {
	if p == nil {
		return 0, 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.entries {
		if e.spent {
			spent++
		}
	}
	return spent, len(p.entries)
}

// close stops the drains and unbinds the push ports.
func (p *pool) close() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.entries {
		if e.drain != nil {
			_ = e.drain.stop()
		}
		_ = e.push.Close()
	}
}

// start reads the entries' events from the running snapshot and starts a
// drain on every entry's port.
func (p *pool) start(ctx context.Context, c *synapse.Container) error {
	b, err := c.ReadFile(ctx, snapshotEventsPath)
	if err != nil {
		return err
	}
	var events [][]id.EventID
	if err := json.Unmarshal(b, &events); err != nil {
		return fmt.Errorf("snapshot: decoding %s: %w", snapshotEventsPath, err)
	}
	if len(events) != len(p.entries) {
		return fmt.Errorf("snapshot: %s lists %d rooms, its label %d", snapshotEventsPath, len(events), len(p.entries))
	}
	for i, e := range p.entries {
		if want := p.recipes[e.Recipe].Total; len(events[i]) != want {
			return fmt.Errorf("snapshot: room %d has %d events, its recipe %d", i, len(events[i]), want)
		}
		e.events = events[i]
		d, err := startDrain(e.push, e.HSToken)
		if err != nil {
			return err
		}
		e.drain = d
	}
	return nil
}

// lease is the scenario's use of a claimed entry: its registration, names
// and push port. After the scenario the port is drained again, and the
// entry goes back into the pool if the scenario left its room as it was.
func (p *pool) lease(e *pooled, hs homeserver, server string) *lease {
	return &lease{
		hs: hs, names: e.names(server), reg: e.reg(server, e.push.Addr), listen: e.push.Addr, push: e.push,
		handOver: func(ctx context.Context, last id.EventID) error {
			// The snapshot's history was pushed while it was built; only
			// a room the scenario seeded itself has pushes to wait for.
			if last != "" && !slices.Contains(e.events, last) {
				if err := e.drain.waitFor(ctx, last); err != nil {
					return err
				}
			}
			err := e.drain.stop()
			e.drain = nil
			return err
		},
		sharedAgents: true, keep: e.Room,
		release: func() {
			if e.drain == nil {
				if d, err := startDrain(e.push, e.HSToken); err == nil {
					e.drain = d
				}
			}
			p.giveBack(e, p.untouched(hs, e))
		},
	}
}

// untouched says whether the copy's room still ends with its last generated
// message, read as the first of its humans.
func (p *pool) untouched(hs homeserver, e *pooled) bool {
	rc := &p.recipes[e.Recipe]
	h := e.Humans[rc.Humans[0]]
	cli, err := mautrix.NewClient(hs.baseURL(), h.ID, h.Token)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := cli.Messages(ctx, e.Room, "", "", mautrix.DirectionBackward, nil, 1)
	if err != nil || len(resp.Chunk) != 1 {
		return false
	}
	return resp.Chunk[0].ID == e.events[len(e.events)-1]
}

// busyLine finds a busy-room step in a feature file's line.
var busyLine = regexp.MustCompile(`"(#[a-z0-9-]+)" has (\d+) messages in (\d+) threads from ([a-z0-9, -]+)\s*$`)

// busyRecipe is the index of the recipe whose busy room a feature's line
// declares, or -1.
func busyRecipe(line string, recipes []poolRecipe) int {
	m := busyLine.FindStringSubmatch(line)
	if m == nil {
		return -1
	}
	for i, r := range recipes {
		if r.Room == m[1] && strconv.Itoa(r.Total) == m[2] && strconv.Itoa(r.Threads) == m[3] && slices.Equal(r.Senders, bareList(m[4])) {
			return i
		}
	}
	return -1
}

// neededRecipes are the recipes whose busy room some feature under paths
// declares: a run that needs none starts Synapse without a snapshot, and
// builds none.
func neededRecipes(paths []string, recipes []poolRecipe) ([]poolRecipe, error) {
	want := map[int]bool{}
	for _, p := range paths {
		file, _, _ := strings.Cut(p, ":") // godog's file.feature:LINE
		err := filepath.WalkDir(file, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".feature") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, line := range strings.Split(string(src), "\n") {
				if i := busyRecipe(line, recipes); i >= 0 {
					want[i] = true
				}
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("looking for busy rooms in %s: %w", p, err)
		}
	}
	var out []poolRecipe
	for i, r := range recipes {
		if want[i] {
			out = append(out, r)
		}
	}
	return out, nil
}

// PrepareSnapshot finds or builds the Synapse snapshot that a Synapse run of
// the features under paths (default: the module's features/) starts from, and
// runs no scenario: CI builds it while the fake homeserver's stages run, and
// the Synapse pass then finds it (or, while the build is still going, waits on
// FindOrBuildSnapshot's lock rather than build it twice). Features that seed
// no busy room need no snapshot, and then nothing is done.
func PrepareSnapshot(ctx context.Context, paths []string, out io.Writer) error {
	if len(paths) == 0 {
		dir, err := FeaturesDir()
		if err != nil {
			return err
		}
		paths = []string{dir}
	}
	for i, p := range paths {
		paths[i] = findPath(p)
	}
	recipes, err := neededRecipes(paths, poolRecipes)
	if err != nil {
		return err
	}
	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	if len(recipes) == 0 {
		say("zooid sim: no feature under %s seeds a busy room: no snapshot to prepare", strings.Join(paths, ", "))
		return nil
	}
	if os.Getenv(SnapshotsEnv) == "off" {
		say("zooid sim: %s=off: the Synapse run seeds its rooms by sending, no snapshot to prepare", SnapshotsEnv)
		return nil
	}
	base := os.Getenv(synapse.ImageEnv)
	if base == "" {
		base = synapse.DefaultImage
	}
	_, _, err = snapshot(ctx, base, recipes, say)
	return err
}
