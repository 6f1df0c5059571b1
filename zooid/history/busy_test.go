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
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/busyroom"
	"github.com/zooid-dev/zooid/fakehs"
	"github.com/zooid-dev/zooid/zooid/history"
	"github.com/zooid-dev/zooid/zooid/tools"
)

// world is busyroom's seeded server plus the daemon side: history over
// impersonating clients.
type world struct {
	*busyroom.Rooms
	hist *history.Reader
}

type wantMsg = busyroom.Msg

// The seeded rooms' users, as the tests name them.
var (
	alice  = busyroom.Alice
	agentA = busyroom.AgentA
	agentB = busyroom.AgentB
)

// newWorld seeds busyroom's rooms on a fakehs that behaves as Synapse.
func newWorld(t testing.TB, nMessages, nThreads, nPlain int) *world {
	return newWorldOn(t, fakehs.Profile{}, nMessages, nThreads, nPlain)
}

// newWorldOn is newWorld on a server with the profile.
func newWorldOn(t testing.TB, profile fakehs.Profile, nMessages, nThreads, nPlain int) *world {
	t.Helper()
	return &world{Rooms: busyroom.Seed(t, profile, nMessages, nThreads, nPlain)}
}

// start wires history against hsURL (fakehs or a proxy).
func (w *world) start(t testing.TB, hsURL string) {
	t.Helper()
	w.hist = history.New(history.Options{
		Client: func(u id.UserID) *mautrix.Client { return busyroom.Client(t, hsURL, u) },
		Agents: busyroom.AgentOf,
	})
}

// session calls tools as c over the history backend, as mcpserver would.
func (w *world) session(c tools.Caller) *session { return &session{h: w.hist, c: c} }

func (w *world) caller(agent string, room id.RoomID) tools.Caller {
	// Both agents are bound to the busy and the other room.
	return tools.Caller{Agent: agent, UserID: id.UserID("@" + agent + ":localhost"), Transport: "matrix", Room: room,
		Rooms: []id.RoomID{w.Busy.RoomID, w.Other.RoomID}, Thread: w.Busy.EventIDs[0], SessionKey: agent, Kind: tools.Conversation}
}

// say posts a message into the busy room as agent-b (a new arrival).
func (w *world) say(t testing.TB, text string, thread id.EventID) id.EventID {
	t.Helper()
	content := &event.MessageEventContent{MsgType: event.MsgText, Body: text}
	if thread != "" {
		content.RelatesTo = (&event.RelatesTo{}).SetThread(thread, thread)
	}
	resp, err := busyroom.Client(t, w.HS.URL(), agentB).SendMessageEvent(context.Background(), w.Busy.RoomID, event.EventMessage, content)
	if err != nil {
		t.Fatalf("sending: %v", err)
	}
	return resp.EventID
}

// session is one agent's tool calls in a room, without the MCP transport.
type session struct {
	h *history.Reader
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

func checkRecent(t *testing.T, cl *session, w *world, limit int) {
	t.Helper()
	want := w.Threads()
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
		busyroom.CheckMessage(t, got[i].Message, want[i])
		if got[i].ReplyCount != want[i].Replies || got[i].LastActivityAt != busyroom.Stamp(want[i].LastTS) {
			t.Fatalf("entry %d (%s): reply_count %d last %s, want %d %s", i, got[i].ID, got[i].ReplyCount, got[i].LastActivityAt, want[i].Replies, busyroom.Stamp(want[i].LastTS))
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
	w.start(t, w.HS.URL())
	cl := w.session(w.caller("agent-a", w.Busy.RoomID))

	n := 0
	pages := pageAll(t, cl, tools.GetHistory, map[string]any{"limit": 137}, func() {
		n++
		w.say(t, fmt.Sprintf("arrival %d", n), "")
		w.say(t, fmt.Sprintf("threaded arrival %d", n), w.Want[0].ID)
	})
	for i, p := range pages[:len(pages)-1] {
		if len(p) != 137 {
			t.Fatalf("page %d has %d messages", i, len(p))
		}
	}
	got := flatten(pages)
	if len(got) != len(w.Want) {
		t.Fatalf("paged %d messages, want %d", len(got), len(w.Want))
	}
	for i := range got {
		busyroom.CheckMessage(t, got[i], w.Want[i])
	}

	// Exact has_more: a limit equal to what remains gives has_more false.
	text, _ := callTool(t, cl, tools.GetHistory, map[string]any{"limit": 200})
	p := decodeAs[tools.MessagePage](t, text)
	if !p.HasMore || len(p.Messages) != 200 {
		t.Fatalf("first page: %d messages, has_more %v", len(p.Messages), p.HasMore)
	}
	// The newest page now holds the arrivals too; it ends with the latest one.
	if last := p.Messages[len(p.Messages)-1]; last.Text != fmt.Sprintf("threaded arrival %d", n) || last.ThreadID != w.Want[0].ID {
		t.Fatalf("newest message %+v", last)
	}
}

func TestHasMoreExactOnLastPage(t *testing.T) {
	w := newWorld(t, 60, 3, 2)
	w.start(t, w.HS.URL())
	cl := w.session(w.caller("agent-a", w.Busy.RoomID))
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
	w.start(t, w.HS.URL())
	cl := w.session(w.caller("agent-a", w.Busy.RoomID))
	checkRecent(t, cl, w, 7)
	checkRecent(t, cl, w, 50)

	// Every thread, paged in sevens: root once on the first page, replies in order.
	for _, root := range w.Threads() {
		var want []wantMsg
		for _, m := range w.Want {
			if m.ID == root.ID || m.Thread == root.ID {
				want = append(want, m)
			}
		}
		want[0].Thread = root.ID // thread_id is set on the root in thread history
		pages := pageAll(t, cl, tools.GetThreadHistory, map[string]any{"thread_id": string(root.ID), "limit": 7}, nil)
		if pages[0][0].ID != root.ID {
			t.Fatalf("first page does not start with the root")
		}
		for _, p := range pages[1:] {
			for _, m := range p {
				if m.ID == root.ID {
					t.Fatalf("root repeated on a later page")
				}
			}
		}
		// The first page holds the root then the newest replies.
		got := append([]tools.Message{pages[0][0]}, flatten(append([][]tools.Message{pages[0][1:]}, pages[1:]...))...)
		if len(got) != len(want) {
			t.Fatalf("thread %s: %d messages, want %d", root.ID, len(got), len(want))
		}
		for i := range got {
			busyroom.CheckMessage(t, got[i], want[i])
		}
	}

	// A reply is not a thread root; an event of another room is not found.
	var reply wantMsg
	for _, m := range w.Want {
		if m.Thread != "" {
			reply = m
			break
		}
	}
	text, isErr := callTool(t, cl, tools.GetThreadHistory, map[string]any{"thread_id": string(reply.ID)})
	if !isErr {
		t.Fatalf("reply accepted as a thread root: %s", text)
	}
	mustPrefix(t, text, "not_found: ")
	text, isErr = callTool(t, cl, tools.GetThreadHistory, map[string]any{"thread_id": string(w.Other.EventIDs[0])})
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
	w.start(t, w.HS.URL())
	cl := w.session(w.caller("agent-a", w.Busy.RoomID))
	clB := w.session(w.caller("agent-b", w.Other.RoomID))
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
	roots := w.Threads()
	hc := page(cl, tools.GetHistory, map[string]any{"limit": 5})
	rc := page(cl, tools.GetRecentThreads, map[string]any{"limit": 1})
	var root1, root2 id.EventID
	for _, r := range roots {
		if r.Replies > 3 {
			if root1 == "" {
				root1 = r.ID
			} else if root2 == "" {
				root2 = r.ID
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
	w.start(t, w.HS.URL())
	w.HS.InjectFault(fakehs.Fault{Method: "GET", PathPattern: "/_matrix/client/v1/rooms/*/relations/*", Status: 404, Errcode: "M_UNRECOGNIZED", Fraction: 1})
	w.HS.InjectFault(fakehs.Fault{Method: "GET", PathPattern: "/_matrix/client/v1/rooms/*/relations/*/*", Status: 404, Errcode: "M_UNRECOGNIZED", Fraction: 1})
	w.HS.InjectFault(fakehs.Fault{Method: "GET", PathPattern: "/_matrix/client/v1/rooms/*/threads", Status: 404, Errcode: "M_UNRECOGNIZED", Fraction: 1})
	cl := w.session(w.caller("agent-a", w.Busy.RoomID))
	checkRecent(t, cl, w, 3)
	for _, root := range w.Threads() {
		var want []wantMsg
		for _, m := range w.Want {
			if m.ID == root.ID || m.Thread == root.ID {
				want = append(want, m)
			}
		}
		want[0].Thread = root.ID
		pages := pageAll(t, cl, tools.GetThreadHistory, map[string]any{"thread_id": string(root.ID), "limit": 9}, func() {
			w.say(t, "arrival", root.ID)
		})
		got := append([]tools.Message{pages[0][0]}, flatten(append([][]tools.Message{pages[0][1:]}, pages[1:]...))...)
		if len(got) != len(want) {
			t.Fatalf("thread %s: %d messages, want %d", root.ID, len(got), len(want))
		}
		for i := range got {
			busyroom.CheckMessage(t, got[i], want[i])
		}
		w.Want = w.Want[:len(w.Want):len(w.Want)]
	}
	// Posting into a thread still works, with the root as reply fallback.
	text, isErr := callTool(t, cl, tools.SendMessage, map[string]any{"room": string(w.Busy.RoomID), "thread_id": string(w.Threads()[0].ID), "text": "ok"})
	if isErr {
		t.Fatal(text)
	}
}

func TestRecentThreadsWithoutBundledAggregations(t *testing.T) {
	w := newWorld(t, 600, 12, 4)
	target, _ := url.Parse(w.HS.URL())
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
	cl := w.session(w.caller("agent-a", w.Busy.RoomID))
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
	w.start(t, w.HS.URL())
	cl := w.session(w.caller("agent-a", w.Busy.RoomID))
	checkRecent(t, cl, w, 7)
	checkRecent(t, cl, w, 200)
	got := flatten(pageAll(t, cl, tools.GetHistory, map[string]any{"limit": 61}, nil))
	if len(got) != len(w.Want) {
		t.Fatalf("paged %d messages, want %d", len(got), len(w.Want))
	}
	for i := range got {
		busyroom.CheckMessage(t, got[i], w.Want[i])
	}
	for _, root := range w.Threads() {
		var want []wantMsg
		for _, m := range w.Want {
			if m.ID == root.ID || m.Thread == root.ID {
				want = append(want, m)
			}
		}
		want[0].Thread = root.ID
		pages := pageAll(t, cl, tools.GetThreadHistory, map[string]any{"thread_id": string(root.ID), "limit": 9}, nil)
		got := append([]tools.Message{pages[0][0]}, flatten(append([][]tools.Message{pages[0][1:]}, pages[1:]...))...)
		if len(got) != len(want) {
			t.Fatalf("thread %s: %d messages, want %d", root.ID, len(got), len(want))
		}
		for i := range got {
			busyroom.CheckMessage(t, got[i], want[i])
		}
	}
	if n := w.HS.Requests("GET", "/_matrix/client/v1/rooms/*/relations/*/m.thread"); n == 0 {
		t.Fatal("thread history never tried /relations: the fallback from it went untested")
	}
}
