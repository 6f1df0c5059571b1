package matrix

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zooid-dev/zooid/internal/freeport"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/fakehs"
	"github.com/zooid-dev/zooid/zooid/config"
)

const (
	testAS = "as-secret"
	testHS = "hs-secret"
)

var (
	userA = id.UserID("@agent-a:localhost")
	userB = id.UserID("@agent-b:localhost")
)

func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("ZOOID_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// freeAddr picks a loopback port for the push listener, which fakehs must know before it
// starts.
func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

type env struct {
	hs    *fakehs.Server
	opts  Options
	human *mautrix.Client
}

// newEnv starts fakehs with the registration for two agents. push selects push mode.
func newEnv(t *testing.T, push bool) *env {
	t.Helper()
	opts := Options{
		ServerName: "localhost",
		ASToken:    testAS,
		HSToken:    testHS,
		StateDir:   t.TempDir(),
		Logger:     testLogger(t),
		Agents: []Agent{
			{Name: "agent-a", UserID: userA, DisplayName: "Agent A", Rooms: []config.RoomRef{"#general:localhost"}},
			{Name: "agent-b", UserID: userB, DisplayName: "Agent B", Rooms: []config.RoomRef{"#general:localhost", "#side:localhost"}},
		},
		// The daemon creates #general private; alice is the operator's human in it.
		Rooms: map[config.RoomRef]config.Room{"#general:localhost": {Invite: []id.UserID{"@alice:localhost"}}},
	}
	url := ""
	if push {
		opts.Listen = freeAddr(t)
		opts.ID = "zooid" // so Start checks the registration with a ping
		url = "http://" + opts.Listen
	}
	hs := fakehs.New(t, fakehs.WithServerName("localhost"), fakehs.WithAppservice(Registration(opts, url)), fakehs.WithLogger(opts.Logger))
	opts.Homeserver = hs.URL()
	uid, tok, err := hs.RegisterUser("alice", "Alice")
	if err != nil {
		t.Fatal(err)
	}
	human, err := mautrix.NewClient(hs.URL(), uid, tok)
	if err != nil {
		t.Fatal(err)
	}
	return &env{hs: hs, opts: opts, human: human}
}

// recorder collects handled events.
type recorder struct {
	mu   sync.Mutex
	evs  []*event.Event
	kick chan struct{}
}

func newRecorder() *recorder { return &recorder{kick: make(chan struct{}, 1)} }

func (r *recorder) handle(_ context.Context, ev *event.Event) {
	r.mu.Lock()
	r.evs = append(r.evs, ev)
	r.mu.Unlock()
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// bodies lists the bodies of handled m.room.message events in room.
func (r *recorder) bodies(room id.RoomID) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, ev := range r.evs {
		if ev.RoomID == room && ev.Type == event.EventMessage {
			out = append(out, ev.Content.AsMessage().Body)
		}
	}
	return out
}

// waitBodies waits until the handled bodies in room are exactly want.
func (r *recorder) waitBodies(t *testing.T, room id.RoomID, want ...string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		got := r.bodies(room)
		if slices.Equal(got, want) {
			return
		}
		if len(got) > len(want) {
			t.Fatalf("handled %q, want %q", got, want)
		}
		select {
		case <-r.kick:
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out: handled %q, want %q", got, want)
		}
	}
}

// start runs a Transport until the test ends.
func start(t *testing.T, opts Options, h Handler, tune ...func(*Transport)) *Transport {
	t.Helper()
	tr, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	tr.backoffBase = 20 * time.Millisecond
	tr.syncTimeout = 2 * time.Second
	for _, f := range tune {
		f(tr)
	}
	errc := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { errc <- tr.Start(ctx, h) }()
	t.Cleanup(func() {
		cancel()
		if err := tr.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	select {
	case <-tr.Ready():
	case err := <-errc:
		t.Fatalf("start: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("transport not ready")
	}
	return tr
}

func sendText(t *testing.T, cli *mautrix.Client, room id.RoomID, body string) id.EventID {
	t.Helper()
	resp, err := cli.SendText(context.Background(), room, body)
	if err != nil {
		t.Fatalf("sending %q: %v", body, err)
	}
	return resp.EventID
}

func TestStartRegistersAndJoins(t *testing.T) {
	e := newEnv(t, true)
	ctx := context.Background()
	// #side exists already (created by a human); #general doesn't and gets created.
	side, err := e.human.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "public_chat", RoomAliasName: "side"})
	if err != nil {
		t.Fatal(err)
	}
	tr := start(t, e.opts, newRecorder().handle)

	general, ok := tr.RoomID("#general:localhost")
	if !ok {
		t.Fatal("#general not resolved")
	}
	if hsGeneral, ok := e.hs.RoomIDForAlias("#general:localhost"); !ok || hsGeneral != general {
		t.Fatalf("#general = %s, homeserver has %s (%v)", general, hsGeneral, ok)
	}
	if got, _ := tr.RoomID("#side:localhost"); got != side.RoomID {
		t.Fatalf("#side = %s, want %s", got, side.RoomID)
	}
	for _, c := range []struct {
		user  id.UserID
		name  string
		rooms []id.RoomID
	}{
		{userA, "Agent A", []id.RoomID{general}},
		{userB, "Agent B", []id.RoomID{general, side.RoomID}},
	} {
		prof, err := e.human.GetDisplayName(ctx, c.user)
		if err != nil || prof.DisplayName != c.name {
			t.Errorf("display name of %s = %+v, %v; want %q", c.user, prof, err, c.name)
		}
		joined, err := tr.Client(c.user).JoinedRooms(ctx)
		if err != nil {
			t.Fatalf("joined rooms of %s: %v", c.user, err)
		}
		for _, r := range c.rooms {
			if !slices.Contains(joined.JoinedRooms, r) {
				t.Errorf("%s is not in %s (joined %v)", c.user, r, joined.JoinedRooms)
			}
		}
	}
	// A second start against the same homeserver finds users and rooms in place.
	opts := e.opts
	opts.StateDir = t.TempDir()
	opts.Listen = "127.0.0.1:0"
	opts.ID = "" // the registration's url leads to the first transport, which the ping check would catch
	tr2 := start(t, opts, newRecorder().handle)
	if got, _ := tr2.RoomID("#general:localhost"); got != general {
		t.Fatalf("second start resolved #general to %s, want %s", got, general)
	}
}

func TestPushDeliversHumanMessages(t *testing.T) {
	e := newEnv(t, true)
	rec := newRecorder()
	tr := start(t, e.opts, rec.handle)
	general, _ := tr.RoomID("#general:localhost")
	ctx := context.Background()
	if _, err := e.human.JoinRoomByID(ctx, general); err != nil {
		t.Fatal(err)
	}
	sendText(t, e.human, general, "hello agents")
	sendText(t, e.human, general, "second")
	// Agents' own posts reach the handler too; the router decides what they mean.
	if _, err := tr.Send(ctx, userA, general, event.EventMessage, &event.MessageEventContent{MsgType: event.MsgNotice, Body: "agent says"}, "t-1"); err != nil {
		t.Fatal(err)
	}
	rec.waitBodies(t, general, "hello agents", "second", "agent says")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, ev := range rec.evs {
		if ev.ID == "" || ev.Sender == "" || ev.Type.Class != event.MessageEventType && ev.StateKey == nil {
			t.Errorf("badly decoded event %+v", ev)
		}
	}
}

// putTxn pushes a transaction by hand, as a homeserver would.
func putTxn(t *testing.T, pushURL, path, auth, body string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, pushURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = resp.Body.Close() })
	return resp
}

func txnBody(room id.RoomID, evs ...string) string {
	var parts []string
	for _, eid := range evs {
		parts = append(parts, fmt.Sprintf(`{"type":"m.room.message","event_id":%q,"room_id":%q,"sender":"@alice:localhost","origin_server_ts":1,"content":{"msgtype":"m.text","body":%q}}`, eid, room, "body "+eid))
	}
	return `{"events":[` + strings.Join(parts, ",") + `]}`
}

func TestReplayedTransactionDeliveredOnce(t *testing.T) {
	e := newEnv(t, true)
	rec := newRecorder()
	tr := start(t, e.opts, rec.handle)
	general, _ := tr.RoomID("#general:localhost")
	for _, path := range []string{"/_matrix/app/v1/transactions/manual-1", "/_matrix/app/v1/transactions/manual-1", "/transactions/manual-1"} {
		if resp := putTxn(t, tr.PushURL(), path, "Bearer "+testHS, txnBody(general, "$m1", "$m2")); resp.StatusCode != http.StatusOK {
			t.Fatalf("PUT %s = %d", path, resp.StatusCode)
		}
	}
	// A new txn id carrying one old and one new event: only the new one is handled.
	if resp := putTxn(t, tr.PushURL(), "/_matrix/app/v1/transactions/manual-2?access_token="+testHS, "", txnBody(general, "$m2", "$m3")); resp.StatusCode != http.StatusOK {
		t.Fatalf("second txn = %d", resp.StatusCode)
	}
	// Events of rooms no agent is bound to are not handled.
	if resp := putTxn(t, tr.PushURL(), "/_matrix/app/v1/transactions/manual-3", "Bearer "+testHS, txnBody("!elsewhere:localhost", "$x1")); resp.StatusCode != http.StatusOK {
		t.Fatalf("third txn = %d", resp.StatusCode)
	}
	if resp := putTxn(t, tr.PushURL(), "/_matrix/app/v1/transactions/manual-4", "Bearer "+testHS, txnBody(general, "$m4")); resp.StatusCode != http.StatusOK {
		t.Fatalf("fourth txn = %d", resp.StatusCode)
	}
	rec.waitBodies(t, general, "body $m1", "body $m2", "body $m3", "body $m4")
	if got := rec.bodies("!elsewhere:localhost"); len(got) != 0 {
		t.Fatalf("unbound room delivered %v", got)
	}
}

func TestPushResumesAfterRestart(t *testing.T) {
	e := newEnv(t, true)
	ctx := context.Background()
	tr1, err := New(e.opts)
	if err != nil {
		t.Fatal(err)
	}
	rec1 := newRecorder()
	ctx1, cancel1 := context.WithCancel(ctx)
	done1 := make(chan error, 1)
	go func() { done1 <- tr1.Start(ctx1, rec1.handle) }()
	t.Cleanup(func() { cancel1(); _ = tr1.Close() })
	select {
	case <-tr1.Ready():
	case err := <-done1:
		t.Fatal(err)
	}
	general, _ := tr1.RoomID("#general:localhost")
	if _, err := e.human.JoinRoomByID(ctx, general); err != nil {
		t.Fatal(err)
	}
	sendText(t, e.human, general, "before")
	rec1.waitBodies(t, general, "before")
	if err := tr1.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done1; err != nil {
		t.Fatal(err)
	}
	// The homeserver can't push while the daemon is down; it keeps retrying.
	sendText(t, e.human, general, "during")
	rec2 := newRecorder()
	start(t, e.opts, rec2.handle)
	sendText(t, e.human, general, "after")
	rec2.waitBodies(t, general, "during", "after")
}

func TestPushAuth(t *testing.T) {
	e := newEnv(t, true)
	rec := newRecorder()
	tr := start(t, e.opts, rec.handle)
	general, _ := tr.RoomID("#general:localhost")
	body := txnBody(general, "$auth")
	cases := []struct {
		path, auth string
		status     int
		errcode    string
	}{
		{"/_matrix/app/v1/transactions/a1", "", http.StatusUnauthorized, "M_UNAUTHORIZED"},
		{"/_matrix/app/v1/transactions/a2", "Bearer wrong", http.StatusForbidden, "M_FORBIDDEN"},
		{"/_matrix/app/v1/transactions/a3", "Bearer " + testAS, http.StatusForbidden, "M_FORBIDDEN"},
		{"/_matrix/app/v1/transactions/a4?access_token=nope", "", http.StatusForbidden, "M_FORBIDDEN"},
		{"/transactions/a5", "Basic " + testHS, http.StatusUnauthorized, "M_UNAUTHORIZED"},
	}
	for _, c := range cases {
		resp := putTxn(t, tr.PushURL(), c.path, c.auth, body)
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != c.status || !strings.Contains(string(b), c.errcode) {
			t.Errorf("PUT %s auth %q = %d %s, want %d %s", c.path, c.auth, resp.StatusCode, b, c.status, c.errcode)
		}
	}
	// Query endpoints: authenticated → 404 M_NOT_FOUND; unauthenticated → 401.
	for _, path := range []string{"/_matrix/app/v1/users/@nobody:localhost", "/_matrix/app/v1/rooms/%23nothing:localhost", "/users/@x:localhost", "/rooms/%23y:localhost"} {
		for _, c := range []struct {
			auth   string
			status int
		}{{"Bearer " + testHS, http.StatusNotFound}, {"", http.StatusUnauthorized}} {
			req, _ := http.NewRequest(http.MethodGet, tr.PushURL()+path, nil)
			if c.auth != "" {
				req.Header.Set("Authorization", c.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != c.status || !strings.Contains(string(b), `"errcode"`) {
				t.Errorf("GET %s auth %q = %d %s, want %d with errcode", path, c.auth, resp.StatusCode, b, c.status)
			}
		}
	}
	// Bad JSON is refused (and so not acknowledged).
	if resp := putTxn(t, tr.PushURL(), "/_matrix/app/v1/transactions/bad", "Bearer "+testHS, "{not json"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("bad JSON = %d, want 400", resp.StatusCode)
	}
	// Nothing from the refused requests was handled; a good one still is.
	if resp := putTxn(t, tr.PushURL(), "/_matrix/app/v1/transactions/good", "Bearer "+testHS, txnBody(general, "$ok")); resp.StatusCode != http.StatusOK {
		t.Fatalf("good txn = %d", resp.StatusCode)
	}
	rec.waitBodies(t, general, "body $ok")
}

func TestPushListenerCutsOffSlowAndIdleClients(t *testing.T) {
	e := newEnv(t, true)
	rec := newRecorder()
	tr := start(t, e.opts, rec.handle, func(tr *Transport) {
		tr.server.ReadHeaderTimeout = 300 * time.Millisecond
		tr.server.ReadTimeout = 300 * time.Millisecond
		tr.server.IdleTimeout = 300 * time.Millisecond
	})
	general, _ := tr.RoomID("#general:localhost")
	addr := strings.TrimPrefix(tr.PushURL(), "http://")
	// cutOff reports whether the listener ended conn within 10s, far longer
	// than its 300ms timeouts.
	cutOff := func(conn net.Conn) bool {
		_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err := io.Copy(io.Discard, conn)
		var ne net.Error
		return !(errors.As(err, &ne) && ne.Timeout())
	}

	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	if !cutOff(idle) {
		t.Error("a connection that sent nothing was still open after 10s")
	}

	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	body := txnBody(general, "$slow")
	fmt.Fprintf(slow, "PUT /_matrix/app/v1/transactions/slow HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n\r\n", testHS, len(body))
	done := make(chan struct{})
	defer close(done)
	go func() {
		// One byte every 100ms: the whole body would take many seconds.
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for i := range len(body) {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if _, err := slow.Write([]byte{body[i]}); err != nil {
				return
			}
		}
	}()
	if !cutOff(slow) {
		t.Error("a client dribbling its transaction body was still connected after 10s")
	}
	// The cut-off transaction was not recorded; a prompt one still is.
	if resp := putTxn(t, tr.PushURL(), "/_matrix/app/v1/transactions/prompt", "Bearer "+testHS, txnBody(general, "$prompt")); resp.StatusCode != http.StatusOK {
		t.Fatalf("prompt txn = %d", resp.StatusCode)
	}
	rec.waitBodies(t, general, "body $prompt")
}

func TestSyncModeResumesAcrossRestart(t *testing.T) {
	e := newEnv(t, false)
	ctx := context.Background()
	// Old history before the first start must not be delivered.
	pre, err := e.human.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "public_chat", RoomAliasName: "general"})
	if err != nil {
		t.Fatal(err)
	}
	sendText(t, e.human, pre.RoomID, "old history")

	rec1 := newRecorder()
	opts := e.opts
	tr1, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	tr1.backoffBase, tr1.syncTimeout = 20*time.Millisecond, time.Second
	ctx1, cancel1 := context.WithCancel(ctx)
	done1 := make(chan error, 1)
	go func() { done1 <- tr1.Start(ctx1, rec1.handle) }()
	t.Cleanup(func() { cancel1(); _ = tr1.Close() })
	select {
	case <-tr1.Ready():
	case err := <-done1:
		t.Fatal(err)
	}
	sendText(t, e.human, pre.RoomID, "one")
	sendText(t, e.human, pre.RoomID, "two")
	rec1.waitBodies(t, pre.RoomID, "one", "two")
	cancel1()
	if err := <-done1; err != nil {
		t.Fatalf("Start returned %v", err)
	}
	if err := tr1.Close(); err != nil {
		t.Fatal(err)
	}

	// While the daemon is down.
	sendText(t, e.human, pre.RoomID, "three")
	rec2 := newRecorder()
	tr2 := start(t, opts, rec2.handle)
	sendText(t, e.human, pre.RoomID, "four")
	rec2.waitBodies(t, pre.RoomID, "three", "four")
	if _, ok := tr2.RoomID("#general:localhost"); !ok {
		t.Fatal("room not resolved after restart")
	}
}

func TestSyncFillsGapAfterDowntime(t *testing.T) {
	e := newEnv(t, false)
	ctx := context.Background()
	small := func(tr *Transport) { tr.syncTimelineLimit = 3 }
	ctx1, cancel1 := context.WithCancel(ctx)
	tr1, err := New(e.opts)
	if err != nil {
		t.Fatal(err)
	}
	small(tr1)
	done1 := make(chan error, 1)
	go func() { done1 <- tr1.Start(ctx1, newRecorder().handle) }()
	t.Cleanup(func() { cancel1(); _ = tr1.Close() })
	select {
	case <-tr1.Ready():
	case err := <-done1:
		t.Fatal(err)
	}
	general, _ := tr1.RoomID("#general:localhost")
	if _, err := e.human.JoinRoomByID(ctx, general); err != nil {
		t.Fatal(err)
	}
	cancel1()
	<-done1
	if err := tr1.Close(); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 11 {
		want = append(want, fmt.Sprintf("while down %d", i))
		sendText(t, e.human, general, want[i])
	}
	rec := newRecorder()
	start(t, e.opts, rec.handle, small)
	rec.waitBodies(t, general, want...)
}

func TestSyncRecoversFromFailures(t *testing.T) {
	e := newEnv(t, false)
	rec := newRecorder()
	// Injected before the loops start, so no /sync already long-polling
	// can carry the message past the storm.
	h := e.hs.InjectFault(fakehs.Fault{Method: http.MethodGet, PathPattern: "/_matrix/client/v3/sync", Status: http.StatusBadGateway, Errcode: "M_UNKNOWN", Count: 4})
	tr := start(t, e.opts, rec.handle)
	general, _ := tr.RoomID("#general:localhost")
	ctx := context.Background()
	if _, err := e.human.JoinRoomByID(ctx, general); err != nil {
		t.Fatal(err)
	}
	sendText(t, e.human, general, "through the storm")
	rec.waitBodies(t, general, "through the storm")
	if n := h.Hits(); n != 4 {
		t.Fatalf("the 502 fault fired %d times, want 4: the storm was not weathered", n)
	}
}

func TestInboxSurvivesRestart(t *testing.T) {
	e := newEnv(t, true)
	// Simulate a crash after a transaction was acknowledged but before its events were
	// handled: they sit in the inbox of the state dir.
	tr, err := New(e.opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tr.store.record(batch{txnID: "pre", events: []inboxRecord{{Event: []byte(`{"type":"m.room.message","event_id":"$pending","room_id":"!placeholder:localhost","sender":"@alice:localhost","content":{"msgtype":"m.text","body":"waiting"}}`)}}}); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	// The event's room must be bound for delivery, so bind the agents to it by id.
	ctx := context.Background()
	room, err := e.human.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "public_chat"})
	if err != nil {
		t.Fatal(err)
	}
	opts := e.opts
	opts.Agents = slices.Clone(opts.Agents)
	opts.Agents[0].Rooms = []config.RoomRef{config.RoomRef(room.RoomID)}
	tr, err = New(opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tr.store.record(batch{events: []inboxRecord{{Event: []byte(fmt.Sprintf(`{"type":"m.room.message","event_id":"$pending2","room_id":%q,"sender":"@alice:localhost","content":{"msgtype":"m.text","body":"also waiting"}}`, room.RoomID))}}}); err != nil {
		t.Fatal(err)
	}
	_ = tr.Close()
	rec := newRecorder()
	start(t, opts, rec.handle)
	rec.waitBodies(t, room.RoomID, "also waiting")
	if got := rec.bodies("!placeholder:localhost"); len(got) != 0 {
		t.Fatalf("unbound room delivered %v", got)
	}
}

func TestSendRetriesWithSameTxn(t *testing.T) {
	e := newEnv(t, true)
	tr := start(t, e.opts, newRecorder().handle)
	general, _ := tr.RoomID("#general:localhost")
	ctx := context.Background()
	sendPath := "/_matrix/client/v3/rooms/*/send/m.room.message/*"
	countBody := func(body string) int {
		n := 0
		for _, ev := range e.hs.Events(general) {
			if ev.Type == event.EventMessage {
				if ev.Content.AsMessage().Body == body {
					n++
				}
			}
		}
		return n
	}
	msg := func(b string) *event.MessageEventContent {
		return &event.MessageEventContent{MsgType: event.MsgNotice, Body: b}
	}

	limited := e.hs.InjectFault(fakehs.Fault{Method: http.MethodPut, PathPattern: sendPath, Status: http.StatusTooManyRequests, Errcode: "M_LIMIT_EXCEEDED", RetryAfter: 30 * time.Millisecond, Count: 2})
	eid, err := tr.Send(ctx, userA, general, event.EventMessage, msg("rate limited"), "txn-429")
	if err != nil {
		t.Fatalf("send through 429s: %v", err)
	}
	again, err := tr.Send(ctx, userA, general, event.EventMessage, msg("rate limited"), "txn-429")
	if err != nil || again != eid {
		t.Fatalf("resend with same txn = %s, %v; want %s", again, err, eid)
	}
	if n := countBody("rate limited"); n != 1 {
		t.Fatalf("%d events posted, want 1", n)
	}
	if n := limited.Hits(); n != 2 {
		t.Fatalf("the 429 fault fired %d times, want 2", n)
	}

	failed := e.hs.InjectFault(fakehs.Fault{Method: http.MethodPut, PathPattern: sendPath, Status: http.StatusInternalServerError, Errcode: "M_UNKNOWN", Count: 1})
	dropped := e.hs.InjectFault(fakehs.Fault{Method: http.MethodPut, PathPattern: sendPath, Drop: true, Count: 1})
	if _, err := tr.Send(ctx, userB, general, event.EventMessage, msg("flaky"), "txn-5xx"); err != nil {
		t.Fatalf("send through 500 and a dropped connection: %v", err)
	}
	if n := countBody("flaky"); n != 1 {
		t.Fatalf("%d flaky events posted, want 1", n)
	}
	if f, d := failed.Hits(), dropped.Hits(); f != 1 || d != 1 {
		t.Fatalf("the 500 fault fired %d times and the drop %d, want 1 each", f, d)
	}

	forbidden := e.hs.InjectFault(fakehs.Fault{Method: http.MethodPut, PathPattern: sendPath, Status: http.StatusForbidden, Errcode: "M_FORBIDDEN", Count: 2})
	_, err = tr.Send(ctx, userA, general, event.EventMessage, msg("forbidden"), "txn-403")
	var httpErr mautrix.HTTPError
	if err == nil || !strings.Contains(err.Error(), "M_FORBIDDEN") || !errors.As(err, &httpErr) {
		t.Fatalf("403 send err = %v, want M_FORBIDDEN", err)
	}
	// Not retried: the second programmed 403 is still there for the next request.
	if _, err := tr.Send(ctx, userA, general, event.EventMessage, msg("forbidden"), "txn-403b"); err == nil {
		t.Fatal("second programmed 403 was consumed by a retry")
	}
	if _, err := tr.Send(ctx, userA, general, event.EventMessage, msg("fine"), "txn-ok"); err != nil {
		t.Fatalf("send after faults: %v", err)
	}
	if n := countBody("forbidden"); n != 0 {
		t.Fatalf("forbidden posted %d times", n)
	}
	if n := forbidden.Hits(); n != 2 {
		t.Fatalf("the 403 fault fired %d times, want 2", n)
	}
}

// A homeserver that makes the post and never answers holds one try only for
// the try's deadline; the retry, with the same txn id, gets the event the held
// try made, so it is posted once.
func TestSendGivesUpAnUnansweredTry(t *testing.T) {
	e := newEnv(t, true)
	tr := start(t, e.opts, newRecorder().handle, func(tr *Transport) { tr.sendTryLimit = 300 * time.Millisecond })
	general, _ := tr.RoomID("#general:localhost")
	held := e.hs.InjectFault(fakehs.Fault{Method: http.MethodPut, PathPattern: "/_matrix/client/v3/rooms/*/send/m.room.message/*", HoldResponse: true, Count: 1})
	start := time.Now()
	eid, err := tr.Send(context.Background(), userA, general, event.EventMessage, &event.MessageEventContent{MsgType: event.MsgNotice, Body: "held"}, "txn-held")
	if err != nil {
		t.Fatalf("send through a held try: %v", err)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Fatalf("the send returned after %v, before the held try's deadline", took)
	}
	if n := held.Hits(); n != 1 {
		t.Fatalf("the hold fired %d times, want 1", n)
	}
	n := 0
	for _, ev := range e.hs.Events(general) {
		if ev.Type == event.EventMessage && ev.Content.AsMessage().Body == "held" {
			n++
			if ev.ID != eid {
				t.Fatalf("the room has %s, the send returned %s", ev.ID, eid)
			}
		}
	}
	if n != 1 {
		t.Fatalf("%d events posted, want 1", n)
	}
}

// A send outlasts a homeserver that is down for more than sendAttempts tries
// and lands once it is back; without patience it gives up after those tries.
func TestSendRidesOutAHomeserverRestart(t *testing.T) {
	e := newEnv(t, true)
	tr := start(t, e.opts, newRecorder().handle)
	general, _ := tr.RoomID("#general:localhost")
	ctx := context.Background()
	sendPath := "/_matrix/client/v3/rooms/*/send/m.room.message/*"
	turnedAway := func(txn string) int {
		n := 0
		for _, r := range e.hs.TurnedAwayRequests() {
			if r.Method == http.MethodPut && strings.HasSuffix(r.Path, "/"+txn) {
				n++
			}
		}
		return n
	}
	down := tr.sendAttempts + 2
	if err := e.hs.StopUntil(fakehs.Fault{Method: http.MethodPut, PathPattern: sendPath, User: userA}, down); err != nil {
		t.Fatal(err)
	}
	msg := &event.MessageEventContent{MsgType: event.MsgNotice, Body: "through the outage"}
	eid, err := tr.Send(ctx, userA, general, event.EventMessage, msg, "txn-outage")
	if err != nil {
		t.Fatalf("send through a restart: %v; turned away %+v", err, e.hs.TurnedAwayRequests())
	}
	if n := turnedAway("txn-outage"); n != down {
		t.Fatalf("turned away %d tries of the send, want %d: %+v", n, down, e.hs.TurnedAwayRequests())
	}
	posted := 0
	for _, ev := range e.hs.Events(general) {
		if ev.Type == event.EventMessage && ev.Content.AsMessage().Body == msg.Body {
			posted++
			if ev.ID != eid {
				t.Fatalf("posted %s, Send returned %s", ev.ID, eid)
			}
		}
	}
	if posted != 1 {
		t.Fatalf("posted %d times, want once", posted)
	}

	tr.sendPatience = 0
	if err := e.hs.Stop(); err != nil {
		t.Fatal(err)
	}
	// The connection kept alive is closed now; the first try opens a new one
	// rather than fail on it unseen.
	// (The clients' retryReads sends through the transport's own pool.)
	tr.conns.CloseIdleConnections()
	if _, err := tr.Send(ctx, userA, general, event.EventMessage, msg, "txn-gives-up"); err == nil {
		t.Fatal("a send to a stopped homeserver without patience succeeded")
	}
	if n := turnedAway("txn-gives-up"); n != tr.sendAttempts {
		t.Fatalf("without patience the send was tried %d times, want %d", n, tr.sendAttempts)
	}
	if err := e.hs.Restart(); err != nil {
		t.Fatal(err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*Options)
		want string
	}{
		{"no homeserver", func(o *Options) { o.Homeserver = "" }, "homeserver and as_token are required"},
		{"no as token", func(o *Options) { o.ASToken = "" }, "homeserver and as_token are required"},
		{"push without hs token", func(o *Options) { o.HSToken = "" }, "a push listener needs hs_token"},
		{"no state dir", func(o *Options) { o.StateDir = "" }, "state dir is empty"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o := Options{Homeserver: "http://127.0.0.1:1", ASToken: "a", HSToken: "h", Listen: "127.0.0.1:0", StateDir: t.TempDir(),
				Agents: []Agent{{Name: "agent-a", UserID: userA, Rooms: []config.RoomRef{"#g:localhost"}}}}
			c.mod(&o)
			_, err := New(o)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want %q", err, c.want)
			}
		})
	}
}

func TestRegistration(t *testing.T) {
	reg := Registration(Options{ASToken: "a", HSToken: "h", Agents: []Agent{
		{UserID: userA, Rooms: []config.RoomRef{"#ops:localhost", "!id:localhost"}},
		{UserID: "@x.y:localhost", Rooms: []config.RoomRef{"#ops:localhost", "#dev.team:localhost"}},
	}}, "http://127.0.0.1:9")
	if reg.AppToken != "a" || reg.ServerToken != "h" || reg.URL != "http://127.0.0.1:9" || reg.ID != "zooid" || reg.SenderLocalpart != "zooid" {
		t.Fatalf("registration %+v, want the default id and sender zooid", reg)
	}
	// The config's id and sender_localpart reach the registration as they are.
	own := Registration(Options{ID: "ops-bots", SenderLocalpart: "ops-bot"}, "http://127.0.0.1:9")
	if own.ID != "ops-bots" || own.SenderLocalpart != "ops-bot" {
		t.Fatalf("registration with id ops-bots and sender ops-bot: %+v", own)
	}
	if len(reg.Namespaces.UserIDs) != 2 || !reg.Namespaces.UserIDs[0].Exclusive || reg.Namespaces.UserIDs[1].Regex != `^@x\.y:localhost$` {
		t.Fatalf("namespaces %+v", reg.Namespaces.UserIDs)
	}
	// Synapse lets an appservice create only aliases in its namespaces; humans may
	// share them, so they are not exclusive. Room ids need no namespace.
	aliases := reg.Namespaces.RoomAliases
	if len(aliases) != 2 || aliases[0].Regex != `^#ops:localhost$` || aliases[1].Regex != `^#dev\.team:localhost$` || aliases[0].Exclusive {
		t.Fatalf("alias namespaces %+v", aliases)
	}
}

func TestHandlerPanicDoesNotStopDelivery(t *testing.T) {
	e := newEnv(t, true)
	rec := newRecorder()
	tr := start(t, e.opts, func(ctx context.Context, ev *event.Event) {
		if ev.ID == "$boom" {
			panic("handler bug")
		}
		rec.handle(ctx, ev)
	})
	general, _ := tr.RoomID("#general:localhost")
	if resp := putTxn(t, tr.PushURL(), "/_matrix/app/v1/transactions/p1", "Bearer "+testHS, txnBody(general, "$boom", "$after")); resp.StatusCode != http.StatusOK {
		t.Fatalf("txn = %d", resp.StatusCode)
	}
	rec.waitBodies(t, general, "body $after")
}

// TestManyMessagesInOrder: forty messages reach the handler in their room's
// order; and the dispatcher, which deletes handled records in batches behind
// the workers, has deleted every one of them by the time the transport is
// closed (none would be delivered again at the next start).
func TestManyMessagesInOrder(t *testing.T) {
	e := newEnv(t, true)
	rec := newRecorder()
	tr := start(t, e.opts, rec.handle)
	general, _ := tr.RoomID("#general:localhost")
	if _, err := e.human.JoinRoomByID(context.Background(), general); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range 40 {
		want = append(want, fmt.Sprintf("msg %02d", i))
		sendText(t, e.human, general, want[i])
	}
	rec.waitBodies(t, general, want...)
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := openStore(e.opts.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	left, err := st.pendingAfter(0)
	if cerr := st.close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("%d handled records still in the inbox after close; want 0", len(left))
	}
}

func TestOptionsFromConfig(t *testing.T) {
	cfg, err := config.Parse([]byte(`transports:
  matrix:
    homeserver: http://127.0.0.1:8008
    server_name: example.org
    as_token: as-0123456789abcdef
    hs_token: hs-0123456789abcdef
    listen: 127.0.0.1:9000
  hooks: { type: http, port: 3000 }
state_dir: /var/lib/zooid
agents:
  a:
    acp: { preset: pi }
    matrix: { user_id: '@a', display_name: A, rooms: ['#r', '!x:example.org'] }
  web:
    acp: { preset: pi }
    http: {}
`), "zooid.yaml", nil)
	if err != nil {
		t.Fatal(err)
	}
	tr, _ := cfg.Transport("matrix")
	got := OptionsFromConfig(cfg, tr.Matrix)
	want := Options{Homeserver: "http://127.0.0.1:8008", ServerName: "example.org", ASToken: "as-0123456789abcdef", HSToken: "hs-0123456789abcdef", HSTokenFrom: "hs_token (written inline in zooid.yaml)",
		ID: "zooid", SenderLocalpart: "zooid", Listen: "127.0.0.1:9000", StateDir: "/var/lib/zooid/matrix", PostTimeout: config.DefaultPostTimeout,
		Agents: []Agent{{Name: "a", UserID: "@a:example.org", DisplayName: "A", Rooms: []config.RoomRef{"#r:example.org", "!x:example.org"}}}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("options\n got %+v\nwant %+v", got, want)
	}
}

// TestARefusedRoomCostsOnlyThatRoom: a room the homeserver refuses is logged with what to fix
// and left unserved, and every other room and agent is served. Before, one refused room
// stopped the start, and with it every agent.
func TestARefusedRoomCostsOnlyThatRoom(t *testing.T) {
	e := newEnv(t, true)
	ctx := context.Background()
	// A private room agent-a is in, which agent-b is bound to but was never invited to: the
	// daemon has agent-a invite it. And a private room no agent is in: nobody can let them in.
	inviteOnly, err := e.human.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", RoomAliasName: "locked", Invite: []id.UserID{userA}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.human.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "private_chat", RoomAliasName: "sealed"}); err != nil {
		t.Fatal(err)
	}
	// The operator bound agent-b to #ops2 after installing the registration, which
	// therefore does not reserve that alias: creating it is refused with M_EXCLUSIVE.
	logs := &logBuffer{}
	opts := e.opts
	opts.Logger = logs.logger()
	opts.Agents = []Agent{
		{Name: "agent-a", UserID: userA, Rooms: []config.RoomRef{"#general:localhost", "#locked:localhost"}},
		{Name: "agent-b", UserID: userB, Rooms: []config.RoomRef{"#general:localhost", "#ops2:localhost", "#locked:localhost", "#sealed:localhost"}},
	}
	rec := newRecorder()
	tr := start(t, opts, rec.handle)

	if _, ok := tr.RoomID("#ops2:localhost"); ok {
		t.Fatal("#ops2 was served, but the homeserver refused to create it")
	}
	if _, ok := tr.AgentRoomID(userB, "#sealed:localhost"); ok {
		t.Fatal("#sealed was served to agent-b, which can't join it")
	}
	for _, want := range []string{
		`room #ops2:localhost does not exist and this daemon may not create it: the alias is outside the alias namespaces of the appservice registration \"zooid\"`,
		"regenerate the registration (zooid registration --config zooid.yaml)",
		"M_EXCLUSIVE",
		"room=#sealed:localhost",
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log lacks %q:\n%s", want, logs)
		}
	}
	for _, c := range []struct {
		user id.UserID
		room config.RoomRef
		want id.RoomID
	}{{userA, "#locked:localhost", inviteOnly.RoomID}, {userB, "#locked:localhost", inviteOnly.RoomID}} {
		if got, ok := tr.AgentRoomID(c.user, c.room); !ok || got != c.want {
			t.Errorf("%s in %s: %s %v, want %s", c.user, c.room, got, ok, c.want)
		}
	}
	// The room the others share still works for both agents.
	general, ok := tr.AgentRoomID(userB, "#general:localhost")
	if !ok {
		t.Fatal("#general not served to agent-b")
	}
	if _, ok := tr.AgentRoomID(userA, "#general:localhost"); !ok {
		t.Fatal("#general not served to agent-a")
	}
	if _, err := e.human.JoinRoomByID(ctx, general); err != nil {
		t.Fatal(err)
	}
	sendText(t, e.human, general, "still served")
	rec.waitBodies(t, general, "still served")
}

// TestTheDaemonsRoomsArePrivate: a room the daemon creates is invite-only with its history
// visible to members from their invitation; the people rooms: lists are invited and join,
// anyone else on the homeserver is refused (403 M_FORBIDDEN, as Synapse: fakehs/conformance
// InviteJoinStateMembersLeave). A room configured public is open to anyone.
func TestTheDaemonsRoomsArePrivate(t *testing.T) {
	e := newEnv(t, true)
	ctx := context.Background()
	uid, tok, err := e.hs.RegisterUser("eve", "Eve")
	if err != nil {
		t.Fatal(err)
	}
	eve, err := mautrix.NewClient(e.hs.URL(), uid, tok)
	if err != nil {
		t.Fatal(err)
	}
	opts := e.opts
	opts.Rooms = map[config.RoomRef]config.Room{
		"#general:localhost": {Invite: []id.UserID{"@alice:localhost", "@nobody-here:localhost"}},
		"#side:localhost":    {Visibility: config.VisibilityPublic},
	}
	tr := start(t, opts, newRecorder().handle)
	general, _ := tr.RoomID("#general:localhost")
	side, _ := tr.RoomID("#side:localhost")

	var jr event.JoinRulesEventContent
	var hv event.HistoryVisibilityEventContent
	if err := tr.Client(userA).StateEvent(ctx, general, event.StateJoinRules, "", &jr); err != nil || jr.JoinRule != event.JoinRuleInvite {
		t.Errorf("#general's join rule %q (%v), want invite", jr.JoinRule, err)
	}
	if err := tr.Client(userA).StateEvent(ctx, general, event.StateHistoryVisibility, "", &hv); err != nil || hv.HistoryVisibility != event.HistoryVisibilityInvited {
		t.Errorf("#general's history visibility %q (%v), want invited", hv.HistoryVisibility, err)
	}
	if _, err := eve.JoinRoomByID(ctx, general); !errors.Is(err, mautrix.MForbidden) {
		t.Fatalf("eve, never invited, joining #general: %v; want M_FORBIDDEN", err)
	}
	if _, err := e.human.JoinRoomByID(ctx, general); err != nil {
		t.Fatalf("alice, invited by rooms:, joining #general: %v", err)
	}
	if _, err := eve.JoinRoomByID(ctx, side); err != nil {
		t.Fatalf("eve joining #side, configured public: %v", err)
	}

	// At the next start the listed people who were never in the room are invited (here:
	// bob, added to the list since); alice, who left, is not invited back.
	if _, err := e.human.LeaveRoom(ctx, general); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.hs.RegisterUser("bob", "Bob"); err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	opts.Rooms["#general:localhost"] = config.Room{Invite: []id.UserID{"@alice:localhost", "@bob:localhost"}}
	tr2 := start(t, opts, newRecorder().handle)
	for user, want := range map[id.UserID]event.Membership{"@alice:localhost": event.MembershipLeave, "@bob:localhost": event.MembershipInvite} {
		var m event.MemberEventContent
		if err := tr2.Client(userA).StateEvent(ctx, general, event.StateMember, string(user), &m); err != nil || m.Membership != want {
			t.Errorf("%s in #general after the restart: %q (%v), want %q", user, m.Membership, err, want)
		}
	}
}

// A /sync gap the transport gives up filling (more missed than maxGapPages
// pages) may hide state changes: the room state is read again. Here alice's
// new display name lies beyond the pages filled; the room state has it only
// because the gap marked the room uncertain.
func TestSyncGapGivenUpReadsTheRoomStateAgain(t *testing.T) {
	e := newEnv(t, false)
	rec := newRecorder()
	tr := start(t, e.opts, rec.handle, func(tr *Transport) { tr.syncTimelineLimit = 3 })
	general, _ := tr.RoomID("#general:localhost")
	ctx := context.Background()
	alice := e.human.UserID
	if _, err := e.human.JoinRoomByID(ctx, general); err != nil {
		t.Fatal(err)
	}
	sendText(t, e.human, general, "hello")
	rec.waitBodies(t, general, "hello")
	r, err := tr.RoomState().Room(ctx, general)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Joined(alice) || r.Members[alice].DisplayName != "Alice" {
		t.Fatalf("seeded members %+v, want alice joined as Alice", r.Members)
	}
	stateReads := func() int { return e.hs.Requests(http.MethodGet, "/_matrix/client/v3/rooms/*/state") }
	before := stateReads()
	// Every sync fails until the faults are cleared, so what is sent
	// meanwhile arrives as one gap. Once each agent's loop has had a sync
	// refused, neither has one in flight that could bring the change early.
	var faults []*fakehs.FaultHandle
	for _, u := range []id.UserID{userA, userB} {
		faults = append(faults, e.hs.InjectFault(fakehs.Fault{Method: http.MethodGet, PathPattern: "/_matrix/client/v3/sync", User: u, Status: http.StatusBadGateway, Errcode: "M_UNKNOWN"}))
	}
	deadline := time.Now().Add(10 * time.Second)
	for faults[0].Hits() == 0 || faults[1].Hits() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the syncs were refused %d and %d times, want both at least once", faults[0].Hits(), faults[1].Hits())
		}
		time.Sleep(5 * time.Millisecond) // polling the barrier, not waiting out a time
	}
	if err := e.human.SetDisplayName(ctx, "Alice Renamed"); err != nil {
		t.Fatal(err)
	}
	filler := 3 * (maxGapPages + 3)
	for i := range filler {
		sendText(t, e.human, general, fmt.Sprintf("filler %d", i))
	}
	e.hs.ClearFaults()
	// What is older than the pages filled is given up: the bodies end with
	// the last filler, the first ones missing.
	last := fmt.Sprintf("filler %d", filler-1)
	for got := rec.bodies(general); len(got) == 0 || got[len(got)-1] != last; got = rec.bodies(general) {
		select {
		case <-rec.kick:
		case <-time.After(10 * time.Second):
			t.Fatalf("timed out: handled %q, want them to end with %q", got, last)
		}
	}
	if got := rec.bodies(general); slices.Contains(got, "filler 0") {
		t.Fatalf("handled %q: the gap was filled to its start, so nothing tests a gap given up", got)
	}
	r, err = tr.RoomState().Room(ctx, general)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Members[alice].DisplayName; got != "Alice Renamed" {
		t.Fatalf("alice's display name %q after the gap, want %q (the room state read again)", got, "Alice Renamed")
	}
	if n := stateReads() - before; n != 1 {
		t.Fatalf("%d reads of the room's state after the gap, want 1", n)
	}
}
