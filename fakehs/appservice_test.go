package fakehs

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/appservice"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// txnLog records appservice transactions; the first failFirst attempts get 500.
type txnLog struct {
	mu        sync.Mutex
	failFirst int
	attempts  []txnAttempt
}

type txnAttempt struct {
	TxnID, Auth, QueryToken string
	Events                  []id.EventID
	OK                      bool
}

func (l *txnLog) handler(t *testing.T) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Events []struct {
				EventID id.EventID `json:"event_id"`
			} `json:"events"`
		}
		data, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(data, &body); err != nil {
			t.Errorf("transaction body %s: %v", data, err)
		}
		a := txnAttempt{TxnID: r.PathValue("txn"), Auth: r.Header.Get("Authorization"), QueryToken: r.URL.Query().Get("access_token")}
		for _, e := range body.Events {
			a.Events = append(a.Events, e.EventID)
		}
		l.mu.Lock()
		a.OK = len(l.attempts) >= l.failFirst
		l.attempts = append(l.attempts, a)
		l.mu.Unlock()
		if !a.OK {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		_, _ = w.Write([]byte("{}"))
	})
}

func (l *txnLog) snapshot() []txnAttempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]txnAttempt(nil), l.attempts...)
}

func testRegistration(url string) *appservice.Registration {
	reg := &appservice.Registration{ID: "zooid", URL: url, AppToken: "as-secret", ServerToken: "hs-secret", SenderLocalpart: "zooid"}
	reg.Namespaces.UserIDs = appservice.NamespaceList{{Regex: "@agent-.*:localhost", Exclusive: true}}
	return reg
}

func asClient(t *testing.T, s *Server, uid id.UserID) *mautrix.Client {
	t.Helper()
	cli, err := mautrix.NewClient(s.URL(), uid, "as-secret")
	if err != nil {
		t.Fatal(err)
	}
	cli.SetAppServiceUserID = true
	return cli
}

func TestAppserviceRegisterAndImpersonate(t *testing.T) {
	s := New(t, WithAppservice(testRegistration("")))
	ctx := context.Background()
	bot := asClient(t, s, "@agent-ci:localhost")
	// Synapse does not create namespace users on first use.
	_, err := bot.Whoami(ctx)
	if st, code := httpStatus(err); st != 403 || code != "M_FORBIDDEN" {
		t.Fatalf("unregistered namespace user: %d %s", st, code)
	}
	_, _, err = bot.Register(ctx, &mautrix.ReqRegister[any]{Username: "agent-ci", Type: mautrix.AuthTypeAppservice, InhibitLogin: true})
	if err != nil {
		t.Fatal(err)
	}
	who, err := bot.Whoami(ctx)
	if err != nil || who.UserID != "@agent-ci:localhost" {
		t.Fatalf("whoami %+v %v", who, err)
	}
	_, _, err = bot.Register(ctx, &mautrix.ReqRegister[any]{Username: "outsider", Type: mautrix.AuthTypeAppservice})
	if st, code := httpStatus(err); st != 400 || code != "M_EXCLUSIVE" {
		t.Fatalf("register outside namespace: %d %s", st, code)
	}
	outside := asClient(t, s, "@alice:localhost")
	_, err = outside.Whoami(ctx)
	if st, code := httpStatus(err); st != 403 || code != "M_FORBIDDEN" {
		t.Fatalf("masquerade outside namespace: %d %s", st, code)
	}
	anon, _ := mautrix.NewClient(s.URL(), "", "")
	_, err = anon.RegisterDummy(ctx, &mautrix.ReqRegister[any]{Username: "agent-x", Password: "p"})
	if st, code := httpStatus(err); st != 400 || code != "M_EXCLUSIVE" {
		t.Fatalf("user registering in exclusive namespace: %d %s", st, code)
	}
	// Transaction ids are scoped to the appservice, whichever user it acts as (Synapse).
	for _, lp := range []string{"agent-a", "agent-b"} {
		if _, _, err := bot.Register(ctx, &mautrix.ReqRegister[any]{Username: lp, Type: mautrix.AuthTypeAppservice, InhibitLogin: true}); err != nil {
			t.Fatal(err)
		}
	}
	a, b := asClient(t, s, "@agent-a:localhost"), asClient(t, s, "@agent-b:localhost")
	room := mustCreateRoom(t, a, &mautrix.ReqCreateRoom{Preset: "public_chat"})
	mustJoin(t, b, room)
	content := map[string]any{"msgtype": "m.text", "body": "x"}
	ra, err := a.SendMessageEvent(ctx, room, event.EventMessage, content, mautrix.ReqSendEvent{TransactionID: "same"})
	if err != nil {
		t.Fatal(err)
	}
	rb, err := b.SendMessageEvent(ctx, room, event.EventMessage, content, mautrix.ReqSendEvent{TransactionID: "same"})
	if err != nil || rb.EventID != ra.EventID {
		t.Fatalf("appservice txn scope: %s vs %s (%v)", ra.EventID, rb.EventID, err)
	}
	// The sender user exists from the start.
	sender := asClient(t, s, "")
	sender.SetAppServiceUserID = false
	if who, err := sender.Whoami(ctx); err != nil || who.UserID != "@zooid:localhost" {
		t.Fatalf("sender whoami %+v %v", who, err)
	}
}

func TestAppservicePushRetriesSameTransaction(t *testing.T) {
	log := &txnLog{failFirst: 2}
	mux := http.NewServeMux()
	mux.Handle("PUT /_matrix/app/v1/transactions/{txn}", log.handler(t))
	as := httptest.NewServer(mux)
	t.Cleanup(as.Close)
	s := New(t, WithAppservice(testRegistration(as.URL)), WithPushBackoff(10*time.Millisecond, 50*time.Millisecond))
	ctx := context.Background()
	alice := newClient(t, s, "alice")
	other := newClient(t, s, "other")
	room := mustCreateRoom(t, alice, &mautrix.ReqCreateRoom{Invite: []id.UserID{"@agent-ci:localhost"}})
	quiet := mustCreateRoom(t, other, &mautrix.ReqCreateRoom{})
	sendText(t, other, quiet, "not for the appservice")
	deadline := time.Now().Add(5 * time.Second)
	for s.Pending("zooid") > 0 || len(log.snapshot()) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("push not delivered: %+v", log.snapshot())
		}
		time.Sleep(10 * time.Millisecond)
	}
	attempts := log.snapshot()
	first := attempts[0]
	if len(first.Events) != 1 {
		t.Fatalf("first transaction should hold only the invite: %+v", first)
	}
	for _, a := range attempts[:3] {
		if a.TxnID != first.TxnID || len(a.Events) != len(first.Events) || a.Events[0] != first.Events[0] {
			t.Fatalf("retry changed the transaction: %+v vs %+v", a, first)
		}
		if a.Auth != "Bearer hs-secret" || a.QueryToken != "hs-secret" {
			t.Fatalf("hs_token not sent: %+v", a)
		}
	}
	if !attempts[2].OK || attempts[0].OK || attempts[1].OK {
		t.Fatalf("attempt outcomes %+v", attempts)
	}
	for _, a := range attempts {
		for _, e := range a.Events {
			if ev := s.Event(e); ev.RoomID == quiet {
				t.Fatalf("pushed an event from a room without namespace members: %s", e)
			}
		}
	}
	// Once the agent has joined, room messages go in new transactions, in order.
	bot := asClient(t, s, "@agent-ci:localhost")
	if _, _, err := bot.Register(ctx, &mautrix.ReqRegister[any]{Username: "agent-ci", Type: mautrix.AuthTypeAppservice, InhibitLogin: true}); err != nil {
		t.Fatal(err)
	}
	mustJoin(t, bot, room)
	e1 := sendText(t, alice, room, "a")
	e2 := sendText(t, alice, room, "b")
	for {
		got := log.snapshot()
		var seen []id.EventID
		for _, a := range got[3:] {
			seen = append(seen, a.Events...)
		}
		if len(seen) >= 3 {
			if seen[1] != e1 || seen[2] != e2 || got[3].TxnID == first.TxnID {
				t.Fatalf("later push %v txn %s", seen, got[3].TxnID)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("later events not pushed: %+v", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAppserviceAliasNamespaces holds aliases to Synapse's rules: an
// appservice only inside its alias namespaces, others never inside an
// exclusive one; a refused createRoom leaves no room behind.
func TestAppserviceAliasNamespaces(t *testing.T) {
	reg := testRegistration("")
	reg.Namespaces.RoomAliases = appservice.NamespaceList{
		{Regex: "#agentroom-.*:localhost"},
		{Regex: "#reserved-.*:localhost", Exclusive: true},
	}
	s := New(t, WithAppservice(reg))
	decode(t, rawDo(t, s, "POST", "as-secret", "/_matrix/client/v3/register",
		`{"type":"m.login.application_service","username":"agent-a"}`), http.StatusOK, nil)
	_, human, err := s.RegisterUser("human", "Human")
	if err != nil {
		t.Fatal(err)
	}
	const asUser = "?user_id=%40agent-a%3Alocalhost"
	create := func(token, query, alias string) *http.Response {
		return rawDo(t, s, "POST", token, "/_matrix/client/v3/createRoom"+query, `{"room_alias_name":"`+alias+`"}`)
	}
	wantError(t, create("as-secret", asUser, "elsewhere"), 400, "M_EXCLUSIVE")
	wantError(t, create("as-secret", "", "elsewhere2"), 400, "M_EXCLUSIVE") // the sender user too
	wantError(t, create(human, "", "reserved-x"), 400, "M_EXCLUSIVE")
	var joined struct {
		JoinedRooms []id.RoomID `json:"joined_rooms"`
	}
	decode(t, rawGet(t, s, "as-secret", "/_matrix/client/v3/joined_rooms"+asUser), http.StatusOK, &joined)
	if len(joined.JoinedRooms) != 0 {
		t.Fatalf("refused createRoom left rooms %v", joined.JoinedRooms)
	}
	var created struct {
		RoomID id.RoomID `json:"room_id"`
	}
	decode(t, create("as-secret", asUser, "agentroom-1"), http.StatusOK, &created)
	decode(t, create("as-secret", asUser, "reserved-1"), http.StatusOK, nil) // exclusive to this appservice
	decode(t, create(human, "", "agentroom-2"), http.StatusOK, nil)          // non-exclusive reserves nothing

	put := func(token, query, alias string) *http.Response {
		return rawDo(t, s, "PUT", token, "/_matrix/client/v3/directory/room/"+urlQuery(alias)+query, `{"room_id":"`+string(created.RoomID)+`"}`)
	}
	wantError(t, put("as-secret", asUser, "#elsewhere3:localhost"), 400, "M_EXCLUSIVE")
	decode(t, put("as-secret", asUser, "#agentroom-3:localhost"), http.StatusOK, nil)
	wantError(t, put("as-secret", asUser, "#agentroom-3:localhost"), 409, "M_UNKNOWN")
	// The human is not in the room: membership is checked before the namespace.
	wantError(t, put(human, "", "#reserved-2:localhost"), 403, "M_FORBIDDEN")
	if rid, ok := s.RoomIDForAlias("#agentroom-3:localhost"); !ok || rid != created.RoomID {
		t.Fatalf("alias put by the appservice resolves to %q, %v", rid, ok)
	}
	if _, ok := s.RoomIDForAlias("#elsewhere3:localhost"); ok {
		t.Fatal("a refused alias was stored")
	}
}

// TestRegistrationRules pins Synapse's /register and /register/available
// answers around appservice tokens and namespaces.
func TestRegistrationRules(t *testing.T) {
	s := New(t, WithAppservice(testRegistration("")))
	_, human, err := s.RegisterUser("human", "Human")
	if err != nil {
		t.Fatal(err)
	}
	wantError(t, rawGet(t, s, "", "/_matrix/client/v3/register/available?username=agent-x"), 400, "M_EXCLUSIVE")
	wantError(t, rawGet(t, s, "", "/_matrix/client/v3/register/available?username=human"), 400, "M_USER_IN_USE")
	decode(t, rawGet(t, s, "", "/_matrix/client/v3/register/available?username=free"), http.StatusOK, nil)
	wantError(t, rawDo(t, s, "POST", "as-secret", "/_matrix/client/v3/register", `{"username":"agent-x"}`), 400, "M_UNKNOWN")
	wantError(t, rawDo(t, s, "POST", "as-secret", "/_matrix/client/v3/register",
		`{"username":"agent-x","auth":{"type":"m.login.application_service"}}`), 400, "M_UNKNOWN")
	wantError(t, rawDo(t, s, "POST", human, "/_matrix/client/v3/register", `{"username":"other","password":"pw"}`), 400, "M_UNKNOWN")
	wantError(t, rawDo(t, s, "POST", "", "/_matrix/client/v3/register",
		`{"type":"m.login.application_service","username":"agent-x"}`), 400, "M_UNKNOWN")
	decode(t, rawDo(t, s, "POST", "as-secret", "/_matrix/client/v3/register",
		`{"type":"m.login.application_service","username":"agent-x"}`), http.StatusOK, nil)
	wantError(t, rawGet(t, s, "", "/_matrix/client/v3/register/available?username=agent-x"), 400, "M_EXCLUSIVE")
}
