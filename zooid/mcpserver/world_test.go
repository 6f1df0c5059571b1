package mcpserver_test

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
	"github.com/zooid-dev/zooid/zooid/history"
	"github.com/zooid-dev/zooid/zooid/mcpserver"
	"github.com/zooid-dev/zooid/zooid/tools"
)

const asToken = "as-token-for-tests"

// world is a fakehs with an appservice owning @agent-*, a busy room, a second
// room both agents share, and a room agent-a is not in; plus the daemon side:
// history over impersonating clients and the MCP server.
type world struct {
	hs     *fakehs.Server
	busy   *fakehs.ImportedRoom
	other  *fakehs.ImportedRoom
	secret *fakehs.ImportedRoom
	want   []wantMsg // the busy room's history, oldest first
	hist   *history.History
	srv    *mcpserver.Server
}

type wantMsg struct {
	id       id.EventID
	sender   id.UserID
	text     string
	thread   id.EventID
	ts       time.Time
	replies  int       // for top-level entries
	lastTS   time.Time // latest reply or own
	topLevel bool
}

var (
	alice  = id.UserID("@alice:localhost")
	agentA = id.UserID("@agent-a:localhost")
	agentB = id.UserID("@agent-b:localhost")
)

func agentOf(u id.UserID) (string, bool) {
	if s := string(u); strings.HasPrefix(s, "@agent-") && strings.HasSuffix(s, ":localhost") {
		return strings.TrimSuffix(strings.TrimPrefix(s, "@"), ":localhost"), true
	}
	return "", false
}

func asClient(t testing.TB, url string, user id.UserID) *mautrix.Client {
	cli, err := mautrix.NewClient(url, user, asToken)
	if err != nil {
		t.Fatalf("client for %s: %v", user, err)
	}
	cli.SetAppServiceUserID = true
	return cli
}

// newWorld seeds the busy room with nThreads thread roots, nPlain top-level
// messages without replies and replies up to nMessages history messages, plus
// events that are not history (reactions, state, edits, dev.zooid.*).
func newWorld(t testing.TB, nMessages, nThreads, nPlain int) *world {
	t.Helper()
	push := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte("{}"))
	}))
	t.Cleanup(push.Close)
	reg := &appservice.Registration{
		ID: "zooid", URL: push.URL, AppToken: asToken, ServerToken: "hs-token-for-tests", SenderLocalpart: "zooid",
		Namespaces: appservice.Namespaces{UserIDs: appservice.NamespaceList{{Regex: "@agent-.*:" + regexp.QuoteMeta("localhost"), Exclusive: true}}},
	}
	w := &world{hs: fakehs.New(t, fakehs.WithAppservice(reg))}

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
	senders := []id.UserID{alice, agentB, agentA}
	history := 0
	every := max(1, nMessages/(nThreads+nPlain+1))
	for history < nMessages {
		sender := senders[rng.Intn(len(senders))]
		msgtype, text := "m.text", fmt.Sprintf("message %d from %s", history, sender.Localpart())
		if _, ok := agentOf(sender); ok {
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
			r := roots[rng.Intn(len(roots))]
			add(fakehs.SeedEvent{Sender: sender, Content: content, ThreadRoot: r}, meta{true, text, r})
		}
		history++
		// Things that are not history, now and then.
		if rng.Intn(25) == 0 {
			target := len(seed) - 1
			switch rng.Intn(4) {
			case 0:
				add(fakehs.SeedEvent{Sender: alice, Type: "m.reaction", ThreadRoot: -1, Relation: &fakehs.SeedRelation{RelType: "m.annotation", Target: target, Key: "👍"}}, meta{root: -1})
			case 1:
				empty := ""
				add(fakehs.SeedEvent{Sender: alice, Type: "m.room.topic", ThreadRoot: -1, StateKey: &empty, Content: map[string]any{"topic": "busy"}}, meta{root: -1})
			case 2:
				add(fakehs.SeedEvent{Sender: alice, Type: "dev.zooid.session_reset", ThreadRoot: -1, Content: map[string]any{"reason": "clear"}}, meta{root: -1})
			case 3:
				add(fakehs.SeedEvent{Sender: alice, ThreadRoot: -1, Relation: &fakehs.SeedRelation{RelType: "m.replace", Target: target},
					Content: map[string]any{"msgtype": "m.text", "body": "* edited", "m.new_content": map[string]any{"msgtype": "m.text", "body": "edited"}}}, meta{root: -1})
				// Homeservers bundle the latest edit by the original sender, and
				// history shows the edited text; anyone else's edit is ignored.
				if seed[target].Sender == alice {
					metas[target].text = "edited"
				}
			}
		}
	}
	var err error
	w.busy, err = w.hs.ImportRoom(fakehs.RoomSeed{Creator: alice, Name: "Busy room", AliasLocalpart: "busy", Members: []id.UserID{agentA, agentB}, Events: seed})
	if err != nil {
		t.Fatalf("seeding busy room: %v", err)
	}
	idx := map[int]int{} // seed index -> want index
	for i, m := range metas {
		if !m.history {
			continue
		}
		wm := wantMsg{id: w.busy.EventIDs[i], sender: seed[i].Sender, text: m.text, ts: seed[i].Timestamp, topLevel: m.root < 0}
		wm.lastTS = wm.ts
		if m.root >= 0 {
			wm.thread = w.busy.EventIDs[m.root]
			r := &w.want[idx[m.root]]
			r.replies++
			r.lastTS = wm.ts
		}
		idx[i] = len(w.want)
		w.want = append(w.want, wm)
	}
	w.other, err = w.hs.ImportRoom(fakehs.RoomSeed{Creator: alice, Name: "Other room", AliasLocalpart: "other", Members: []id.UserID{agentA, agentB},
		Events: []fakehs.SeedEvent{{Sender: alice, ThreadRoot: -1, Content: map[string]any{"msgtype": "m.text", "body": "other root"}, Timestamp: base}}})
	if err != nil {
		t.Fatalf("seeding other room: %v", err)
	}
	w.secret, err = w.hs.ImportRoom(fakehs.RoomSeed{Creator: alice, Name: "Secret room", AliasLocalpart: "secret", Members: []id.UserID{agentB},
		Events: []fakehs.SeedEvent{{Sender: alice, ThreadRoot: -1, Content: map[string]any{"msgtype": "m.text", "body": "secret root"}, Timestamp: base}}})
	if err != nil {
		t.Fatalf("seeding secret room: %v", err)
	}
	return w
}

// start wires history and the MCP server against hsURL (fakehs or a proxy).
func (w *world) start(t testing.TB, hsURL string) {
	t.Helper()
	w.hist = history.New(history.Options{
		Client: func(u id.UserID) *mautrix.Client { return asClient(t, hsURL, u) },
		Agents: agentOf,
	})
	w.srv = newServer(t, w.hist, nil)
	for _, a := range []string{"agent-a", "agent-b"} {
		if _, err := w.srv.ListenAgent(a); err != nil {
			t.Fatal(err)
		}
	}
}

func (w *world) caller(agent string, room id.RoomID) tools.Caller {
	// Both agents are bound to the busy and the other room (agent-b is also in
	// the secret room, outside its binding).
	return tools.Caller{Agent: agent, UserID: id.UserID("@" + agent + ":localhost"), Transport: "matrix", Room: room,
		Rooms: []id.RoomID{w.busy.RoomID, w.other.RoomID}, Thread: w.busy.EventIDs[0], SessionKey: agent, Kind: tools.Conversation}
}
