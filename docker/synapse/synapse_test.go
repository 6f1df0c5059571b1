package synapse_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/appservice"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"github.com/zooid-dev/zooid/docker/synapse"
)

// pushedEvent is the part of a pushed event the test checks.
type pushedEvent struct {
	Type    string     `json:"type"`
	Sender  id.UserID  `json:"sender"`
	RoomID  id.RoomID  `json:"room_id"`
	EventID id.EventID `json:"event_id"`
	Content struct {
		Body string `json:"body"`
	} `json:"content"`
}

// pushListener is a minimal appservice endpoint on 127.0.0.1: it checks the hs_token and
// hands every pushed event to events.
type pushListener struct {
	url     string
	events  chan pushedEvent
	authErr chan string
}

func listenForPushes(t *testing.T, hsToken string) *pushListener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listening for pushes: %v", err)
	}
	p := &pushListener{
		url:     "http://" + l.Addr().String(),
		events:  make(chan pushedEvent, 256),
		authErr: make(chan string, 16),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("PUT /_matrix/app/v1/transactions/{txn}", func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get("Authorization"); got != "Bearer "+hsToken {
			select {
			case p.authErr <- got:
			default:
			}
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"errcode":"M_FORBIDDEN","error":"bad hs_token"}`))
			return
		}
		var txn struct {
			Events []pushedEvent `json:"events"`
		}
		if err := json.NewDecoder(r.Body).Decode(&txn); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, ev := range txn.Events {
			select {
			case p.events <- ev:
			default: // the test only needs the first few; never block Synapse
			}
		}
		_, _ = w.Write([]byte(`{}`))
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		// User and alias queries: this appservice creates nothing on demand.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"errcode":"M_NOT_FOUND"}`))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("push listener: %v", err)
		}
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return p
}

func TestAppserviceRegistersUsersAndReceivesPushes(t *testing.T) {
	reg := appservice.CreateRegistration()
	reg.ID = "zooid-test"
	reg.SenderLocalpart = "zooidbot"
	reg.Namespaces.UserIDs.Register(regexp.MustCompile(`@zooid_.*:localhost`), true)
	push := listenForPushes(t, reg.ServerToken)
	reg.URL = push.url

	started := time.Now()
	hs := synapse.RunForTest(t, synapse.WithAppservice(reg))
	t.Logf("synapse answered after %s at %s", time.Since(started).Round(time.Millisecond), hs.BaseURL())
	if hs.ServerName() != "localhost" {
		t.Fatalf("ServerName() = %q, want localhost", hs.ServerName())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// An appservice user, registered the appservice way.
	asClient, err := mautrix.NewClient(hs.BaseURL(), "", reg.AppToken)
	if err != nil {
		t.Fatal(err)
	}
	resp, _, err := asClient.Register(ctx, &mautrix.ReqRegister[any]{
		Username:     "zooid_alpha",
		Type:         mautrix.AuthTypeAppservice,
		InhibitLogin: true,
	})
	if err != nil {
		t.Fatalf("registering zooid_alpha through the appservice: %v", err)
	}
	agent := id.NewUserID("zooid_alpha", hs.ServerName())
	if resp.UserID != agent {
		t.Fatalf("registered %s, want %s", resp.UserID, agent)
	}
	// Outside its namespace the appservice is refused: the namespace is what Synapse loaded.
	if _, _, err := asClient.Register(ctx, &mautrix.ReqRegister[any]{
		Username: "someone_else", Type: mautrix.AuthTypeAppservice, InhibitLogin: true,
	}); err == nil {
		t.Fatal("registering someone_else outside the namespace succeeded, want M_EXCLUSIVE/M_FORBIDDEN")
	}

	agentClient, err := mautrix.NewClient(hs.BaseURL(), agent, reg.AppToken)
	if err != nil {
		t.Fatal(err)
	}
	agentClient.SetAppServiceUserID = true
	room, err := agentClient.CreateRoom(ctx, &mautrix.ReqCreateRoom{Preset: "public_chat", Name: "push test"})
	if err != nil {
		t.Fatalf("creating a room as %s: %v", agent, err)
	}

	// A human, registered with the shared secret, talks in the room.
	human, token, err := hs.RegisterUser(ctx, "alice", "alice-password", false)
	if err != nil {
		t.Fatal(err)
	}
	if human != id.NewUserID("alice", "localhost") {
		t.Fatalf("RegisterUser returned %s, want @alice:localhost", human)
	}
	humanClient, err := mautrix.NewClient(hs.BaseURL(), human, token)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := humanClient.JoinRoomByID(ctx, room.RoomID); err != nil {
		t.Fatalf("alice joining %s: %v", room.RoomID, err)
	}
	sent, err := humanClient.SendText(ctx, room.RoomID, "hello, appservice")
	if err != nil {
		t.Fatalf("alice sending: %v", err)
	}

	for {
		select {
		case ev := <-push.events:
			if ev.EventID != sent.EventID {
				continue
			}
			if ev.Type != event.EventMessage.Type || ev.Sender != human || ev.RoomID != room.RoomID ||
				ev.Content.Body != "hello, appservice" {
				t.Fatalf("pushed event = %+v, want alice's m.room.message in %s", ev, room.RoomID)
			}
			return
		case got := <-push.authErr:
			t.Fatalf("push carried Authorization %q, want the hs_token", got)
		case <-ctx.Done():
			t.Fatalf("no push of %s within a minute", sent.EventID)
		}
	}
}

func TestSharedSecretAdminAndTerminate(t *testing.T) {
	hs := synapse.RunForTest(t, synapse.WithServerName("zooid.test"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	admin, token, err := hs.RegisterUser(ctx, "root", "root-password", true)
	if err != nil {
		t.Fatal(err)
	}
	if admin != "@root:zooid.test" {
		t.Fatalf("admin user = %s, want @root:zooid.test", admin)
	}
	cli, err := mautrix.NewClient(hs.BaseURL(), admin, token)
	if err != nil {
		t.Fatal(err)
	}
	// Only a server admin may read another user's admin record.
	var out struct {
		Admin bool `json:"admin"`
	}
	url := cli.BuildURL(mautrix.SynapseAdminURLPath{"v2", "users", string(admin)})
	if _, err := cli.MakeRequest(ctx, http.MethodGet, url, nil, &out); err != nil {
		t.Fatalf("reading admin record: %v", err)
	}
	if !out.Admin {
		t.Fatal("shared-secret user registered with admin=true is not an admin")
	}
	if _, _, err := hs.RegisterUser(ctx, "root", "again", false); err == nil ||
		!strings.Contains(err.Error(), "M_USER_IN_USE") {
		t.Fatalf("registering root twice: err = %v, want M_USER_IN_USE", err)
	}

	if err := hs.Terminate(ctx); err != nil {
		t.Fatal(err)
	}
	probe := &http.Client{Timeout: 2 * time.Second}
	if resp, err := probe.Get(hs.BaseURL() + "/_matrix/client/versions"); err == nil {
		resp.Body.Close()
		t.Fatalf("synapse still answers after Terminate: %s", resp.Status)
	}
	if n := containersWithURL(t, hs.BaseURL()); n != 0 {
		t.Fatalf("%d containers left after Terminate", n)
	}
	if err := hs.Terminate(ctx); err != nil {
		t.Fatalf("second Terminate: %v", err)
	}
}

func TestRunRefusesIncompleteRegistration(t *testing.T) {
	// Checked before any container exists, so this needs no engine.
	_, err := synapse.Run(context.Background(), synapse.WithAppservice(&appservice.Registration{ID: "half"}))
	if err == nil || !strings.Contains(err.Error(), "no as_token") {
		t.Fatalf("Run with a registration lacking tokens: err = %v, want a clear error naming as_token", err)
	}
}

// containersWithURL lists containers, running or not, that Run labelled with baseURL.
func containersWithURL(t *testing.T, baseURL string) int {
	t.Helper()
	cli, err := testcontainers.NewDockerClientWithOpts(context.Background())
	if err != nil {
		t.Fatalf("docker client: %v", err)
	}
	defer cli.Close()
	res, err := cli.ContainerList(context.Background(), client.ContainerListOptions{
		All:     true,
		Filters: client.Filters{}.Add("label", synapse.URLLabel+"="+baseURL),
	})
	if err != nil {
		t.Fatalf("listing containers: %v", err)
	}
	return len(res.Items)
}

func TestRunReportsSynapseExitAndLeavesNothing(t *testing.T) {
	synapse.RequireEngine(t)
	// Something else already serves the port: Synapse cannot bind it and exits, while
	// this impostor keeps the readiness probe from ever seeing a 200.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	impostor := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "not synapse", http.StatusServiceUnavailable)
	}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = impostor.Serve(l) }()
	t.Cleanup(func() { _ = impostor.Close() })
	port := l.Addr().(*net.TCPAddr).Port

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	hs, err := synapse.Run(ctx, synapse.WithPort(port))
	if err == nil {
		_ = hs.Terminate(ctx)
		t.Fatal("Run succeeded on a port another server holds")
	}
	if !strings.Contains(err.Error(), "exited") || !strings.Contains(err.Error(), "Address already in use") {
		t.Fatalf("Run error = %v, want Synapse's exit with its log (address in use)", err)
	}
	t.Logf("Run failed as it should: %.300s", err)
	if n := containersWithURL(t, fmt.Sprintf("http://127.0.0.1:%d", port)); n != 0 {
		t.Fatalf("%d containers left behind after a failed Run", n)
	}
}

// BenchmarkRunUntilReady measures a cold Synapse start: container created, config copied,
// homeserver started and answering /versions, then removed.
func BenchmarkRunUntilReady(b *testing.B) {
	ctx := context.Background()
	for b.Loop() {
		hs := synapse.RunForTest(b)
		if err := hs.Terminate(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
