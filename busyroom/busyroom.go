// Package busyroom holds the generated rooms the history tools are read
// from: the busy room (Seed) that the history and MCP server tests read, with
// what its history must be, and the paged room (PagedLayout) that the paging
// tests and benchmarks read on fakehs and Synapse. Test support: the
// product's tests and the harness import it; zooid/... production code never
// imports fakehs. The feature steps' generated rooms (sim/steps/rooms.go) are
// laid out there, not here: Synapse's snapshot images are keyed by that layout.
package busyroom

import (
	"fmt"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/appservice"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/fakehs"
	"github.com/zooid-dev/zooid/zooid/tools"
)

// ASToken is the appservice token of the seeded server's registration, which
// owns @agent-*:localhost.
const ASToken = "as-token-for-tests"

// The seeded rooms' users.
var (
	Alice  = id.UserID("@alice:localhost")
	AgentA = id.UserID("@agent-a:localhost")
	AgentB = id.UserID("@agent-b:localhost")
)

// AgentOf names the agent a user id belongs to, as zooid.yaml would.
func AgentOf(u id.UserID) (string, bool) {
	if s := string(u); strings.HasPrefix(s, "@agent-") && strings.HasSuffix(s, ":localhost") {
		return strings.TrimSuffix(strings.TrimPrefix(s, "@"), ":localhost"), true
	}
	return "", false
}

// Client is a mautrix client acting as user through the appservice token.
func Client(t testing.TB, url string, user id.UserID) *mautrix.Client {
	cli, err := mautrix.NewClient(url, user, ASToken)
	if err != nil {
		t.Fatalf("client for %s: %v", user, err)
	}
	cli.SetAppServiceUserID = true
	return cli
}

// Server starts a fakehs with profile whose appservice registration (ASToken)
// owns @agent-*:localhost, as the daemon's does, and pushes to an endpoint
// that takes every transaction; both stop when the test ends.
func Server(t testing.TB, profile fakehs.Profile) *fakehs.Server {
	t.Helper()
	hs, stop, err := Start(profile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return hs
}

// Start is Server for a caller with no test to end it (zooid bench): stop
// closes the homeserver and the push endpoint.
func Start(profile fakehs.Profile) (hs *fakehs.Server, stop func(), err error) {
	push := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{}"))
	}))
	reg := &appservice.Registration{
		ID: "zooid", URL: push.URL, AppToken: ASToken, ServerToken: "hs-token-for-tests", SenderLocalpart: "zooid",
		Namespaces: appservice.Namespaces{UserIDs: appservice.NamespaceList{{Regex: "@agent-.*:" + regexp.QuoteMeta("localhost"), Exclusive: true}}},
	}
	hs, err = fakehs.Start(fakehs.WithAppservice(reg), fakehs.WithProfile(profile))
	if err != nil {
		push.Close()
		return nil, nil, fmt.Errorf("starting fakehs: %w", err)
	}
	return hs, func() { _ = hs.Close(); push.Close() }, nil
}

// Msg is one history message of the busy room as the tools must show it.
type Msg struct {
	ID       id.EventID
	Sender   id.UserID
	Text     string
	Thread   id.EventID
	TS       time.Time
	Replies  int       // for top-level entries
	LastTS   time.Time // latest reply or own
	TopLevel bool
}

// Rooms is the seeded server: a busy room, a second room both agents share,
// and a room agent-a is not in, with the busy room's history in Want,
// oldest first.
type Rooms struct {
	HS                  *fakehs.Server
	Busy, Other, Secret *fakehs.ImportedRoom
	Want                []Msg
}

// Seed starts a fakehs with profile and seeds the busy room with nThreads
// thread roots, nPlain top-level messages without replies and replies up to
// nMessages history messages, plus events that are not history (reactions,
// state, edits, dev.zooid.*). The same arguments seed the same room.
func Seed(t testing.TB, profile fakehs.Profile, nMessages, nThreads, nPlain int) *Rooms {
	t.Helper()
	r := &Rooms{HS: Server(t, profile)}

	rng := rand.New(rand.NewSource(7))
	base := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	var seed []fakehs.SeedEvent
	var roots []int
	type meta struct {
		history bool
		text    string
		root    int
	}
	var metas []meta
	add := func(se fakehs.SeedEvent, m meta) int {
		se.Timestamp = base.Add(time.Duration(len(seed)) * time.Second)
		seed = append(seed, se)
		metas = append(metas, m)
		return len(seed) - 1
	}
	senders := []id.UserID{Alice, AgentB, AgentA}
	history := 0
	every := max(1, nMessages/(nThreads+nPlain+1))
	for history < nMessages {
		sender := senders[rng.Intn(len(senders))]
		msgtype, text := "m.text", fmt.Sprintf("message %d from %s", history, sender.Localpart())
		if _, ok := AgentOf(sender); ok {
			msgtype = "m.notice"
		}
		content := map[string]any{"msgtype": msgtype, "body": text}
		switch rng.Intn(40) {
		case 0:
			content = map[string]any{"msgtype": "m.image", "body": "cat.png", "filename": "cat.png", "url": "mxc://localhost/cat"}
			text = "[image: cat.png]"
		case 1:
			content = map[string]any{"msgtype": "m.emote", "body": "waves"}
			text = "* waves"
		}
		switch {
		case history%every == 0 && len(roots) < nThreads:
			roots = append(roots, add(fakehs.SeedEvent{Sender: sender, Content: content, ThreadRoot: -1}, meta{true, text, -1}))
		case history%every == 1 && nPlain > 0:
			nPlain--
			add(fakehs.SeedEvent{Sender: sender, Content: content, ThreadRoot: -1}, meta{true, text, -1})
		case len(roots) == 0:
			roots = append(roots, add(fakehs.SeedEvent{Sender: sender, Content: content, ThreadRoot: -1}, meta{true, text, -1}))
		default:
			parent := roots[rng.Intn(len(roots))]
			add(fakehs.SeedEvent{Sender: sender, Content: content, ThreadRoot: parent}, meta{true, text, parent})
		}
		history++
		// Things that are not history, now and then.
		if rng.Intn(25) == 0 {
			target := len(seed) - 1
			switch rng.Intn(4) {
			case 0:
				add(fakehs.SeedEvent{Sender: Alice, Type: "m.reaction", ThreadRoot: -1, Relation: &fakehs.SeedRelation{RelType: "m.annotation", Target: target, Key: "👍"}}, meta{root: -1})
			case 1:
				empty := ""
				add(fakehs.SeedEvent{Sender: Alice, Type: "m.room.topic", ThreadRoot: -1, StateKey: &empty, Content: map[string]any{"topic": "busy"}}, meta{root: -1})
			case 2:
				add(fakehs.SeedEvent{Sender: Alice, Type: "dev.zooid.session_reset", ThreadRoot: -1, Content: map[string]any{"reason": "clear"}}, meta{root: -1})
			case 3:
				add(fakehs.SeedEvent{Sender: Alice, ThreadRoot: -1, Relation: &fakehs.SeedRelation{RelType: "m.replace", Target: target},
					Content: map[string]any{"msgtype": "m.text", "body": "* edited", "m.new_content": map[string]any{"msgtype": "m.text", "body": "edited"}}}, meta{root: -1})
				// Homeservers bundle the latest edit by the original sender, and
				// history shows the edited text; anyone else's edit is ignored.
				if seed[target].Sender == Alice {
					metas[target].text = "edited"
				}
			}
		}
	}
	var err error
	r.Busy, err = r.HS.ImportRoom(fakehs.RoomSeed{Creator: Alice, Name: "Busy room", AliasLocalpart: "busy", Members: []id.UserID{AgentA, AgentB}, Events: seed})
	if err != nil {
		t.Fatalf("seeding busy room: %v", err)
	}
	idx := map[int]int{} // seed index -> want index
	for i, m := range metas {
		if !m.history {
			continue
		}
		wm := Msg{ID: r.Busy.EventIDs[i], Sender: seed[i].Sender, Text: m.text, TS: seed[i].Timestamp, TopLevel: m.root < 0}
		wm.LastTS = wm.TS
		if m.root >= 0 {
			wm.Thread = r.Busy.EventIDs[m.root]
			root := &r.Want[idx[m.root]]
			root.Replies++
			root.LastTS = wm.TS
		}
		idx[i] = len(r.Want)
		r.Want = append(r.Want, wm)
	}
	r.Other, err = r.HS.ImportRoom(fakehs.RoomSeed{Creator: Alice, Name: "Other room", AliasLocalpart: "other", Members: []id.UserID{AgentA, AgentB},
		Events: []fakehs.SeedEvent{{Sender: Alice, ThreadRoot: -1, Content: map[string]any{"msgtype": "m.text", "body": "other root"}, Timestamp: base}}})
	if err != nil {
		t.Fatalf("seeding other room: %v", err)
	}
	r.Secret, err = r.HS.ImportRoom(fakehs.RoomSeed{Creator: Alice, Name: "Secret room", AliasLocalpart: "secret", Members: []id.UserID{AgentB},
		Events: []fakehs.SeedEvent{{Sender: Alice, ThreadRoot: -1, Content: map[string]any{"msgtype": "m.text", "body": "secret root"}, Timestamp: base}}})
	if err != nil {
		t.Fatalf("seeding secret room: %v", err)
	}
	return r
}

// Threads is what zooid_get_recent_threads must list: the top-level
// messages, newest first.
func (r *Rooms) Threads() []Msg {
	var out []Msg
	for i := len(r.Want) - 1; i >= 0; i-- {
		if r.Want[i].TopLevel {
			out = append(out, r.Want[i])
		}
	}
	return out
}

// Stamp formats ts as the tools do.
func Stamp(ts time.Time) string { return ts.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

// CheckMessage fails unless got is want as the tools show it.
func CheckMessage(t testing.TB, got tools.Message, want Msg) {
	t.Helper()
	if got.ID != want.ID || got.Sender != want.Sender || got.Text != want.Text || got.Timestamp != Stamp(want.TS) || got.ThreadID != want.Thread {
		t.Fatalf("message mismatch:\n got %+v\nwant %+v (ts %s)", got, want, Stamp(want.TS))
	}
	name, isAgent := AgentOf(want.Sender)
	if got.IsAgent != isAgent || got.AgentName != name {
		t.Fatalf("is_agent/agent_name of %s: %v %q", want.Sender, got.IsAgent, got.AgentName)
	}
}
