package mcpserver_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/fakehs"
	"github.com/zooid-dev/zooid/zooid/tools"
)

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
func pageAll(t *testing.T, cl *client.Client, tool string, args map[string]any, between func()) [][]tools.Message {
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

func TestBusyRoomHistoryWhileMessagesArrive(t *testing.T) {
	w := newWorld(t, 2000, 40, 10)
	w.start(t, w.hs.URL())
	cl := connect(t, w.srv, w.srv.Bind(w.caller("agent-a", w.busy.RoomID)))

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
	cl := connect(t, w.srv, w.srv.Bind(w.caller("agent-a", w.busy.RoomID)))
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

func wantThreads(w *world) []wantMsg {
	var out []wantMsg
	for i := len(w.want) - 1; i >= 0; i-- {
		if w.want[i].topLevel {
			out = append(out, w.want[i])
		}
	}
	return out
}

func checkRecent(t *testing.T, cl *client.Client, w *world, limit int) {
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

func TestBusyRoomRecentThreadsAndThreadHistory(t *testing.T) {
	w := newWorld(t, 2000, 40, 10)
	w.start(t, w.hs.URL())
	cl := connect(t, w.srv, w.srv.Bind(w.caller("agent-a", w.busy.RoomID)))
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

func TestMembersRoomInfoRooms(t *testing.T) {
	w := newWorld(t, 20, 2, 1)
	w.start(t, w.hs.URL())
	cl := connect(t, w.srv, w.srv.Bind(w.caller("agent-a", w.busy.RoomID)))
	text, _ := callTool(t, cl, tools.GetMembers, nil)
	ms := decodeAs[tools.MembersResult](t, text).Members
	if len(ms) != 3 {
		t.Fatalf("members %+v", ms)
	}
	for _, m := range ms {
		name, isAgent := agentOf(m.ID)
		if m.IsAgent != isAgent || m.AgentName != name || m.Name == "" {
			t.Fatalf("member %+v", m)
		}
	}
	text, _ = callTool(t, cl, tools.GetRoomInfo, nil)
	if ri := decodeAs[tools.RoomInfo](t, text); ri.ID != w.busy.RoomID || ri.Name != "Busy room" || ri.Transport != "matrix" {
		t.Fatalf("room info %+v", ri)
	}
	text, _ = callTool(t, cl, tools.GetRooms, nil)
	rs := decodeAs[tools.RoomsResult](t, text).Rooms
	var ids []id.RoomID
	for _, r := range rs {
		ids = append(ids, r.ID)
	}
	if len(rs) != 2 || !slices.Contains(ids, w.busy.RoomID) || !slices.Contains(ids, w.other.RoomID) {
		t.Fatalf("rooms %+v", rs)
	}

	// A session bound to a room the agent is not in reads nothing.
	cl2 := connect(t, w.srv, w.srv.Bind(w.caller("agent-a", w.secret.RoomID)))
	for _, tool := range []string{tools.GetHistory, tools.GetRecentThreads, tools.GetMembers, tools.GetRoomInfo} {
		text, isErr := callTool(t, cl2, tool, nil)
		if !isErr || strings.Contains(text, "secret root") {
			t.Fatalf("%s in a room the agent is not in: %s", tool, text)
		}
		mustPrefix(t, text, "forbidden: ")
	}
}

func TestCursorsRefused(t *testing.T) {
	w := newWorld(t, 300, 4, 2)
	w.start(t, w.hs.URL())
	cl := connect(t, w.srv, w.srv.Bind(w.caller("agent-a", w.busy.RoomID)))
	clB := connect(t, w.srv, w.srv.Bind(w.caller("agent-b", w.other.RoomID)))
	page := func(c *client.Client, tool string, args map[string]any) string {
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
		c    *client.Client
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

func TestSendMessage(t *testing.T) {
	w := newWorld(t, 40, 3, 1)
	w.start(t, w.hs.URL())
	cl := connect(t, w.srv, w.srv.Bind(w.caller("agent-a", w.busy.RoomID)))
	root := wantThreads(w)[0]
	var latest id.EventID
	for _, m := range w.want {
		if m.thread == root.id || m.id == root.id {
			latest = m.id
		}
	}
	find := func(room id.RoomID, eid id.EventID) *event.Event {
		for _, e := range w.hs.Events(room) {
			if e.ID == eid {
				return e
			}
		}
		t.Fatalf("event %s not in %s", eid, room)
		return nil
	}

	text, isErr := callTool(t, cl, tools.SendMessage, map[string]any{"room": string(w.busy.RoomID), "thread_id": string(root.id), "text": "in thread, cc @agent-b:localhost"})
	if isErr {
		t.Fatal(text)
	}
	res := decodeAs[tools.SendResult](t, text)
	if res.ThreadID != root.id {
		t.Fatalf("result %+v", res)
	}
	e := find(w.busy.RoomID, res.EventID)
	_ = e.Content.ParseRaw(e.Type)
	mc := e.Content.AsMessage()
	if e.Sender != agentA || mc.MsgType != event.MsgNotice || mc.Body != "in thread, cc @agent-b:localhost" ||
		mc.RelatesTo == nil || mc.RelatesTo.Type != event.RelThread || mc.RelatesTo.EventID != root.id ||
		!mc.RelatesTo.IsFallingBack || mc.RelatesTo.InReplyTo == nil || mc.RelatesTo.InReplyTo.EventID != latest {
		t.Fatalf("thread post %+v relates %+v", mc, mc.RelatesTo)
	}
	if mc.Mentions == nil || !slices.Equal(mc.Mentions.UserIDs, []id.UserID{agentB}) {
		t.Fatalf("mentions %+v", mc.Mentions)
	}

	text, isErr = callTool(t, cl, tools.SendMessage, map[string]any{"room": "#other:localhost", "text": "hello other"})
	if isErr {
		t.Fatal(text)
	}
	res = decodeAs[tools.SendResult](t, text)
	e = find(w.other.RoomID, res.EventID)
	_ = e.Content.ParseRaw(e.Type)
	if mc := e.Content.AsMessage(); res.ThreadID != "" || mc.RelatesTo != nil || mc.Body != "hello other" || e.Sender != agentA {
		t.Fatalf("top-level post %+v", mc)
	}

	for _, tc := range []struct {
		args   map[string]any
		prefix string
	}{
		{map[string]any{"room": string(w.secret.RoomID), "text": "let me in"}, "not_in_room: "},
		{map[string]any{"room": "#secret:localhost", "text": "let me in"}, "not_in_room: "},
		{map[string]any{"room": "#nowhere:localhost", "text": "hello"}, "not_in_room: "},
		{map[string]any{"room": string(w.other.RoomID), "thread_id": string(root.id), "text": "wrong room"}, "not_found: "},
	} {
		text, isErr := callTool(t, cl, tools.SendMessage, tc.args)
		if !isErr {
			t.Fatalf("%v: accepted: %s", tc.args, text)
		}
		mustPrefix(t, text, tc.prefix)
	}
	for _, e := range w.hs.Events(w.secret.RoomID) {
		if e.Sender == agentA {
			t.Fatal("agent-a posted into a room it is not in")
		}
	}
}

func TestThreadHistoryFallbackWithoutRelations(t *testing.T) {
	w := newWorld(t, 400, 5, 2)
	w.start(t, w.hs.URL())
	w.hs.InjectFault(fakehs.Fault{Method: "GET", PathPattern: "/_matrix/client/v1/rooms/*/relations/*", Status: 404, Errcode: "M_UNRECOGNIZED", Fraction: 1})
	w.hs.InjectFault(fakehs.Fault{Method: "GET", PathPattern: "/_matrix/client/v1/rooms/*/relations/*/*", Status: 404, Errcode: "M_UNRECOGNIZED", Fraction: 1})
	w.hs.InjectFault(fakehs.Fault{Method: "GET", PathPattern: "/_matrix/client/v1/rooms/*/threads", Status: 404, Errcode: "M_UNRECOGNIZED", Fraction: 1})
	cl := connect(t, w.srv, w.srv.Bind(w.caller("agent-a", w.busy.RoomID)))
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
	cl := connect(t, w.srv, w.srv.Bind(w.caller("agent-a", w.busy.RoomID)))
	text, _ := callTool(t, cl, tools.GetRecentThreads, map[string]any{"limit": 1})
	if strings.Contains(text, "m.relations") {
		t.Fatal("proxy did not strip")
	}
	// Page one counts from its own scan; later pages count through /relations.
	checkRecent(t, cl, w, 3)
	checkRecent(t, cl, w, 50)
}
