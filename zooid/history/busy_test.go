package history_test

// The history behaviour tests over a busy generated room, moved here from
// zooid/mcpserver (issue 14) so `go test ./zooid/history` covers them; they
// call the tools through tools.Call, without the MCP transport.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/appservice"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/fakehs"
	"github.com/zooid-dev/zooid/zooid/history"
	"github.com/zooid-dev/zooid/zooid/tools"
)

// world is a fakehs with an appservice owning @agent-*, a busy room, a second
// room both agents share, and a room agent-a is not in; plus the daemon side:
// history over impersonating clients.
type world struct {
	hs     *fakehs.Server
	busy   *fakehs.ImportedRoom
	other  *fakehs.ImportedRoom
	secret *fakehs.ImportedRoom
	want   []wantMsg // the busy room's history, oldest first
	hist   *history.History
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
	return newWorldOn(t, fakehs.Profile{}, nMessages, nThreads, nPlain)
}

// newWorldOn is newWorld on a server with the profile.
func newWorldOn(t testing.TB, profile fakehs.Profile, nMessages, nThreads, nPlain int) *world {
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
	w := &world{hs: fakehs.New(t, fakehs.WithAppservice(reg), fakehs.WithProfile(profile))}

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

// start wires history against hsURL (fakehs or a proxy).
func (w *world) start(t testing.TB, hsURL string) {
	t.Helper()
	w.hist = history.New(history.Options{
		Client: func(u id.UserID) *mautrix.Client { return asClient(t, hsURL, u) },
		Agents: agentOf,
	})
}

// session calls tools as c over the history backend, as mcpserver would.
func (w *world) session(c tools.Caller) *session { return &session{h: w.hist, c: c} }

func (w *world) caller(agent string, room id.RoomID) tools.Caller {
	// Both agents are bound to the busy and the other room.
	return tools.Caller{Agent: agent, UserID: id.UserID("@" + agent + ":localhost"), Transport: "matrix", Room: room,
		Rooms: []id.RoomID{w.busy.RoomID, w.other.RoomID}, Thread: w.busy.EventIDs[0], SessionKey: agent, Kind: tools.Conversation}
}

// say posts a message into the busy room as agent-b (a new arrival).
func (w *world) say(t testing.TB, text string, thread id.EventID) id.EventID {
	t.Helper()
	content := &event.MessageEventContent{MsgType: event.MsgText, Body: text}
	if thread != "" {
		content.RelatesTo = (&event.RelatesTo{}).SetThread(thread, thread)
	}
	resp, err := asClient(t, w.hs.URL(), agentB).SendMessageEvent(context.Background(), w.busy.RoomID, event.EventMessage, content)
	if err != nil {
		t.Fatalf("sending: %v", err)
	}
	return resp.EventID
}

// session is one agent's tool calls in a room, without the MCP transport.
type session struct {
	h *history.History
	c tools.Caller
}

// callTool runs a tool through tools.Call over the history backend and
// returns its JSON text and whether it is a model-facing error, as an MCP
// client would see them.
func callTool(t testing.TB, s *session, name string, args map[string]any) (string, bool) {
	t.Helper()
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, te, err := tools.Call(ctx, tools.Backends{Rooms: s.h}, s.c, name, raw)
	if te != nil {
		if err != nil {
			t.Fatalf("%s: internal error %v", name, err)
		}
		return te.Error(), true
	}
	out, err := json.Marshal(res)
	if err != nil {
		t.Fatalf("%s: encoding %v", name, err)
	}
	return string(out), false
}

func decodeAs[T any](t testing.TB, text string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Fatalf("decoding %s: %v", text, err)
	}
	return v
}

func mustPrefix(t testing.TB, text, prefix string) {
	t.Helper()
	if !strings.HasPrefix(text, prefix) {
		t.Fatalf("want %q…, got %q", prefix, text)
	}
}

func stampOf(ts time.Time) string { return ts.UTC().Format("2006-01-02T15:04:05.000Z07:00") }

func checkMessage(t *testing.T, got tools.Message, want wantMsg) {
	t.Helper()
	if got.ID != want.id || got.Sender != want.sender || got.Text != want.text || got.Timestamp != stampOf(want.ts) || got.ThreadID != want.thread {
		t.Fatalf("message mismatch:\n got %+v\nwant %+v (ts %s)", got, want, stampOf(want.ts))
	}
	name, isAgent := agentOf(want.sender)
	if got.IsAgent != isAgent || got.AgentName != name {
		t.Fatalf("is_agent/agent_name of %s: %v %q", want.sender, got.IsAgent, got.AgentName)
	}
}

// pageAll pages a message tool to the end, calling between after each page.
func pageAll(t *testing.T, cl *session, tool string, args map[string]any, between func()) [][]tools.Message {
	t.Helper()
	var pages [][]tools.Message
	before := ""
	for i := 0; ; i++ {
		a := map[string]any{}
		for k, v := range args {
			a[k] = v
		}
		if before != "" {
			a["before"] = before
		}
		text, isErr := callTool(t, cl, tool, a)
		if isErr {
			t.Fatalf("%s page %d: %s", tool, i, text)
		}
		p := decodeAs[tools.MessagePage](t, text)
		pages = append(pages, p.Messages)
		if !p.HasMore {
			if p.NextBefore != "" {
				t.Fatalf("next_before without has_more")
			}
			return pages
		}
		if p.NextBefore == "" || len(p.Messages) == 0 {
			t.Fatalf("has_more with next_before %q and %d messages", p.NextBefore, len(p.Messages))
		}
		before = p.NextBefore
		if between != nil {
			between()
		}
		if i > 10000 {
			t.Fatal("paging does not end")
		}
	}
}

// flatten turns back-in-time pages of chronological messages into one
// chronological list.
func flatten(pages [][]tools.Message) []tools.Message {
	var out []tools.Message
	for i := len(pages) - 1; i >= 0; i-- {
		out = append(out, pages[i]...)
	}
	return out
}

func wantThreads(w *world) []wantMsg {
	var out []wantMsg
	for i := len(w.want) - 1; i >= 0; i-- {
		if w.want[i].topLevel {
			out = append(out, w.want[i])
		}
	}
	return out
}

func checkRecent(t *testing.T, cl *session, w *world, limit int) {
	t.Helper()
	want := wantThreads(w)
	var got []tools.ThreadOverview
	before := ""
	for {
		args := map[string]any{"limit": limit}
		if before != "" {
			args["before"] = before
		}
		text, isErr := callTool(t, cl, tools.GetRecentThreads, args)
		if isErr {
			t.Fatal(text)
		}
		p := decodeAs[tools.ThreadPage](t, text)
		got = append(got, p.Threads...)
		if !p.HasMore {
			break
		}
		before = p.NextBefore
	}
	if len(got) != len(want) {
		t.Fatalf("recent threads: %d entries, want %d", len(got), len(want))
	}
	for i := range got {
		checkMessage(t, got[i].Message, want[i])
		if got[i].ReplyCount != want[i].replies || got[i].LastActivityAt != stampOf(want[i].lastTS) {
			t.Fatalf("entry %d (%s): reply_count %d last %s, want %d %s", i, got[i].ID, got[i].ReplyCount, got[i].LastActivityAt, want[i].replies, stampOf(want[i].lastTS))
		}
	}
}

// stripAggregations removes every bundled m.relations from JSON bodies, as a
// homeserver without bundled aggregations would answer.
func stripAggregations(v any) {
	switch x := v.(type) {
	case map[string]any:
		if u, ok := x["unsigned"].(map[string]any); ok {
			delete(u, "m.relations")
		}
		for _, c := range x {
			stripAggregations(c)
		}
	case []any:
		for _, c := range x {
			stripAggregations(c)
		}
	}
}

func TestBusyRoomHistoryWhileMessagesArrive(t *testing.T) {
	w := newWorld(t, 2000, 40, 10)
	w.start(t, w.hs.URL())
	cl := w.session(w.caller("agent-a", w.busy.RoomID))

	n := 0
	pages := pageAll(t, cl, tools.GetHistory, map[string]any{"limit": 137}, func() {
		n++
		w.say(t, fmt.Sprintf("arrival %d", n), "")
		w.say(t, fmt.Sprintf("threaded arrival %d", n), w.want[0].id)
	})
	for i, p := range pages[:len(pages)-1] {
		if len(p) != 137 {
			t.Fatalf("page %d has %d messages", i, len(p))
		}
	}
	got := flatten(pages)
	if len(got) != len(w.want) {
		t.Fatalf("paged %d messages, want %d", len(got), len(w.want))
	}
	for i := range got {
		checkMessage(t, got[i], w.want[i])
	}

	// Exact has_more: a limit equal to what remains gives has_more false.
	text, _ := callTool(t, cl, tools.GetHistory, map[string]any{"limit": 200})
	p := decodeAs[tools.MessagePage](t, text)
	if !p.HasMore || len(p.Messages) != 200 {
		t.Fatalf("first page: %d messages, has_more %v", len(p.Messages), p.HasMore)
	}
	// The newest page now holds the arrivals too; it ends with the latest one.
	if last := p.Messages[len(p.Messages)-1]; last.Text != fmt.Sprintf("threaded arrival %d", n) || last.ThreadID != w.want[0].id {
		t.Fatalf("newest message %+v", last)
	}
}

func TestHasMoreExactOnLastPage(t *testing.T) {
	w := newWorld(t, 60, 3, 2)
	w.start(t, w.hs.URL())
	cl := w.session(w.caller("agent-a", w.busy.RoomID))
	text, _ := callTool(t, cl, tools.GetHistory, map[string]any{"limit": 30})
	p := decodeAs[tools.MessagePage](t, text)
	if len(p.Messages) != 30 || !p.HasMore {
		t.Fatalf("page 1: %d %v", len(p.Messages), p.HasMore)
	}
	text, _ = callTool(t, cl, tools.GetHistory, map[string]any{"limit": 30, "before": p.NextBefore})
	p = decodeAs[tools.MessagePage](t, text)
	if len(p.Messages) != 30 || p.HasMore || p.NextBefore != "" {
		t.Fatalf("exactly-full last page: %d messages, has_more %v", len(p.Messages), p.HasMore)
	}
	text, _ = callTool(t, cl, tools.GetHistory, map[string]any{"limit": 60})
	if p = decodeAs[tools.MessagePage](t, text); len(p.Messages) != 60 || p.HasMore {
		t.Fatalf("whole room in one page: %d %v", len(p.Messages), p.HasMore)
	}
	text, _ = callTool(t, cl, tools.GetHistory, map[string]any{"limit": 59})
	if p = decodeAs[tools.MessagePage](t, text); len(p.Messages) != 59 || !p.HasMore {
		t.Fatalf("one short: %d %v", len(p.Messages), p.HasMore)
	}
}

func TestBusyRoomRecentThreadsAndThreadHistory(t *testing.T) {
	w := newWorld(t, 2000, 40, 10)
	w.start(t, w.hs.URL())
	cl := w.session(w.caller("agent-a", w.busy.RoomID))
	checkRecent(t, cl, w, 7)
	checkRecent(t, cl, w, 50)

	// Every thread, paged in sevens: root once on the first page, replies in order.
	for _, root := range wantThreads(w) {
		var want []wantMsg
		for _, m := range w.want {
			if m.id == root.id || m.thread == root.id {
				want = append(want, m)
			}
		}
		want[0].thread = root.id // thread_id is set on the root in thread history
		pages := pageAll(t, cl, tools.GetThreadHistory, map[string]any{"thread_id": string(root.id), "limit": 7}, nil)
		if pages[0][0].ID != root.id {
			t.Fatalf("first page does not start with the root")
		}
		for _, p := range pages[1:] {
			for _, m := range p {
				if m.ID == root.id {
					t.Fatalf("root repeated on a later page")
				}
			}
		}
		// The first page holds the root then the newest replies.
		got := append([]tools.Message{pages[0][0]}, flatten(append([][]tools.Message{pages[0][1:]}, pages[1:]...))...)
		if len(got) != len(want) {
			t.Fatalf("thread %s: %d messages, want %d", root.id, len(got), len(want))
		}
		for i := range got {
			checkMessage(t, got[i], want[i])
		}
	}

	// A reply is not a thread root; an event of another room is not found.
	var reply wantMsg
	for _, m := range w.want {
		if m.thread != "" {
			reply = m
			break
		}
	}
	text, isErr := callTool(t, cl, tools.GetThreadHistory, map[string]any{"thread_id": string(reply.id)})
	if !isErr {
		t.Fatalf("reply accepted as a thread root: %s", text)
	}
	mustPrefix(t, text, "not_found: ")
	text, isErr = callTool(t, cl, tools.GetThreadHistory, map[string]any{"thread_id": string(w.other.EventIDs[0])})
	if !isErr {
		t.Fatalf("another room's root accepted: %s", text)
	}
	mustPrefix(t, text, "not_found: ")
	text, isErr = callTool(t, cl, tools.GetThreadHistory, map[string]any{"thread_id": "$nope:localhost"})
	if !isErr {
		t.Fatal(text)
	}
	mustPrefix(t, text, "not_found: ")
}

func TestCursorsRefused(t *testing.T) {
	w := newWorld(t, 300, 4, 2)
	w.start(t, w.hs.URL())
	cl := w.session(w.caller("agent-a", w.busy.RoomID))
	clB := w.session(w.caller("agent-b", w.other.RoomID))
	page := func(c *session, tool string, args map[string]any) string {
		text, isErr := callTool(t, c, tool, args)
		if isErr {
			t.Fatal(text)
		}
		var p struct {
			NextBefore string `json:"next_before"`
		}
		_ = json.Unmarshal([]byte(text), &p)
		if p.NextBefore == "" {
			t.Fatalf("%s: no cursor", tool)
		}
		return p.NextBefore
	}
	roots := wantThreads(w)
	hc := page(cl, tools.GetHistory, map[string]any{"limit": 5})
	rc := page(cl, tools.GetRecentThreads, map[string]any{"limit": 1})
	var root1, root2 id.EventID
	for _, r := range roots {
		if r.replies > 3 {
			if root1 == "" {
				root1 = r.id
			} else if root2 == "" {
				root2 = r.id
			}
		}
	}
	tc := page(cl, tools.GetThreadHistory, map[string]any{"thread_id": string(root1), "limit": 2})

	tampered := []byte(hc)
	tampered[5] ^= 1
	cases := []struct {
		name string
		c    *session
		tool string
		args map[string]any
	}{
		{"tampered", cl, tools.GetHistory, map[string]any{"before": string(tampered)}},
		{"garbage", cl, tools.GetHistory, map[string]any{"before": "not a cursor"}},
		{"history cursor to recent_threads", cl, tools.GetRecentThreads, map[string]any{"before": hc}},
		{"recent cursor to history", cl, tools.GetHistory, map[string]any{"before": rc}},
		{"thread cursor to another thread", cl, tools.GetThreadHistory, map[string]any{"thread_id": string(root2), "before": tc}},
		{"thread cursor to history", cl, tools.GetHistory, map[string]any{"before": tc}},
		{"cursor from another room", clB, tools.GetHistory, map[string]any{"before": hc}},
	}
	for _, tc := range cases {
		text, isErr := callTool(t, tc.c, tc.tool, tc.args)
		if !isErr {
			t.Fatalf("%s: accepted: %.200s", tc.name, text)
		}
		mustPrefix(t, text, "invalid_cursor: ")
	}
	// The genuine cursor still works.
	if text, isErr := callTool(t, cl, tools.GetHistory, map[string]any{"before": hc, "limit": 5}); isErr {
		t.Fatal(text)
	}
}

func TestThreadHistoryFallbackWithoutRelations(t *testing.T) {
	w := newWorld(t, 400, 5, 2)
	w.start(t, w.hs.URL())
	w.hs.InjectFault(fakehs.Fault{Method: "GET", PathPattern: "/_matrix/client/v1/rooms/*/relations/*", Status: 404, Errcode: "M_UNRECOGNIZED", Fraction: 1})
	w.hs.InjectFault(fakehs.Fault{Method: "GET", PathPattern: "/_matrix/client/v1/rooms/*/relations/*/*", Status: 404, Errcode: "M_UNRECOGNIZED", Fraction: 1})
	w.hs.InjectFault(fakehs.Fault{Method: "GET", PathPattern: "/_matrix/client/v1/rooms/*/threads", Status: 404, Errcode: "M_UNRECOGNIZED", Fraction: 1})
	cl := w.session(w.caller("agent-a", w.busy.RoomID))
	checkRecent(t, cl, w, 3)
	for _, root := range wantThreads(w) {
		var want []wantMsg
		for _, m := range w.want {
			if m.id == root.id || m.thread == root.id {
				want = append(want, m)
			}
		}
		want[0].thread = root.id
		pages := pageAll(t, cl, tools.GetThreadHistory, map[string]any{"thread_id": string(root.id), "limit": 9}, func() {
			w.say(t, "arrival", root.id)
		})
		got := append([]tools.Message{pages[0][0]}, flatten(append([][]tools.Message{pages[0][1:]}, pages[1:]...))...)
		if len(got) != len(want) {
			t.Fatalf("thread %s: %d messages, want %d", root.id, len(got), len(want))
		}
		for i := range got {
			checkMessage(t, got[i], want[i])
		}
		w.want = w.want[:len(w.want):len(w.want)]
	}
	// Posting into a thread still works, with the root as reply fallback.
	text, isErr := callTool(t, cl, tools.SendMessage, map[string]any{"room": string(w.busy.RoomID), "thread_id": string(wantThreads(w)[0].id), "text": "ok"})
	if isErr {
		t.Fatal(text)
	}
}

func TestRecentThreadsWithoutBundledAggregations(t *testing.T) {
	w := newWorld(t, 600, 12, 4)
	target, _ := url.Parse(w.hs.URL())
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(r *http.Response) error {
		if !strings.Contains(r.Header.Get("Content-Type"), "json") {
			return nil
		}
		body, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return err
		}
		var v any
		if json.Unmarshal(body, &v) == nil {
			stripAggregations(v)
			body, _ = json.Marshal(v)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		r.Header.Set("Content-Length", strconv.Itoa(len(body)))
		return nil
	}
	ps := httptest.NewServer(proxy)
	t.Cleanup(ps.Close)
	w.start(t, ps.URL)
	cl := w.session(w.caller("agent-a", w.busy.RoomID))
	text, _ := callTool(t, cl, tools.GetRecentThreads, map[string]any{"limit": 1})
	if strings.Contains(text, "m.relations") {
		t.Fatal("proxy did not strip")
	}
	// Page one counts from its own scan; later pages rescan from the first page's top.
	checkRecent(t, cl, w, 3)
	checkRecent(t, cl, w, 50)
}

// TestBusyRoomDegraded reads the whole busy room (reactions, state, edits,
// dev.zooid.* among the messages) on a server without /threads, bundles or
// relation filters, that filters after the limit: every entry with its exact
// reply count and edited text, every thread whole, the history once in order.
func TestBusyRoomDegraded(t *testing.T) {
	p := fakehs.Degraded
	p.VisibilityDelay = 0 // the world imports its history; nothing is sent
	w := newWorldOn(t, p, 600, 12, 6)
	w.start(t, w.hs.URL())
	cl := w.session(w.caller("agent-a", w.busy.RoomID))
	checkRecent(t, cl, w, 7)
	checkRecent(t, cl, w, 200)
	got := flatten(pageAll(t, cl, tools.GetHistory, map[string]any{"limit": 61}, nil))
	if len(got) != len(w.want) {
		t.Fatalf("paged %d messages, want %d", len(got), len(w.want))
	}
	for i := range got {
		checkMessage(t, got[i], w.want[i])
	}
	for _, root := range wantThreads(w) {
		var want []wantMsg
		for _, m := range w.want {
			if m.id == root.id || m.thread == root.id {
				want = append(want, m)
			}
		}
		want[0].thread = root.id
		pages := pageAll(t, cl, tools.GetThreadHistory, map[string]any{"thread_id": string(root.id), "limit": 9}, nil)
		got := append([]tools.Message{pages[0][0]}, flatten(append([][]tools.Message{pages[0][1:]}, pages[1:]...))...)
		if len(got) != len(want) {
			t.Fatalf("thread %s: %d messages, want %d", root.id, len(got), len(want))
		}
		for i := range got {
			checkMessage(t, got[i], want[i])
		}
	}
	if n := w.hs.Requests("GET", "/_matrix/client/v1/rooms/*/relations/*/m.thread"); n == 0 {
		t.Fatal("thread history never tried /relations: the fallback from it went untested")
	}
}
