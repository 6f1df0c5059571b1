package conformance

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/tidwall/gjson"
	"maunium.net/go/mautrix/id"
)

// asClient is a client holding the appservice token, acting as the sender user.
func (s *suite) asClient() *Client {
	as := s.target.AppService
	return &Client{BaseURL: s.target.BaseURL, AccessToken: as.ASToken, UserID: s.userID(as.SenderLocalpart), http: s.http}
}

// registerASUser registers a namespace user with m.login.application_service and returns an
// appservice client impersonating it.
func (s *suite) registerASUser(t testing.TB, name string) *Client {
	t.Helper()
	lp := s.target.AppService.UserPrefix + s.localpart(name)
	res := s.asClient().MustDo(t, "POST", CS("v3", "register"), map[string]any{
		"type": "m.login.application_service", "username": lp, "inhibit_login": true,
	})
	MatchJSON(t, "appservice register", res, KeyEqual("user_id", string(s.userID(lp))))
	return s.asClient().As(s.userID(lp))
}

func (s *suite) testAppService(t *testing.T) {
	if s.target.AppService == nil {
		t.Skip("target has no appservice registration: set ZOOID_TEST_AS_TOKEN, ZOOID_TEST_HS_TOKEN, ZOOID_TEST_AS_PUSH_ADDR and ZOOID_TEST_AS_USER_PREFIX")
	}
	t.Parallel()
	as := s.target.AppService

	t.Run("SenderWhoami", func(t *testing.T) {
		who := s.asClient().MustDo(t, "GET", CS("v3", "account", "whoami"), nil)
		MatchJSON(t, "appservice sender whoami", who, KeyEqual("user_id", string(s.userID(as.SenderLocalpart))))
	})

	t.Run("RegisterInNamespaceAndImpersonate", func(t *testing.T) {
		agent := s.registerASUser(t, "agent")
		who := agent.MustDo(t, "GET", CS("v3", "account", "whoami"), nil)
		MatchJSON(t, "impersonated whoami", who, KeyEqual("user_id", string(agent.AsUserID)))
		mw, err := agent.Mautrix(t).Whoami(context.Background())
		if err != nil || mw.UserID != agent.AsUserID {
			t.Fatalf("mautrix whoami with SetAppServiceUserID = %+v, %v; want %s", mw, err, agent.AsUserID)
		}
		dn := agent.MustDo(t, "GET", CS("v3", "profile", string(agent.AsUserID), "displayname"), nil)
		MatchJSON(t, "default displayname of a namespace user (Synapse: its localpart)", dn, KeyEqual("displayname", agent.AsUserID.Localpart()))
		agent.MustDo(t, "PUT", CS("v3", "profile", string(agent.AsUserID), "displayname"), map[string]any{"displayname": "Agent " + s.runID})
		human := s.registerUser(t, "ashuman")
		room := s.publicRoomWith(t, human, agent)
		evID := s.sendText(t, agent, room, s.label(t, 1)[0])
		ev := human.MustDo(t, "GET", CS("v3", "rooms", string(room), "event", string(evID)), nil)
		MatchJSON(t, "impersonated event", ev, KeyEqual("sender", string(agent.AsUserID)))
		members := human.MustDo(t, "GET", CS("v3", "rooms", string(room), "joined_members"), nil)
		MatchJSON(t, "impersonated member", field(members.Get("joined"), string(agent.AsUserID)), KeyEqual("display_name", "Agent "+s.runID))

		// The daemon's /sync loop runs as an impersonated user too.
		synced := agent.MustDo(t, "GET", CS("v3", "sync"), nil, WithQuery("timeout", "0"))
		if !field(synced.Get("rooms.join"), string(room)).Exists() {
			t.Fatalf("sync as %s lacks joined room %s: %s", agent.AsUserID, room, truncate(synced.Raw, 1500))
		}

		// Registering an existing namespace user again is how a restarted daemon finds its users.
		res := s.asClient().Do(t, "POST", CS("v3", "register"), map[string]any{"type": "m.login.application_service", "username": agent.AsUserID.Localpart()})
		MustStatus(t, res, http.StatusBadRequest, "M_USER_IN_USE")
	})

	t.Run("TxnIDsAreScopedToTheAppservice", func(t *testing.T) {
		a := s.registerASUser(t, "txna")
		b := s.registerASUser(t, "txnb")
		room := s.createRoom(t, a, map[string]any{"preset": "public_chat"})
		b.MustDo(t, "POST", CS("v3", "join", string(room)), map[string]any{})
		txn := "conf-astxn-" + randomID(6)
		path := CS("v3", "rooms", string(room), "send", "m.room.message", txn)
		first := a.MustDo(t, "PUT", path, map[string]any{"msgtype": "m.text", "body": "from a"})
		again := a.MustDo(t, "PUT", path, map[string]any{"msgtype": "m.text", "body": "from a"})
		MatchJSON(t, "resend as the same namespace user", again, KeyEqual("event_id", first.Get("event_id").String()))
		// Synapse keys appservice txn ids by (appservice, path), not by impersonated user: the
		// spec scopes them to the access token, and all namespace users share the as_token. So
		// another agent reusing the id in the same room gets the first agent's event, and the
		// daemon must make txn ids unique across its agents.
		other := b.Do(t, "PUT", path, map[string]any{"msgtype": "m.text", "body": "from b"})
		MatchResponse(t, "same txn id as another namespace user (after "+first.Raw+")", other, KeyEqual("event_id", first.Get("event_id").String()))
		// The scope is the path: the same id in another room is a new event.
		room2 := s.createRoom(t, a, map[string]any{"preset": "public_chat"})
		elsewhere := a.MustDo(t, "PUT", CS("v3", "rooms", string(room2), "send", "m.room.message", txn), map[string]any{"msgtype": "m.text", "body": "from a"})
		if elsewhere.Get("event_id").String() == first.Get("event_id").String() {
			t.Fatalf("the same txn id in another room returned the first room's event %s", first.Get("event_id").String())
		}
		msgs := a.MustDo(t, "GET", CS("v3", "rooms", string(room), "messages"), nil, WithQuery("dir", "b"), WithQuery("filter", `{"types":["m.room.message"]}`))
		if n := len(msgs.Get("chunk").Array()); n != 1 {
			t.Fatalf("want exactly one message in the room, got %d: %s", n, msgs.Raw)
		}
	})

	t.Run("OutsideNamespaceRefused", func(t *testing.T) {
		human := s.registerUser(t, "notns")
		res := s.asClient().As(human.UserID).Do(t, "GET", CS("v3", "account", "whoami"), nil)
		ExpectStatus(t, res, http.StatusForbidden, "M_FORBIDDEN")
		room := s.createRoom(t, human, map[string]any{"preset": "public_chat"})
		res = s.asClient().As(human.UserID).Do(t, "PUT", CS("v3", "rooms", string(room), "send", "m.room.message", "conf-"+randomID(6)),
			map[string]any{"msgtype": "m.text", "body": "forged"})
		ExpectStatus(t, res, http.StatusForbidden, "M_FORBIDDEN")
		// Synapse answers a registration outside the namespace with 400 M_EXCLUSIVE.
		res = s.asClient().Do(t, "POST", CS("v3", "register"), map[string]any{"type": "m.login.application_service", "username": s.localpart("outside")})
		ExpectStatus(t, res, http.StatusBadRequest, "M_EXCLUSIVE")
		// Synapse refuses to act as a namespace user the appservice never registered (403
		// M_FORBIDDEN), so the daemon must register its users first.
		ghost := s.userID(as.UserPrefix + s.localpart("ghost"))
		ExpectStatus(t, s.asClient().As(ghost).Do(t, "GET", CS("v3", "account", "whoami"), nil), http.StatusForbidden, "M_FORBIDDEN")
		// The namespace is exclusive: ordinary registration inside it is refused.
		res = s.registerUIA(t, map[string]any{"username": as.UserPrefix + s.localpart("squat"), "password": "pw-squat"})
		ExpectStatus(t, res, http.StatusBadRequest, "M_EXCLUSIVE")
	})

	t.Run("AliasNamespace", func(t *testing.T) {
		if as.AliasPrefix == "" {
			t.Skip("the target's appservice has no alias namespace: set ZOOID_TEST_AS_ALIAS_PREFIX")
		}
		agent := s.registerASUser(t, "aliasagent")
		human := s.registerUser(t, "aliashuman")
		// Synapse: an appservice may only create aliases in its registration's alias
		// namespaces, exclusive or not, whichever user it acts as; outside them it is 400
		// M_EXCLUSIVE, checked before the room is made. The spec says nothing of it.
		outside := "conf-" + s.localpart("asout")
		res := agent.Do(t, "POST", CS("v3", "createRoom"), map[string]any{"preset": "public_chat", "room_alias_name": outside})
		ExpectStatus(t, res, http.StatusBadRequest, "M_EXCLUSIVE")
		jr := agent.MustDo(t, "GET", CS("v3", "joined_rooms"), nil)
		if n := len(jr.Get("joined_rooms").Array()); n != 0 {
			t.Errorf("a createRoom refused for its alias left %d rooms behind: %s", n, jr.Raw)
		}
		ExpectStatus(t, s.asClient().Do(t, "POST", CS("v3", "createRoom"), map[string]any{"room_alias_name": "conf-" + s.localpart("asout")}),
			http.StatusBadRequest, "M_EXCLUSIVE")

		inside := as.AliasPrefix + s.localpart("asin")
		room := s.createRoom(t, agent, map[string]any{"preset": "public_chat", "room_alias_name": inside})
		dir := human.MustDo(t, "GET", CS("v3", "directory", "room", string(id.NewRoomAlias(inside, s.target.ServerName))), nil)
		MatchJSON(t, "alias in the appservice's namespace", dir, KeyEqual("room_id", string(room)))

		// PUT /directory/room is held to the same namespaces.
		out := id.NewRoomAlias("conf-"+s.localpart("asputout"), s.target.ServerName)
		ExpectStatus(t, agent.Do(t, "PUT", CS("v3", "directory", "room", string(out)), map[string]any{"room_id": room}),
			http.StatusBadRequest, "M_EXCLUSIVE")
		MustStatus(t, human.Do(t, "GET", CS("v3", "directory", "room", string(out)), nil), http.StatusNotFound, "M_NOT_FOUND")
		in := id.NewRoomAlias(as.AliasPrefix+s.localpart("asputin"), s.target.ServerName)
		agent.MustDo(t, "PUT", CS("v3", "directory", "room", string(in)), map[string]any{"room_id": room})
		MatchJSON(t, "alias put in the namespace", human.MustDo(t, "GET", CS("v3", "directory", "room", string(in)), nil), KeyEqual("room_id", string(room)))

		// A non-exclusive namespace reserves nothing: an ordinary user may take such an alias.
		mine := as.AliasPrefix + s.localpart("humanin")
		s.createRoom(t, human, map[string]any{"room_alias_name": mine})
	})

	t.Run("RegistrationChecks", func(t *testing.T) {
		// Synapse's /register/available refuses names in an exclusive namespace with 400
		// M_EXCLUSIVE, even when the appservice has already registered the name (the
		// exclusivity check comes before the "taken" check).
		free := as.UserPrefix + s.localpart("avail")
		ExpectStatus(t, s.unauthed().Do(t, "GET", CS("v3", "register", "available"), nil, WithQuery("username", free)),
			http.StatusBadRequest, "M_EXCLUSIVE")
		agent := s.registerASUser(t, "availtaken")
		ExpectStatus(t, s.unauthed().Do(t, "GET", CS("v3", "register", "available"), nil, WithQuery("username", agent.AsUserID.Localpart())),
			http.StatusBadRequest, "M_EXCLUSIVE")

		// The as_token without "type": "m.login.application_service" is 400 M_UNKNOWN ("An access
		// token should not be provided on requests to /register"), as is that type with no token.
		ExpectStatus(t, s.asClient().Do(t, "POST", CS("v3", "register"), map[string]any{"username": free}), http.StatusBadRequest, "M_UNKNOWN")
		ExpectStatus(t, s.asClient().Do(t, "POST", CS("v3", "register"), map[string]any{
			"username": free, "auth": map[string]any{"type": "m.login.application_service"},
		}), http.StatusBadRequest, "M_UNKNOWN")
		ExpectStatus(t, s.unauthed().Do(t, "POST", CS("v3", "register"), map[string]any{"type": "m.login.application_service", "username": free}),
			http.StatusBadRequest, "M_UNKNOWN")
		// None of those created the user: the proper request still can.
		res := s.asClient().MustDo(t, "POST", CS("v3", "register"), map[string]any{"type": "m.login.application_service", "username": free, "inhibit_login": true})
		MatchJSON(t, "appservice register after refused attempts", res, KeyEqual("user_id", string(s.userID(free))))
	})

	// Pushes run one after another: the retry test makes the homeserver back off from the
	// appservice, which would skew timing of a concurrent push test.
	t.Run("PushesInOrderWithHSToken", func(t *testing.T) {
		agent := s.registerASUser(t, "pushagent")
		human := s.registerUser(t, "pushhuman")
		room := s.createRoom(t, agent, map[string]any{"preset": "public_chat"})
		human.MustDo(t, "POST", CS("v3", "join", string(room)), map[string]any{})
		l := s.label(t, 6)
		var want []string
		for i, b := range l {
			sender := agent
			if i == 2 || i == 5 {
				sender = human // a human speaking in a room with a namespace user reaches the daemon
			}
			want = append(want, string(s.sendText(t, sender, room, b)))
		}
		var got []string
		eventually(t, 30*time.Second, "pushed events", func() (bool, string) {
			got = pushedIDs(s.push.accepted(), room, want)
			return len(got) >= len(want), fmt.Sprintf("pushed so far %q of %q", got, want)
		})
		MustEqualStrings(t, "pushed event ids in send order, each once", got, want)
		for _, ev := range s.push.accepted() {
			if i := slices.Index(want, ev.Get("event_id").String()); i >= 0 {
				MatchJSON(t, "pushed event", ev, KeyEqual("room_id", string(room)), KeyEqual("type", "m.room.message"),
					KeyEqual("content.body", l[i]), KeyNonEmptyString("sender"), KeyPresent("origin_server_ts"))
			}
		}
		txns, bad := s.push.snapshot()
		if len(bad) > 0 {
			t.Fatalf("pushes without the hs_token as Bearer authorization: %q", bad)
		}
		// Synapse leaves "ephemeral" out of transactions unless the registration opts in to
		// ephemeral events (receive_ephemeral), and puts it in every one when it does (an
		// empty list when there is nothing); the suite's registration opts in when the
		// target says so (AppService.Devices: MSC2409's to-device messages ride on it).
		for _, tx := range txns {
			if tx.HasEphemeral != as.Devices {
				t.Fatalf("transaction %s: \"ephemeral\" present = %t, but the registration's receive_ephemeral = %t", tx.ID, tx.HasEphemeral, as.Devices)
			}
			// With it, MSC2409's to-device list is in every transaction, [] when empty.
			if td := tx.Body.Get(gjsonKey(txnToDevice)); td.Exists() != as.Devices || (td.Exists() && !td.IsArray()) {
				t.Fatalf("transaction %s: %s = %s, but the registration's receive_ephemeral = %t", tx.ID, txnToDevice, td.Raw, as.Devices)
			}
		}
	})

	t.Run("InviteOfNamespaceUserIsPushed", func(t *testing.T) {
		agent := s.registerASUser(t, "invited")
		human := s.registerUser(t, "inviting")
		room := s.createRoom(t, human, map[string]any{"preset": "private_chat"})
		human.MustDo(t, "POST", CS("v3", "rooms", string(room), "invite"), map[string]any{"user_id": agent.AsUserID})
		var invite gjson.Result
		eventually(t, 30*time.Second, "the invite of a namespace user to be pushed", func() (bool, string) {
			for _, ev := range s.push.accepted() {
				if ev.Get("room_id").String() == string(room) && ev.Get("type").String() == "m.room.member" &&
					ev.Get("state_key").String() == string(agent.AsUserID) {
					invite = ev
					return true, ""
				}
			}
			return false, "no m.room.member for " + string(agent.AsUserID) + " pushed"
		})
		MatchJSON(t, "pushed invite", invite, KeyEqual("content.membership", "invite"), KeyEqual("sender", string(human.UserID)), KeyNonEmptyString("event_id"))
		// The daemon accepts it by joining as the agent; the human's next message reaches it.
		agent.MustDo(t, "POST", CS("v3", "join", string(room)), map[string]any{})
		var joined gjson.Result
		eventually(t, 30*time.Second, "the agent's join to be pushed", func() (bool, string) {
			for _, ev := range s.push.accepted() {
				if ev.Get("room_id").String() == string(room) && ev.Get("type").String() == "m.room.member" &&
					ev.Get("state_key").String() == string(agent.AsUserID) && ev.Get("content.membership").String() == "join" {
					joined = ev
					return true, ""
				}
			}
			return false, "no join of " + string(agent.AsUserID) + " pushed"
		})
		// Synapse pushes a membership change with the membership it replaced.
		MatchJSON(t, "pushed join", joined, KeyEqual("unsigned.prev_content.membership", "invite"),
			KeyEqual("unsigned.replaces_state", invite.Get("event_id").String()))
		msg := s.sendText(t, human, room, s.label(t, 1)[0])
		eventually(t, 30*time.Second, "the human's message after the join to be pushed", func() (bool, string) {
			got := pushedIDs(s.push.accepted(), room, []string{string(msg)})
			return len(got) == 1, fmt.Sprintf("pushed %q", got)
		})
	})

	t.Run("Ping", s.testPing)

	t.Run("FailedTransactionRetriedWithSameIDAndEvents", func(t *testing.T) {
		agent := s.registerASUser(t, "retryagent")
		room := s.createRoom(t, agent, map[string]any{"preset": "public_chat"})
		marker := s.label(t, 1)[0]
		s.push.failFirst(func(ev gjson.Result) bool { return ev.Get("content.body").String() == marker })
		evID := s.sendText(t, agent, room, marker)

		eventually(t, 30*time.Second, "the transaction carrying the marker to be refused once", func() (bool, string) {
			txns, _ := s.push.snapshot()
			for i := range txns {
				if txns[i].Answered == http.StatusInternalServerError && slices.Contains(txnEventIDs(&txns[i]), string(evID)) {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%d transactions seen, none refused with %s", len(txns), evID)
		})
		// Events sent while the appservice is failing must queue behind the refused transaction.
		later := []string{string(evID), string(s.sendText(t, agent, room, marker+"-after-1")), string(s.sendText(t, agent, room, marker+"-after-2"))}

		var failed, retried *pushedTxn
		eventually(t, 60*time.Second, "the refused transaction to be retried", func() (bool, string) {
			txns, _ := s.push.snapshot()
			failed, retried = nil, nil
			for i := range txns {
				tx := &txns[i]
				if failed == nil && tx.Answered == http.StatusInternalServerError && slices.Contains(txnEventIDs(tx), string(evID)) {
					failed = tx
					continue
				}
				if failed != nil && tx.ID == failed.ID && tx.Answered == http.StatusOK {
					retried = tx
					break
				}
			}
			return retried != nil, fmt.Sprintf("failed attempt %+v, %d transactions seen", failed, len(txns))
		})
		MustEqualStrings(t, "events of the retried transaction "+failed.ID, txnEventIDs(retried), txnEventIDs(failed))
		// The event is delivered once more only under the same txn id, never in a new one.
		var carriers []string
		txns, _ := s.push.snapshot()
		for _, tx := range txns {
			if slices.Contains(txnEventIDs(&tx), string(evID)) && !slices.Contains(carriers, tx.ID) {
				carriers = append(carriers, tx.ID)
			}
		}
		MustEqualStrings(t, "transaction ids that carried "+string(evID), carriers, []string{failed.ID})
		eventually(t, 60*time.Second, "events sent during the failure to be pushed", func() (bool, string) {
			got := pushedIDs(s.push.accepted(), room, later)
			return len(got) >= len(later), fmt.Sprintf("pushed %q of %q", got, later)
		})
		MustEqualStrings(t, "accepted pushes around the failure, in send order, each once", pushedIDs(s.push.accepted(), room, later), later)
	})
}

// testPing is POST /_matrix/client/v1/appservice/{id}/ping, with which an appservice checks
// that the homeserver knows its registration and reaches it: the homeserver forwards the ping
// to the appservice with the hs_token and answers with how long that took.
func (s *suite) testPing(t *testing.T) {
	as := s.target.AppService
	path := CS("v1", "appservice", as.ID, "ping")
	txn := "conf-ping-" + s.runID
	res := s.asClient().Do(t, "POST", path, map[string]any{"transaction_id": txn})
	MatchResponse(t, "ping", res, KeyPresent("duration_ms"))
	if d := res.JSON().Get("duration_ms"); d.Type != gjson.Number || d.Int() < 0 {
		t.Fatalf("ping duration_ms = %s, want a number of milliseconds", d.Raw)
	}
	pings := s.push.pingsWith(txn)
	if len(pings) != 1 || !pings[0].AuthOK {
		t.Fatalf("the appservice got %d pings with transaction_id %s (%+v); want one with the hs_token", len(pings), txn, pings)
	}
	// Without a transaction id the ping still goes through (Synapse forwards null).
	MatchResponse(t, "ping without transaction_id", s.asClient().Do(t, "POST", path, map[string]any{}), KeyPresent("duration_ms"))

	// Synapse: 403 M_FORBIDDEN for another appservice's id and for a user's token, 405 for GET.
	other := s.asClient().Do(t, "POST", CS("v1", "appservice", as.ID+"-not-this-one", "ping"), map[string]any{"transaction_id": txn + "-other"})
	ExpectStatus(t, other, http.StatusForbidden, "M_FORBIDDEN")
	user := s.registerUser(t, "pinger")
	ExpectStatus(t, user.Do(t, "POST", path, map[string]any{"transaction_id": txn + "-user"}), http.StatusForbidden, "M_FORBIDDEN")
	ExpectStatus(t, s.asClient().Do(t, "GET", path, nil), http.StatusMethodNotAllowed, "M_UNRECOGNIZED")
	if n := len(s.push.pingsWith(txn+"-other")) + len(s.push.pingsWith(txn+"-user")); n != 0 {
		t.Errorf("refused pings reached the appservice %d times", n)
	}

	// An appservice that refuses the ping: 502 M_BAD_STATUS carrying its status and body.
	refused := s.asClient().Do(t, "POST", path, map[string]any{"transaction_id": failPingPrefix + s.runID})
	ExpectStatus(t, refused, http.StatusBadGateway, "M_BAD_STATUS")
	MatchJSON(t, "refused ping", refused.JSON(), KeyEqual("status", 403), KeyNonEmptyString("body"))
}

// pushedIDs returns, in delivery order, the ids among want of pushed events in room, so
// unrelated events Synapse pushes (memberships, other tests) are ignored.
func pushedIDs(evts []gjson.Result, room id.RoomID, want []string) []string {
	var out []string
	for _, ev := range evts {
		eid := ev.Get("event_id").String()
		if ev.Get("room_id").String() == string(room) && slices.Contains(want, eid) {
			out = append(out, eid)
		}
	}
	return out
}

// txnEventIDs returns the ids of the events a pushed transaction carried, in order.
func txnEventIDs(tx *pushedTxn) []string { return jsonEventIDs(tx.Events) }
