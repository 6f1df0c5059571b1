// Package conformance is one homeserver conformance suite for the behaviour the zooid daemon
// relies on. It is written once against a base URL and runs unchanged against fakehs and a real
// Synapse; where Synapse and the Matrix spec disagree, the suite follows Synapse and says so.
//
// Tests share one homeserver that persists during a run, so every user localpart and room
// alias carries a per-run random suffix and nothing assumes an empty server.
package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// Target is a homeserver under test.
type Target struct {
	Name       string // "fake", "synapse", or the URL
	BaseURL    string
	ServerName string
	// AppService, when set, is an appservice registered with the homeserver whose pushes the
	// suite receives by listening on PushAddr itself.
	AppService *AppService
	// VisibilityWait, when set, is how long an event the suite sends may take to become
	// readable: the spec does not promise that /messages, /event or /relations show an event
	// as soon as its send returns, so each send then waits until GET /event shows it to the
	// sender before the test reads on. Real gaps then stand apart from lag.
	VisibilityWait time.Duration
}

// AppService describes the appservice registration the homeserver under test was given.
type AppService struct {
	ID, ASToken, HSToken, SenderLocalpart string
	UserPrefix                            string // localparts matching ^UserPrefix.* are in its exclusive namespace
	// AliasPrefix, when set, makes alias localparts matching ^AliasPrefix.* its non-exclusive
	// alias namespace, as the daemon registers the rooms it creates; without it the alias
	// namespace tests are skipped.
	AliasPrefix string
	PushAddr    string // "127.0.0.1:PORT" the homeserver pushes to; the suite listens here
	// Listener, when set, is an already open listener on PushAddr that the suite serves on and
	// closes; it lets a caller reserve the port before the homeserver learns it.
	Listener net.Listener
	// Devices says the registration asks for what an appservice needs to run a device of its
	// own for each of its users (issue 37): receive_ephemeral (with MSC2409, to-device
	// messages in transactions), org.matrix.msc3202 (key counts and device lists in
	// transactions) and io.element.msc4190 (device management). Without it the
	// AppserviceDevices area is skipped.
	Devices bool
}

// suite is the state shared by all subtests of one Run.
type suite struct {
	target  Target
	runID   string
	counter atomic.Int64
	http    *http.Client
	push    *pushRecorder // nil without an appservice
}

// Run runs the whole suite against target, one subtest per area.
func Run(t *testing.T, target Target) {
	if target.AppService != nil && target.AppService.Listener != nil {
		// The suite owns a handed-over listener even when it stops before serving on it.
		ln := target.AppService.Listener
		t.Cleanup(func() { _ = ln.Close() })
	}
	if target.BaseURL == "" || target.ServerName == "" {
		t.Fatalf("conformance target %q needs BaseURL and ServerName", target.Name)
	}
	s := &suite{target: target, runID: randomID(4), http: &http.Client{}}
	t.Cleanup(s.http.CloseIdleConnections)
	t.Logf("conformance run %s against %s (%s)", s.runID, target.Name, target.BaseURL)
	if target.AppService != nil {
		rec, err := startPushRecorder(target.AppService)
		if err != nil {
			t.Fatalf("starting the appservice push listener: %v", err)
		}
		t.Cleanup(rec.Close)
		s.push = rec
	}

	t.Run("Account", s.testAccount)
	t.Run("Rooms", s.testRooms)
	t.Run("Messages", s.testMessages)
	t.Run("EventSize", s.testEventSize)
	t.Run("Threads", s.testThreads)
	t.Run("Redactions", s.testRedactions)
	t.Run("Relations", s.testRelations)
	t.Run("State", s.testState)
	t.Run("Errors", s.testErrors)
	t.Run("Sync", s.testSync)
	t.Run("AppService", s.testAppService)
	t.Run("E2EE", s.testE2EE)
	t.Run("AppserviceDevices", s.testAppserviceDevices)
}

func randomID(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("reading random bytes: %v", err))
	}
	return hex.EncodeToString(b)
}

// localpart makes a localpart unique per run and per call.
func (s *suite) localpart(name string) string {
	return fmt.Sprintf("%s-%s-%d", name, s.runID, s.counter.Add(1))
}

func (s *suite) userID(localpart string) id.UserID {
	return id.NewUserID(localpart, s.target.ServerName)
}

// unauthed is a client with no token.
func (s *suite) unauthed() *Client {
	return &Client{BaseURL: s.target.BaseURL, http: s.http}
}

// registerUIA posts body to /register the way mautrix's RegisterDummy does: first without auth,
// and when that answers the UIA 401, again with m.login.dummy and the session. It returns the
// last response, whatever its status, because homeservers differ in whether a taken or reserved
// username is refused before or after the UIA step (Synapse refuses before).
func (s *suite) registerUIA(t testing.TB, body map[string]any) *Response {
	t.Helper()
	c := s.unauthed()
	res := c.Do(t, "POST", CS("v3", "register"), body)
	if res.StatusCode != http.StatusUnauthorized {
		return res
	}
	withAuth := maps.Clone(body)
	withAuth["auth"] = map[string]any{"type": "m.login.dummy", "session": res.JSON().Get("session").String()}
	return c.Do(t, "POST", CS("v3", "register"), withAuth)
}

// registerUser registers a fresh user with m.login.dummy, going through the UIA 401 first step
// exactly as a real client does.
func (s *suite) registerUser(t testing.TB, name string) *Client {
	t.Helper()
	lp := s.localpart(name)
	res := s.registerUIA(t, map[string]any{"username": lp, "password": "pw-" + lp})
	MustStatus(t, res, http.StatusOK, "")
	reg := res.JSON()
	MatchJSON(t, "register response", reg,
		KeyEqual("user_id", string(s.userID(lp))),
		KeyNonEmptyString("access_token"),
		KeyNonEmptyString("device_id"))
	return &Client{
		BaseURL:     s.target.BaseURL,
		UserID:      id.UserID(reg.Get("user_id").String()),
		DeviceID:    id.DeviceID(reg.Get("device_id").String()),
		AccessToken: reg.Get("access_token").String(),
		http:        s.http,
	}
}

// createRoom creates a room with body (nil for a default private room) and returns its id.
func (s *suite) createRoom(t testing.TB, c *Client, body map[string]any) id.RoomID {
	t.Helper()
	if body == nil {
		body = map[string]any{}
	}
	res := c.MustDo(t, "POST", CS("v3", "createRoom"), body)
	MatchJSON(t, "createRoom response", res, KeyNonEmptyString("room_id"))
	return id.RoomID(res.Get("room_id").String())
}

// publicRoomWith creates a public room as owner and joins every other client to it.
func (s *suite) publicRoomWith(t testing.TB, owner *Client, others ...*Client) id.RoomID {
	t.Helper()
	room := s.createRoom(t, owner, map[string]any{"preset": "public_chat"})
	for _, o := range others {
		o.MustDo(t, "POST", CS("v3", "join", string(room)), map[string]any{})
	}
	return room
}

// send posts an event through mautrix with an explicit txn id, as the daemon does.
func (s *suite) send(t testing.TB, c *Client, room id.RoomID, evType event.Type, content map[string]any) id.EventID {
	t.Helper()
	resp, err := c.Mautrix(t).SendMessageEvent(context.Background(), room, evType, content,
		mautrix.ReqSendEvent{TransactionID: "conf-" + randomID(8)})
	if err != nil {
		t.Fatalf("%s sending %s to %s: %v", c.UserID, evType.Type, room, err)
	}
	if resp.EventID == "" {
		t.Fatalf("%s sending %s to %s: empty event id", c.UserID, evType.Type, room)
	}
	if s.target.VisibilityWait > 0 {
		s.awaitVisible(t, c, room, resp.EventID)
	}
	return resp.EventID
}

// awaitVisible waits until c can read evt with GET /event, at most target.VisibilityWait.
func (s *suite) awaitVisible(t testing.TB, c *Client, room id.RoomID, evt id.EventID) {
	t.Helper()
	path := CS("v3", "rooms", string(room), "event", string(evt))
	deadline := time.Now().Add(s.target.VisibilityWait)
	for delay := 10 * time.Millisecond; ; delay = min(2*delay, 200*time.Millisecond) {
		res := c.Do(t, "GET", path, nil)
		if res.StatusCode == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s sent %s to %s but could not read it within %s: %s", c.UserID, evt, room, s.target.VisibilityWait, res)
		}
		time.Sleep(delay)
	}
}

func (s *suite) sendText(t testing.TB, c *Client, room id.RoomID, body string) id.EventID {
	t.Helper()
	return s.send(t, c, room, event.EventMessage, map[string]any{"msgtype": "m.text", "body": body})
}

// sendTexts sends each body as a text message by c into room, in order.
func (s *suite) sendTexts(t testing.TB, c *Client, room id.RoomID, bodies []string) {
	t.Helper()
	for _, b := range bodies {
		s.sendText(t, c, room, b)
	}
}

// sendThreadReply posts a reply in the thread on root, with the reply fallback clients send.
func (s *suite) sendThreadReply(t testing.TB, c *Client, room id.RoomID, root id.EventID, body string) id.EventID {
	t.Helper()
	return s.send(t, c, room, event.EventMessage, map[string]any{
		"msgtype": "m.text",
		"body":    body,
		"m.relates_to": map[string]any{
			"rel_type":        "m.thread",
			"event_id":        root,
			"is_falling_back": true,
			"m.in_reply_to":   map[string]any{"event_id": root},
		},
	})
}

// sendMixedTypesAndSenders sends four labelled events into room for the filter tests, in this
// order: a text by alice, a custom-type event by bob, a text by bob, a custom-type event by
// alice. It returns the labels (each event's body) and the custom type.
func (s *suite) sendMixedTypesAndSenders(t testing.TB, alice, bob *Client, room id.RoomID) ([]string, event.Type) {
	t.Helper()
	l := s.label(t, 4)
	custom := event.Type{Type: "dev.zooid.conformance", Class: event.MessageEventType}
	s.sendText(t, alice, room, l[0])
	s.send(t, bob, room, custom, map[string]any{"body": l[1]})
	s.sendText(t, bob, room, l[2])
	s.send(t, alice, room, custom, map[string]any{"body": l[3]})
	return l, custom
}

// bodies returns the content.body of each event, for readable comparisons.
func bodies(evts []*event.Event) []string {
	out := make([]string, 0, len(evts))
	for _, e := range evts {
		b, _ := e.Content.Raw["body"].(string)
		out = append(out, b)
	}
	return out
}

func eventIDs(evts []*event.Event) []string {
	out := make([]string, 0, len(evts))
	for _, e := range evts {
		out = append(out, string(e.ID))
	}
	return out
}

// jsonEventIDs returns the event_id of each raw event, in order.
func jsonEventIDs(evts []gjson.Result) []string {
	var out []string
	for _, ev := range evts {
		out = append(out, ev.Get("event_id").String())
	}
	return out
}

// label makes message bodies unique per test so a shared homeserver cannot confuse them.
func (s *suite) label(t testing.TB, n int) []string {
	prefix := strings.ReplaceAll(t.Name(), "/", ".") + "-" + s.runID
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i+1)
	}
	return out
}

// eventually polls cond until it holds or the timeout passes; homeservers like Synapse update
// some views (thread summaries, pushes) asynchronously.
func eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s: %s", timeout, what, detail)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
