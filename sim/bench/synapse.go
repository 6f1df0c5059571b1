package bench

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/zooid-dev/zooid/busyroom"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/appservice"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/docker/synapse"
	"github.com/zooid-dev/zooid/zooid/history"
	"github.com/zooid-dev/zooid/zooid/tools"
	"github.com/zooid-dev/zooid/zooid/zevent"
)

// Synapse is a real Synapse in a container (docker/synapse) with one
// appservice whose users send the bench's rooms and read them back, as
// SeedRoom does on fakehs.
type Synapse struct {
	c    *synapse.Container
	push *httptest.Server
	reg  *appservice.Registration
	// reqs counts the requests the reading clients made (Synapse has no
	// counter of its own to ask), and spent adds up their time by endpoint.
	reqs    atomic.Int64
	spentMu sync.Mutex
	spent   map[string]time.Duration
	pushMu  sync.Mutex
	pushed  map[id.EventID]bool // the events Synapse pushed to the appservice
	// Workers is how many sends SeedRoom keeps in flight (sendWorkers
	// when 0).
	Workers int
}

// StartSynapse starts the container from the Synapse test image; Close
// removes it.
func StartSynapse(ctx context.Context) (*Synapse, error) { return startSynapse(ctx) }

// startSynapse starts the container with the bench's appservice (fresh
// tokens each time: a snapshot keeps the registration's id, users and rooms,
// not its tokens) and opts.
func startSynapse(ctx context.Context, opts ...synapse.Option) (*Synapse, error) {
	s := &Synapse{spent: map[string]time.Duration{}, pushed: map[id.EventID]bool{}}
	s.push = httptest.NewServer(http.HandlerFunc(s.transaction))
	s.reg = &appservice.Registration{ID: "zooid-bench", URL: s.push.URL, AppToken: "as-" + rand.Text(), ServerToken: "hs-" + rand.Text(),
		SenderLocalpart: "zooid-bench",
		Namespaces:      appservice.Namespaces{UserIDs: appservice.NamespaceList{{Regex: "@(agent|bench)-.*:" + regexp.QuoteMeta("localhost"), Exclusive: true}}}}
	c, err := synapse.Run(ctx, append([]synapse.Option{synapse.WithAppservice(s.reg)}, opts...)...)
	if err != nil {
		s.push.Close()
		return nil, fmt.Errorf("starting synapse: %w", err)
	}
	s.c = c
	return s, nil
}

// transaction takes Synapse's appservice pushes and notes their events:
// a snapshot is committed only once Synapse has pushed what was sent, so a
// Synapse started from it has no backlog of pushes to make while it is read.
func (s *Synapse) transaction(w http.ResponseWriter, r *http.Request) {
	var txn struct {
		Events []struct {
			ID id.EventID `json:"event_id"`
		} `json:"events"`
	}
	if err := json.NewDecoder(r.Body).Decode(&txn); err == nil && len(txn.Events) > 0 {
		s.pushMu.Lock()
		for _, e := range txn.Events {
			s.pushed[e.ID] = true
		}
		s.pushMu.Unlock()
	}
	_, _ = w.Write([]byte("{}"))
}

// waitPushed waits until Synapse has pushed every event of ids.
func (s *Synapse) waitPushed(ctx context.Context, ids []id.EventID) error {
	for {
		s.pushMu.Lock()
		missing := 0
		for _, e := range ids {
			if !s.pushed[e] {
				missing++
			}
		}
		s.pushMu.Unlock()
		if missing == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for Synapse to push %d of %d events: %w", missing, len(ids), ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Close terminates the container.
func (s *Synapse) Close() error {
	defer s.push.Close()
	return s.c.Terminate(context.Background())
}

// countingTransport counts the requests it carries and times them by
// endpoint, until the response's headers (Synapse's answers are small).
type countingTransport struct{ s *Synapse }

func (t countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	t.s.reqs.Add(1)
	start := time.Now()
	resp, err := http.DefaultTransport.RoundTrip(r)
	el := time.Since(start)
	t.s.spentMu.Lock()
	t.s.spent[endpoint(r.URL.Path)] += el
	t.s.spentMu.Unlock()
	return resp, err
}

// endpoint names a client-server API path by what it asks a room for:
// /_matrix/client/v3/rooms/!r/messages is "messages", …/rooms/!r/state/… is
// "state".
func endpoint(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i, p := range parts {
		if p == "rooms" && i+2 < len(parts) {
			return parts[i+2]
		}
	}
	return parts[len(parts)-1]
}

// Spent is the time the reading clients' requests took so far, by endpoint.
func (s *Synapse) Spent() map[string]time.Duration {
	s.spentMu.Lock()
	defer s.spentMu.Unlock()
	return maps.Clone(s.spent)
}

// client acts as uid through the appservice, registering it first if new.
func (s *Synapse) client(ctx context.Context, uid id.UserID, counted bool) (*mautrix.Client, error) {
	cli, err := mautrix.NewClient(s.c.BaseURL(), uid, s.reg.AppToken)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", uid, err)
	}
	cli.SetAppServiceUserID = true
	if counted {
		cli.Client = &http.Client{Timeout: cli.Client.Timeout, Transport: countingTransport{s}}
	}
	_, _, err = cli.Register(ctx, &mautrix.ReqRegister[any]{Username: uid.Localpart(), Type: mautrix.AuthTypeAppservice, InhibitLogin: true})
	if err != nil && !errors.Is(err, mautrix.MUserInUse) {
		return nil, fmt.Errorf("registering %s through the appservice: %w", uid, err)
	}
	return cli, nil
}

// sendWorkers is how many messages are in flight at once while seeding. More
// is faster for a small room and ruinous for a large one: Synapse makes a new
// event's prev_events of at most 10 of the room's forward extremities, so with
// more than 10 sends in flight the extremities left over pile up (6,398 in a
// room of 12k sent 32 at a time), and each send sorts them all
// (get_prev_events_for_room) and resolves state across them. Sent 32 at a
// time, a room went from 105 events a second at 2k to 42 at 12k, with
// Synapse's CPU per event 10 → 25 ms; 8 at a time, 72–92 a second all the
// way to 12k, with about 7 extremities (2026-12-02, docs/performance.md,
// item 3).
const sendWorkers = 8

// SeedRoom sends a room of n messages of SeedRoom's shape (one in ten
// top-level, one in ten in the long thread, the rest in the latest of 20
// open threads) and returns it read through zooid/history as agent-a. The
// messages go out in waves of 100, Workers at a time; a reply in a wave
// joins a thread opened before that wave, so the threads' shape is
// SeedRoom's give or take one wave.
func (s *Synapse) SeedRoom(ctx context.Context, n int, logf func(string, ...any)) (*Room, error) {
	room, ids, err := s.seed(ctx, n, logf)
	if err != nil {
		return nil, err
	}
	return s.room(ctx, room, ids[0])
}

// seed sends SeedRoom's room and returns it and its messages' ids.
func (s *Synapse) seed(ctx context.Context, n int, logf func(string, ...any)) (id.RoomID, []id.EventID, error) {
	server := s.c.ServerName()
	human := id.NewUserID("bench-alice", server)
	agent := id.NewUserID("agent-a", server)
	hc, err := s.client(ctx, human, false)
	if err != nil {
		return "", nil, err
	}
	ac, err := s.client(ctx, agent, false)
	if err != nil {
		return "", nil, err
	}
	resp, err := hc.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "public_chat", Visibility: "private", Name: fmt.Sprintf("big %d", n)})
	if err != nil {
		return "", nil, fmt.Errorf("creating the room: %w", err)
	}
	room := resp.RoomID
	if _, err := ac.JoinRoom(ctx, string(room), nil); err != nil {
		return "", nil, fmt.Errorf("agent-a joining: %w", err)
	}
	ids := make([]id.EventID, n)
	send := func(i int, root id.EventID) error {
		content := map[string]any{"msgtype": "m.text", "body": fmt.Sprintf("message %d", i)}
		if root != "" {
			content["m.relates_to"] = zevent.ThreadReply(root, root)
		}
		sent, err := hc.SendMessageEvent(ctx, room, event.EventMessage, content)
		if err != nil {
			return fmt.Errorf("sending message %d of %d: %w", i+1, n, err)
		}
		ids[i] = sent.EventID
		return nil
	}
	if err := send(0, ""); err != nil {
		return "", nil, err
	}
	workers := s.Workers
	if workers <= 0 {
		workers = sendWorkers
	}
	layout := busyroom.PagedLayout(n, wave)
	start := time.Now()
	for lo := 1; lo < n; lo += wave {
		hi := min(lo+wave, n)
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			first error
			next  = make(chan int)
		)
		for range workers {
			wg.Add(1)
			go func() { // owner: seed; ends when the wave's messages are sent
				defer wg.Done()
				for i := range next {
					var root id.EventID
					if r := layout[i]; r >= 0 {
						root = ids[r] // sent in an earlier wave
					}
					if err := send(i, root); err != nil {
						mu.Lock()
						first = firstErr(first, err)
						mu.Unlock()
					}
				}
			}()
		}
		for i := lo; i < hi; i++ {
			next <- i
		}
		close(next)
		wg.Wait()
		if first != nil {
			return "", nil, first
		}
		if logf != nil && (hi/1000 != (lo-1)/1000 || hi == n) {
			logf("Synapse room of %d: %d sent, %.0f a second", n, hi, float64(hi)/time.Since(start).Seconds())
		}
	}
	return room, ids, nil
}

// wave is how many messages SeedRoom sends before the next wave may reply
// to the threads they opened.
const wave = 100

// room is a seeded room read through zooid/history as agent-a, by a client
// that counts and times its requests; long is the root of its long thread.
func (s *Synapse) room(ctx context.Context, room id.RoomID, long id.EventID) (*Room, error) {
	agent := id.NewUserID("agent-a", s.c.ServerName())
	ac, err := s.client(ctx, agent, true)
	if err != nil {
		return nil, err
	}
	h := history.New(history.Options{Client: func(u id.UserID) *mautrix.Client {
		if u == agent {
			return ac
		}
		return nil
	}})
	return &Room{H: h, Long: long, count: func() int { return int(s.reqs.Load()) }, spent: s.Spent,
		C: tools.Caller{Agent: "agent-a", UserID: agent, Transport: "matrix", Room: room, Rooms: []id.RoomID{room}}}, nil
}

func firstErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// Bench rooms on Synapse come from a chain of snapshot images
// (docker/synapse's FindOrBuildSnapshot, as the feature suite's busy rooms
// do): the first holds the smallest room, sent to a Synapse started from the
// test image; each next one is a Synapse started from the one before with the
// next room sent to it. A link's key is the id of the image below it and its
// recipe (SeedRoom's shape and the room's size), so sizes already built are
// reused, a new largest size costs only its own sending, and a changed
// Synapse image or shape rebuilds the chain.

// snapshotRepo is the image repository of the bench's snapshots.
const snapshotRepo = "zooid-bench-synapse-snapshot"

// snapshotVersion is part of the key: bump it when the way a link is built
// or described changes.
const snapshotVersion = 1

// roomShape describes SeedRoom's shape in the key: change it (or
// snapshotVersion) when seed sends a different room.
const roomShape = "seedroom: message 0 roots the long thread; i%10==0 top-level, i%10==5 in the long thread, else in the latest 20 open threads (i mod their count); waves of 100"

// roomsLabel carries the rooms a snapshot holds, as JSON []SnapshotRoom.
const roomsLabel = "dev.zooid.bench.rooms"

// snapshotLink is a link's recipe: one room of Events messages.
type snapshotLink struct {
	Shape  string `json:"shape"`
	Events int    `json:"events"`
}

// SnapshotRoom is a room a bench snapshot holds and how it was sent.
type SnapshotRoom struct {
	Events  int        `json:"events"`
	Room    id.RoomID  `json:"room"`
	Long    id.EventID `json:"long"` // the root of its long thread
	Image   string     `json:"image"`
	Built   time.Time  `json:"built"`
	Send    float64    `json:"send_seconds"` // sending it took, at Workers in flight
	Workers int        `json:"workers"`
}

// SnapshotRooms starts Synapse from the snapshot that holds a room of each
// of sizes (ascending), building what of the chain is missing first, and
// returns it with the rooms by size and how each was sent.
func SnapshotRooms(ctx context.Context, sizes []int, logf func(string, ...any)) (*Synapse, map[int]*Room, []SnapshotRoom, error) {
	return snapshotRooms(ctx, snapshotRepo, sizes, logf)
}

// snapshotRooms is SnapshotRooms with the snapshots in repo.
func snapshotRooms(ctx context.Context, repo string, sizes []int, logf func(string, ...any)) (*Synapse, map[int]*Room, []SnapshotRoom, error) {
	if !slices.IsSorted(sizes) || len(sizes) == 0 {
		return nil, nil, nil, fmt.Errorf("synapse bench rooms: sizes %v are not ascending", sizes)
	}
	base := os.Getenv(synapse.ImageEnv)
	if base == "" {
		base = synapse.DefaultImage
	}
	var have []SnapshotRoom
	for i, size := range sizes {
		first := i == 0
		ref, img, built, err := synapse.FindOrBuildSnapshot(ctx, base, synapse.SnapshotSpec{
			Repo: repo, Version: snapshotVersion, Recipe: snapshotLink{Shape: roomShape, Events: size},
			Build: func(ctx context.Context, base, ref string) error {
				return buildLink(ctx, base, ref, first, size, have, logf)
			},
		}, logf)
		if err != nil {
			return nil, nil, nil, err
		}
		if err := json.Unmarshal([]byte(img.Labels[roomsLabel]), &have); err != nil {
			return nil, nil, nil, fmt.Errorf("snapshot %s: reading its rooms label: %w", ref, err)
		}
		if len(have) != i+1 || have[i].Events != size {
			return nil, nil, nil, fmt.Errorf("snapshot %s holds %d rooms, the last of %d events; want %d, the last of %d", ref, len(have), have[len(have)-1].Events, i+1, size)
		}
		if built {
			logf("Synapse snapshot %s built: a room of %d sent in %.0f s", ref, size, have[i].Send)
		} else {
			logf("Synapse snapshot %s reused: a room of %d, sent %s", ref, size, have[i].Built.Format(time.RFC3339))
		}
		base = ref
	}
	s, err := startSynapse(ctx, synapse.FromSnapshot(base))
	if err != nil {
		return nil, nil, nil, err
	}
	rooms := map[int]*Room{}
	for _, h := range have {
		r, err := s.room(ctx, h.Room, h.Long)
		if err != nil {
			_ = s.Close()
			return nil, nil, nil, err
		}
		rooms[h.Events] = r
	}
	return s, rooms, have, nil
}

// buildLink starts Synapse from base (the test image when first, else the
// snapshot below), sends a room of size to it, waits until Synapse has pushed
// the last wave to the appservice, and commits it as ref with have and the
// new room in its rooms label.
func buildLink(ctx context.Context, base, ref string, first bool, size int, have []SnapshotRoom, logf func(string, ...any)) error {
	opt := synapse.FromSnapshot(base)
	if first {
		opt = synapse.WithImage(base)
	}
	s, err := startSynapse(ctx, opt)
	if err != nil {
		return err
	}
	defer func() { _ = s.Close() }()
	start := time.Now()
	room, ids, err := s.seed(ctx, size, logf)
	if err != nil {
		return err
	}
	send := time.Since(start)
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if err := s.waitPushed(wctx, ids[max(0, len(ids)-wave):]); err != nil {
		return err
	}
	workers := s.Workers
	if workers <= 0 {
		workers = sendWorkers
	}
	rooms := append(slices.Clone(have), SnapshotRoom{Events: size, Room: room, Long: ids[0], Image: base, Built: start.UTC(), Send: send.Seconds(), Workers: workers})
	b, err := json.Marshal(rooms)
	if err != nil {
		return fmt.Errorf("encoding the snapshot's rooms: %w", err)
	}
	return s.c.Commit(ctx, ref, nil, map[string]string{roomsLabel: string(b), synapse.RoleLabel: "test-synapse-snapshot"})
}
