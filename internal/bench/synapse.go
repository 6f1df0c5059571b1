package bench

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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
}

// StartSynapse starts the container; Close removes it.
func StartSynapse(ctx context.Context) (*Synapse, error) {
	push := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("{}")) }))
	reg := &appservice.Registration{ID: "zooid-bench", URL: push.URL, AppToken: "as-" + rand.Text(), ServerToken: "hs-" + rand.Text(),
		SenderLocalpart: "zooid-bench",
		Namespaces:      appservice.Namespaces{UserIDs: appservice.NamespaceList{{Regex: "@(agent|bench)-.*:" + regexp.QuoteMeta("localhost"), Exclusive: true}}}}
	c, err := synapse.Run(ctx, synapse.WithAppservice(reg))
	if err != nil {
		push.Close()
		return nil, fmt.Errorf("starting synapse: %w", err)
	}
	return &Synapse{c: c, push: push, reg: reg, spent: map[string]time.Duration{}}, nil
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

// sendWorkers is how many messages are in flight at once while seeding:
// Synapse persists a room's events one batch at a time, and sends that wait
// in line make its batches bigger.
const sendWorkers = 8

// SeedRoom sends a room of n messages of SeedRoom's shape (one in ten
// top-level, one in ten in the long thread, the rest in the latest of 20
// open threads) and returns it read through zooid/history as agent-a. The
// messages go out in waves of 100, sendWorkers at a time; a reply in a wave
// joins a thread opened before that wave, so the threads' shape is
// SeedRoom's give or take one wave.
func (s *Synapse) SeedRoom(ctx context.Context, n int, logf func(string, ...any)) (*Room, error) {
	server := s.c.ServerName()
	human := id.NewUserID("bench-alice", server)
	agent := id.NewUserID("agent-a", server)
	hc, err := s.client(ctx, human, false)
	if err != nil {
		return nil, err
	}
	ac, err := s.client(ctx, agent, true)
	if err != nil {
		return nil, err
	}
	resp, err := hc.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "public_chat", Visibility: "private", Name: fmt.Sprintf("big %d", n)})
	if err != nil {
		return nil, fmt.Errorf("creating the room: %w", err)
	}
	room := resp.RoomID
	if _, err := ac.JoinRoom(ctx, string(room), nil); err != nil {
		return nil, fmt.Errorf("agent-a joining: %w", err)
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
		return nil, err
	}
	var roots []id.EventID // the open threads, as of the wave's start
	start := time.Now()
	const wave = 100
	for lo := 1; lo < n; lo += wave {
		hi := min(lo+wave, n)
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			first error
			next  = make(chan int)
		)
		for range sendWorkers {
			wg.Add(1)
			go func() { // owner: SeedRoom; ends when the wave's messages are sent
				defer wg.Done()
				for i := range next {
					var root id.EventID
					switch {
					case i%10 == 5:
						root = ids[0]
					case i%10 != 0 && len(roots) > 0:
						root = roots[i%len(roots)]
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
			return nil, first
		}
		for i := lo; i < hi; i++ {
			if i%10 == 0 {
				roots = append(roots, ids[i])
			}
		}
		if len(roots) > 20 {
			roots = roots[len(roots)-20:]
		}
		if logf != nil && (hi/1000 != (lo-1)/1000 || hi == n) {
			logf("Synapse room of %d: %d sent, %.0f a second", n, hi, float64(hi)/time.Since(start).Seconds())
		}
	}
	h := history.New(history.Options{Client: func(u id.UserID) *mautrix.Client {
		if u == agent {
			return ac
		}
		return nil
	}})
	return &Room{H: h, Long: ids[0], count: func() int { return int(s.reqs.Load()) }, spent: s.Spent,
		C: tools.Caller{Agent: "agent-a", UserID: agent, Transport: "matrix", Room: room, Rooms: []id.RoomID{room}}}, nil
}

func firstErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}
