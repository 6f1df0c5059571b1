// Package history implements the tools.Rooms backend over Matrix: every read and
// post impersonates the calling agent's own Matrix user, so the homeserver refuses
// what the agent may not see; the package checks membership and thread ownership
// on top, for servers that serve shared history to non-members.
package history

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/internal/mxcall"
	"github.com/zooid-dev/zooid/zooid/roomstate"
	"github.com/zooid-dev/zooid/zooid/tools"
	"github.com/zooid-dev/zooid/zooid/zevent"
)

// Options configure a Reader.
type Options struct {
	// Client returns the impersonating appservice client for a user (as_token with
	// SetAppServiceUserID).
	Client func(user id.UserID) *mautrix.Client
	// Agents says whether a user is one of the daemon's configured agents, and its name.
	Agents func(user id.UserID) (name string, ok bool)
	// Workstation is the daemon's workstation ("" when none), which
	// zooid_get_members gives with its own agents.
	Workstation string
	// OtherAgent says whether a user is a Zooid agent of another daemon in
	// room, as its dev.zooid.agent state says (the router keeps those); nil
	// knows none.
	OtherAgent func(room id.RoomID, user id.UserID) (zevent.AgentContent, bool)
	// CursorKey is the HMAC key of cursors; random per Reader when nil.
	CursorKey []byte
	// Transport is the transport name reported in room records; default "matrix".
	Transport string
	// Send posts a message as a user with a txn id (the daemon's retrying sender);
	// when nil, the impersonating client sends directly.
	Send func(ctx context.Context, as id.UserID, room id.RoomID, content *event.MessageEventContent, txnID string) (id.EventID, error)
	// State is the daemon's own view of its rooms' state: room info,
	// members and rooms are answered from it, asking the homeserver only
	// where it is not current. When nil they are read from the homeserver.
	State *roomstate.Cache
	// Decrypt gives the plaintext of an m.room.encrypted event as the
	// reading agent's device can decrypt it now; nil reads every event as
	// the homeserver gives it.
	Decrypt Decrypter
}

// Decrypter returns evt decrypted with as's device when evt is an
// m.room.encrypted event whose room key the device holds, else evt itself
// (a message it cannot decrypt reads as undecryptable, never as a gap).
type Decrypter func(ctx context.Context, as id.UserID, evt *event.Event) *event.Event

// plain is evt as as reads it.
func (d Decrypter) plain(ctx context.Context, as id.UserID, evt *event.Event) *event.Event {
	if d == nil || evt == nil || evt.Type != event.EventEncrypted {
		return evt
	}
	return d(ctx, as, evt)
}

// plainAll decrypts what it can of evts in place.
func (d Decrypter) plainAll(ctx context.Context, as id.UserID, room id.RoomID, evts []*event.Event) {
	if d == nil {
		return
	}
	for i, evt := range evts {
		if evt.RoomID == "" {
			evt.RoomID = room
		}
		evts[i] = d.plain(ctx, as, evt)
	}
}

// Reader reads and posts room content as agents: the tools.Rooms the tools
// run over. It is safe for concurrent use.
type Reader struct {
	opts Options
	key  []byte

	mu sync.Mutex
	// unseen holds each caller's latest post per room until a read of that
	// room has seen it readable (see awaitOwnPost).
	unseen map[ownPost]id.EventID
	// carried maps a pending cursor to what its next page needs (keepCarried).
	carried      map[string]*scanState
	carriedOrder []string
}

type ownPost struct {
	user id.UserID
	room id.RoomID
}

// ownPostWait bounds how long a read waits for the caller's own latest post.
const ownPostWait = 5 * time.Second

// awaitOwnPost makes an agent read its own writes: a homeserver may show an
// event to /messages, /event and /relations a moment after the send returns,
// and an agent that posts and then reads its thread must not find its post
// missing. The first read of a room after a post waits until GET /event
// shows the post (one request on a server that shows it at once), at most
// ownPostWait; then the read goes ahead either way.
func (h *Reader) awaitOwnPost(ctx context.Context, cli *mautrix.Client, user id.UserID, room id.RoomID) {
	key := ownPost{user, room}
	h.mu.Lock()
	evt, ok := h.unseen[key]
	h.mu.Unlock()
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, ownPostWait)
	defer cancel()
	// Readable, refused another way or out of time: the read goes ahead.
	_ = mxcall.AwaitEvent(ctx, cli, room, evt, nil)
	h.mu.Lock()
	if h.unseen[key] == evt {
		delete(h.unseen, key)
	}
	h.mu.Unlock()
}

func (h *Reader) notePost(user id.UserID, room id.RoomID, evt id.EventID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.unseen == nil {
		h.unseen = map[ownPost]id.EventID{}
	}
	h.unseen[ownPost{user, room}] = evt
}

var _ tools.Rooms = (*Reader)(nil)

// New returns a Reader; a nil CursorKey gets a random one.
func New(opts Options) *Reader {
	key := opts.CursorKey
	if len(key) == 0 {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			panic(fmt.Sprintf("history: crypto/rand failed: %v", err))
		}
	}
	if opts.Transport == "" {
		opts.Transport = "matrix"
	}
	if opts.Agents == nil {
		opts.Agents = func(id.UserID) (string, bool) { return "", false }
	}
	return &Reader{opts: opts, key: key}
}

// Tool ids bound into cursors.
const (
	toolRecent  = "recent_threads"
	toolThread  = "thread_history"
	toolHistory = "history"
)

// Chunk sizes of backward fetches. Recent threads skip thread replies, so they
// fetch bigger chunks; a relations page fetches what it needs plus the peek.
const (
	recentChunk = 500
	maxChunk    = 1000
)

func (h *Reader) client(c tools.Caller) (*mautrix.Client, error) {
	if c.UserID == "" || h.opts.Client == nil {
		return nil, tools.Errorf(tools.CodeForbidden, "this session has no Matrix identity")
	}
	cli := h.opts.Client(c.UserID)
	if cli == nil {
		return nil, tools.Errorf(tools.CodeForbidden, "this session has no Matrix identity")
	}
	return cli, nil
}

// joinedClient returns the caller's client after checking the caller is a joined
// member of room: some servers serve shared history to users who never joined.
func (h *Reader) joinedClient(ctx context.Context, c tools.Caller, room id.RoomID) (*mautrix.Client, error) {
	if room == "" {
		return nil, tools.Errorf(tools.CodeForbidden, "this session is not in a room")
	}
	cli, err := h.client(c)
	if err != nil {
		return nil, err
	}
	if err := checkJoined(ctx, cli, c.UserID, room); err != nil {
		return nil, err
	}
	return cli, nil
}

// checkJoined asks the homeserver whether user (cli's) is a joined member of room.
func checkJoined(ctx context.Context, cli *mautrix.Client, user id.UserID, room id.RoomID) error {
	var member event.MemberEventContent
	err := cli.StateEvent(ctx, room, event.StateMember, user.String(), &member)
	if err != nil {
		if isRefusal(err) {
			return tools.Errorf(tools.CodeForbidden, "you are not a member of room %s", room)
		}
		return fmt.Errorf("reading own membership in %s: %w", room, err)
	}
	if member.Membership != event.MembershipJoin {
		return tools.Errorf(tools.CodeForbidden, "you are not a member of room %s", room)
	}
	return nil
}

func isRefusal(err error) bool {
	return errors.Is(err, mautrix.MForbidden) || errors.Is(err, mautrix.MNotFound) || mxcall.Status(err) == http.StatusForbidden
}

// isUnsupported says an endpoint is missing on this homeserver (fall back).
func isUnsupported(err error) bool {
	if errors.Is(err, mautrix.MUnrecognized) {
		return true
	}
	switch mxcall.Status(err) {
	case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusNotImplemented, http.StatusBadRequest:
		return !errors.Is(err, mautrix.MNotFound) && !errors.Is(err, mautrix.MForbidden)
	}
	return false
}

// rawContent is the part of an m.room.message content history needs.
type rawContent struct {
	MsgType    string           `json:"msgtype"`
	Body       string           `json:"body"`
	FileName   string           `json:"filename"`
	RelatesTo  *event.RelatesTo `json:"m.relates_to"`
	NewContent json.RawMessage  `json:"m.new_content"`
}

func parseContent(evt *event.Event) (rawContent, bool) {
	var rc rawContent
	if evt == nil || evt.Type != event.EventMessage || len(evt.Content.VeryRaw) == 0 {
		return rc, false
	}
	if err := json.Unmarshal(evt.Content.VeryRaw, &rc); err != nil {
		return rc, false
	}
	return rc, true
}

// threadOf returns the thread root a message replies in, if any. Only messages
// count: other events in a thread (a /clear, a task result) are not history.
func threadOf(evt *event.Event) id.EventID {
	// An undecryptable message's relation is in the clear.
	if evt == nil || (evt.Type != event.EventMessage && evt.Type != event.EventEncrypted) {
		return ""
	}
	return zevent.ThreadRoot(evt)
}

// text renders an event as history text with its bundled edit, if any; ok is
// false for what is not history (state, reactions, redacted or unknown
// messages, edits, dev.zooid.* events).
func text(evt *event.Event) (string, bool) { return textWith(evt, nil) }

// bundledEdit is the m.replace the server bundled with evt, if any.
func bundledEdit(evt *event.Event) *event.Event {
	if evt.Unsigned.Relations != nil && evt.Unsigned.Relations.LatestEdit != nil {
		return evt.Unsigned.Relations.LatestEdit
	}
	return nil
}

// textWith renders evt with the newest edit: the bundled one, else edit
// (met by a scan or asked for), else the original text.
func textWith(evt *event.Event, edit *event.Event) (string, bool) {
	if evt != nil && evt.Type == event.EventEncrypted {
		// A message the reader's device could not decrypt: an entry that
		// says so (tools.Message.Undecryptable), never a gap.
		if rel, ok := evt.Content.Raw["m.relates_to"].(map[string]any); ok && rel["rel_type"] == string(event.RelReplace) {
			return "", false
		}
		return undecryptableText, true
	}
	rc, ok := parseContent(evt)
	if !ok {
		return "", false
	}
	if rc.RelatesTo != nil && rc.RelatesTo.Type == event.RelReplace {
		return "", false // an edit: the original carries the latest text
	}
	if b := bundledEdit(evt); b != nil {
		edit = b
	}
	if edit != nil {
		if e, ok := parseContent(edit); ok && len(e.NewContent) > 0 {
			var nc rawContent
			if json.Unmarshal(e.NewContent, &nc) == nil && nc.Body != "" {
				rc.Body, rc.MsgType = nc.Body, nc.MsgType
			}
		}
	}
	name := rc.FileName
	if name == "" {
		name = rc.Body
	}
	switch event.MessageType(rc.MsgType) {
	case event.MsgText, event.MsgNotice:
		return rc.Body, rc.Body != ""
	case event.MsgEmote:
		return "* " + rc.Body, rc.Body != ""
	case event.MsgImage:
		return "[image: " + name + "]", true
	case event.MsgFile:
		return "[file: " + name + "]", true
	case event.MsgVideo:
		return "[video: " + name + "]", true
	case event.MsgAudio:
		return "[audio: " + name + "]", true
	case event.MsgLocation:
		return "[location: " + rc.Body + "]", true
	}
	return "", false
}

func stamp(ms int64) string {
	return time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// undecryptableText is the text of a message the reading agent's device
// could not decrypt.
const undecryptableText = "[undecryptable: this message's room key has not reached this agent's device]"

func (h *Reader) message(evt *event.Event, body string) tools.Message {
	m := tools.Message{
		ID:            evt.ID,
		Sender:        evt.Sender,
		Text:          body,
		Timestamp:     stamp(evt.Timestamp),
		ThreadID:      threadOf(evt),
		Undecryptable: evt.Type == event.EventEncrypted,
	}
	if name, ok := h.opts.Agents(evt.Sender); ok {
		m.IsAgent, m.AgentName = true, name
	}
	return m
}

// isHistory is the one rule for what counts as a message, in every tool:
// thread history returns exactly the replies for which it holds, and
// reply_count and last_activity_at count exactly those.
func isHistory(evt *event.Event) bool {
	_, ok := text(evt)
	return ok
}

// isReplyIn says evt is a message of thread root's history.
func isReplyIn(evt *event.Event, root id.EventID) bool {
	return threadOf(evt) == root && isHistory(evt)
}

// messageFilter asks for messages, encrypted ones included.
var messageFilter = &mautrix.FilterPart{Types: []event.Type{event.EventMessage, event.EventEncrypted}}

// messageStream reads /messages backwards, message events only. The types
// filter saves bytes, but a server that applies it after the page limit
// answers a page that held only other events with an empty chunk and no
// `end`, as at the start of the room. So an empty filtered page without
// `end` is asked once more without the filter, and the stream filters on
// its own side from then on: one request more per tool call, and never
// "no history" while history exists.
type messageStream struct {
	cli        *mautrix.Client
	room       id.RoomID
	unfiltered bool
	decrypt    Decrypter
}

func (m *messageStream) fetch(ctx context.Context, from string, size int) ([]*event.Event, string, string, error) {
	filter := messageFilter
	if m.unfiltered {
		filter = nil
	}
	resp, err := m.cli.Messages(ctx, m.room, from, "", mautrix.DirectionBackward, filter, size)
	if err == nil && filter != nil && len(resp.Chunk) == 0 && resp.End == "" {
		m.unfiltered = true
		resp, err = m.cli.Messages(ctx, m.room, from, "", mautrix.DirectionBackward, nil, size)
	}
	if err != nil {
		return nil, "", "", wrapFetch("reading messages", m.room, err)
	}
	chunk := make([]*event.Event, 0, len(resp.Chunk))
	for _, evt := range resp.Chunk {
		evt.RoomID = m.room
		if evt.Type.Type == event.EventEncrypted.Type {
			evt = m.decrypt.plain(ctx, m.cli.UserID, evt)
		}
		if evt.Type.Type == event.EventMessage.Type || evt.Type.Type == event.EventEncrypted.Type {
			chunk = append(chunk, evt)
		}
	}
	return chunk, resp.Start, resp.End, nil
}

// RecentMessages returns up to n message events of room, newest first, in at
// most maxRequests /messages requests, with the fallback of messageStream:
// what the daemon reads at start-up to adopt a task root posted just before a
// crash.
func RecentMessages(ctx context.Context, cli *mautrix.Client, room id.RoomID, n, maxRequests int, dec Decrypter) ([]*event.Event, error) {
	ms := &messageStream{cli: cli, room: room, decrypt: dec}
	var out []*event.Event
	from := ""
	for range maxRequests {
		chunk, _, next, err := ms.fetch(ctx, from, min(n, maxChunk))
		if err != nil {
			return out, err
		}
		for _, evt := range chunk {
			if len(out) == n {
				return out, nil
			}
			out = append(out, evt)
		}
		if next == "" || next == from || len(out) == n {
			break
		}
		from = next
	}
	return out, nil
}

func relationsFetch(cli *mautrix.Client, room id.RoomID, root id.EventID, dec Decrypter) chunkFetch {
	return func(ctx context.Context, from string, size int) ([]*event.Event, string, string, error) {
		resp, err := cli.GetRelations(ctx, room, root, &mautrix.ReqGetRelations{
			RelationType: event.RelThread,
			Dir:          mautrix.DirectionBackward,
			From:         from,
			Limit:        size,
		})
		if err != nil {
			return nil, "", "", fmt.Errorf("reading thread %s relations: %w", root, err)
		}
		dec.plainAll(ctx, cli.UserID, room, resp.Chunk)
		return resp.Chunk, "", resp.NextBatch, nil
	}
}

// History is zooid_get_history: every message, newest page first, chronological
// within a page.
func (h *Reader) History(ctx context.Context, c tools.Caller, limit int, before string) (tools.MessagePage, error) {
	var cur *cursor
	if before != "" {
		cc, err := h.openCursor(before, toolHistory, c.UserID, c.Room, "")
		if err != nil {
			return tools.MessagePage{}, err
		}
		cur = &cc
	}
	cli, err := h.joinedClient(ctx, c, c.Room)
	if err != nil {
		return tools.MessagePage{}, err
	}
	h.awaitOwnPost(ctx, cli, c.UserID, c.Room)
	st := newScanState()
	w, top, complete, err := scanFrom(ctx, cli, c.Room, h.opts.Decrypt, cur, h.carriedFor(before), min(limit+1, maxChunk), st)
	if err != nil {
		return tools.MessagePage{}, err
	}
	items, more, pos, err := collect(ctx, w, limit, isHistory, nil)
	if err != nil {
		return tools.MessagePage{}, err
	}
	msgs := make([]tools.Message, len(items))
	for i, it := range items {
		body, _ := textWith(it.evt, st.edit(it.evt))
		msgs[i] = h.message(it.evt, body)
	}
	if k := fit(msgs, 0, 1); k < len(msgs) {
		msgs, more, pos = msgs[:k], true, items[k-1]
	}
	slices.Reverse(msgs)
	page := tools.MessagePage{Messages: msgs, HasMore: more}
	if more {
		page.NextBefore = h.sealScan(cursor{Tool: toolHistory, User: c.UserID, Room: c.Room, Mode: modeMessages, Token: pos.token, Last: pos.evt.ID, Top: top},
			st, complete, true)
	}
	return page, nil
}

// RecentThreads is zooid_get_recent_threads: top-level messages and thread roots,
// newest first. Reply counts and latest activity come from the scan itself,
// by the one rule (isReplyIn), never from bundled m.thread aggregations:
// those count every event of a thread, dev.zooid.* results and errors
// included. A scan from the live end meets every reply of a root before the
// root; a later page scans again from the first page's top when the pages
// before it met replies of roots they had not reached.
func (h *Reader) RecentThreads(ctx context.Context, c tools.Caller, limit int, before string) (tools.ThreadPage, error) {
	var cur *cursor
	if before != "" {
		cc, err := h.openCursor(before, toolRecent, c.UserID, c.Room, "")
		if err != nil {
			return tools.ThreadPage{}, err
		}
		cur = &cc
	}
	cli, err := h.joinedClient(ctx, c, c.Room)
	if err != nil {
		return tools.ThreadPage{}, err
	}
	h.awaitOwnPost(ctx, cli, c.UserID, c.Room)
	st := newScanState()
	w, top, complete, err := scanFrom(ctx, cli, c.Room, h.opts.Decrypt, cur, h.carriedFor(before), recentChunk, st)
	if err != nil {
		return tools.ThreadPage{}, err
	}
	keep := func(evt *event.Event) bool { return threadOf(evt) == "" && isHistory(evt) }
	items, more, pos, err := collect(ctx, w, limit, keep, nil)
	if err != nil {
		return tools.ThreadPage{}, err
	}
	threads := make([]tools.ThreadOverview, 0, len(items))
	for _, it := range items {
		body, _ := textWith(it.evt, st.edit(it.evt))
		ov := tools.ThreadOverview{Message: h.message(it.evt, body)}
		var last int64
		if rs := st.replies[it.evt.ID]; rs != nil {
			ov.ReplyCount, last = rs.count, rs.last
		}
		ov.LastActivityAt = stamp(max(last, it.evt.Timestamp))
		threads = append(threads, ov)
	}
	if k := fit(threads, 0, 1); k < len(threads) {
		threads, more, pos = threads[:k], true, items[k-1]
	}
	page := tools.ThreadPage{Threads: threads, HasMore: more}
	if more {
		page.NextBefore = h.sealScan(cursor{Tool: toolRecent, User: c.UserID, Room: c.Room, Mode: modeMessages, Token: pos.token, Last: pos.evt.ID, Top: top},
			st, complete, true)
	}
	return page, nil
}

func (h *Reader) getRoot(ctx context.Context, cli *mautrix.Client, room id.RoomID, thread id.EventID) (*event.Event, error) {
	notFound := tools.Errorf(tools.CodeNotFound, "no thread %s in room %s", thread, room)
	evt, err := cli.GetEvent(ctx, room, thread)
	if err != nil {
		if isRefusal(err) || mxcall.Status(err) == http.StatusNotFound || mxcall.Status(err) == http.StatusBadRequest {
			return nil, notFound
		}
		return nil, fmt.Errorf("reading thread root %s: %w", thread, err)
	}
	if evt.RoomID != "" && evt.RoomID != room {
		return nil, notFound
	}
	evt.RoomID = room
	evt = h.opts.Decrypt.plain(ctx, cli.UserID, evt)
	if evt.Type != event.EventMessage && evt.Type != event.EventEncrypted {
		return nil, notFound
	}
	if threadOf(evt) != "" {
		return nil, tools.Errorf(tools.CodeNotFound, "%s is a reply inside a thread, not a thread root; use its thread_id", thread)
	}
	return evt, nil
}

// ThreadHistory is zooid_get_thread_history: the root (first page only), then
// replies chronologically; pages go back in time. It reads /relations of the
// root; on a server that bundles no aggregations (the root of a thread with
// replies carries no m.thread summary, so edits of replies aren't bundled
// either) or has no /relations, it scans /messages instead, which meets
// every edit before the message it edits.
func (h *Reader) ThreadHistory(ctx context.Context, c tools.Caller, thread id.EventID, limit int, before string) (tools.MessagePage, error) {
	var cur *cursor
	if before != "" {
		cc, err := h.openCursor(before, toolThread, c.UserID, c.Room, thread)
		if err != nil {
			return tools.MessagePage{}, err
		}
		cur = &cc
	}
	// The first page is the root, then the newest replies, limit entries in
	// all; a page after a first page of the root alone starts at the top.
	first, n := cur == nil, limit
	mode := modeRelations
	if first {
		n = limit - 1
	} else {
		mode = cur.Mode
		if cur.Fresh {
			cur = nil
		}
	}
	cli, err := h.joinedClient(ctx, c, c.Room)
	if err != nil {
		return tools.MessagePage{}, err
	}
	h.awaitOwnPost(ctx, cli, c.UserID, c.Room)
	root, err := h.getRoot(ctx, cli, c.Room, thread)
	if err != nil {
		return tools.MessagePage{}, err
	}
	isReply := func(evt *event.Event) bool { return isReplyIn(evt, thread) }
	// With room for the root alone, a reply is read only to learn whether
	// there are more.
	want := max(n, 1)

	var items []item
	var more bool
	var pos item
	st := newScanState()
	top, complete := "", true
	if mode == modeRelations {
		w := &walker{fetch: relationsFetch(cli, c.Room, thread, h.opts.Decrypt), size: min(want+1, maxChunk), observe: st.observe}
		err = w.start(ctx, cur)
		if err == nil {
			items, more, pos, err = collect(ctx, w, want, isReply, nil)
		}
		if err != nil && cur == nil && isUnsupported(err) {
			mode, err = modeScan, nil
		}
		if err != nil {
			return tools.MessagePage{}, err
		}
		if first && len(items) > 0 && !hasThreadSummary(root) {
			mode = modeScan
		}
	}
	if mode == modeScan {
		// Scan the room backwards for this thread's replies, stopping at the
		// root (nothing older can reply to it); bounded by maxScan events per page.
		st = newScanState()
		var w *walker
		w, top, complete, err = scanFrom(ctx, cli, c.Room, h.opts.Decrypt, cur, h.carriedFor(before), maxChunk, st)
		if err != nil {
			return tools.MessagePage{}, err
		}
		items, more, pos, err = collect(ctx, w, want, isReply, func(evt *event.Event) bool { return evt.ID == thread })
		if err != nil {
			return tools.MessagePage{}, err
		}
	}
	fresh := false
	if n == 0 {
		// The root alone: the replies, if any, are the next page's.
		more, fresh, items = more || len(items) > 0, true, nil
	}
	var rootMsg []tools.Message
	if first {
		edit := st.edit(root)
		if edit == nil && bundledEdit(root) == nil && root.Unsigned.Relations == nil {
			// No bundle and the scan ended before the root's edits: ask once.
			if edit, err = askEdit(ctx, cli, c.Room, root); err != nil {
				return tools.MessagePage{}, err
			}
		}
		body, ok := textWith(root, edit)
		if !ok {
			body = ""
		}
		m := h.message(root, body)
		m.ThreadID = thread
		rootMsg = append(rootMsg, m)
	}
	replies := make([]tools.Message, len(items))
	for i, it := range items {
		body, _ := textWith(it.evt, st.edit(it.evt))
		replies[i] = h.message(it.evt, body)
	}
	// The root takes its room first; beside it a page may hold no reply,
	// as a page of the root alone does.
	atLeast := 1
	if first {
		atLeast = 0
	}
	if k := fit(replies, entryBytes(rootMsg...), atLeast); k == 0 && len(replies) > 0 {
		more, fresh, replies = true, true, nil
	} else if k < len(replies) {
		replies, more, pos = replies[:k], true, items[k-1]
	}
	slices.Reverse(replies)
	page := tools.MessagePage{Messages: append(rootMsg, replies...), HasMore: more}
	if more && fresh {
		page.NextBefore = h.sealCursor(cursor{Tool: toolThread, User: c.UserID, Room: c.Room, Thread: thread, Mode: mode, Fresh: true})
	} else if more {
		c := cursor{Tool: toolThread, User: c.UserID, Room: c.Room, Thread: thread, Mode: mode, Token: pos.token, Last: pos.evt.ID}
		if mode == modeScan {
			c.Top = top
			page.NextBefore = h.sealScan(c, st, complete, false)
		} else {
			page.NextBefore = h.sealCursor(c)
		}
	}
	return page, nil
}

// hasThreadSummary says the server bundled an m.thread aggregation with root.
func hasThreadSummary(root *event.Event) bool {
	return root.Unsigned.Relations != nil && root.Unsigned.Relations.Thread != nil
}

// Members is zooid_get_members: the room's joined members, from the room
// state when the Reader has it, else read as the caller.
func (h *Reader) Members(ctx context.Context, c tools.Caller) ([]tools.Member, error) {
	joined, err := h.joinedMembers(ctx, c)
	if err != nil {
		return nil, err
	}
	out := make([]tools.Member, 0, len(joined))
	for uid, m := range joined {
		mem := tools.Member{ID: uid, Name: m.DisplayName}
		if mem.Name == "" {
			mem.Name = uid.Localpart()
		}
		if name, ok := h.opts.Agents(uid); ok {
			mem.IsAgent, mem.AgentName, mem.Workstation = true, name, h.opts.Workstation
		} else if a, ok := h.otherAgent(c.Room, uid); ok {
			mem.IsAgent, mem.AgentName, mem.Workstation = true, a.Name, a.Workstation
		}
		out = append(out, mem)
	}
	slices.SortFunc(out, func(a, b tools.Member) int { return strings.Compare(string(a.ID), string(b.ID)) })
	return out, nil
}

// joinedMembers are the joined members of the caller's room, from the room
// state when the Reader has it, else from the homeserver; either way only
// for a caller joined to the room.
func (h *Reader) joinedMembers(ctx context.Context, c tools.Caller) (map[id.UserID]mautrix.JoinedMember, error) {
	if h.opts.State != nil {
		if _, err := h.client(c); err != nil {
			return nil, err
		}
		r, err := h.joinedState(ctx, c, c.Room)
		if err != nil {
			return nil, err
		}
		joined := make(map[id.UserID]mautrix.JoinedMember, len(r.Members))
		for uid, m := range r.Members {
			if m.Membership == event.MembershipJoin {
				joined[uid] = mautrix.JoinedMember{DisplayName: m.DisplayName}
			}
		}
		return joined, nil
	}
	cli, err := h.joinedClient(ctx, c, c.Room)
	if err != nil {
		return nil, err
	}
	resp, err := cli.JoinedMembers(ctx, c.Room)
	if err != nil {
		if isRefusal(err) {
			return nil, tools.Errorf(tools.CodeForbidden, "you are not a member of room %s", c.Room)
		}
		return nil, fmt.Errorf("reading members of %s: %w", c.Room, err)
	}
	return resp.Joined, nil
}

// joinedState is room's state from the room state, for a caller joined to
// it: the same refusal as checkJoined's otherwise.
func (h *Reader) joinedState(ctx context.Context, c tools.Caller, room id.RoomID) (roomstate.Room, error) {
	if room == "" {
		return roomstate.Room{}, tools.Errorf(tools.CodeForbidden, "this session is not in a room")
	}
	r, err := h.opts.State.Room(ctx, room)
	switch {
	case errors.Is(err, roomstate.ErrUnknownRoom) || err != nil && isRefusal(err):
		return roomstate.Room{}, tools.Errorf(tools.CodeForbidden, "you are not a member of room %s", room)
	case err != nil:
		return roomstate.Room{}, err
	case !r.Joined(c.UserID):
		return roomstate.Room{}, tools.Errorf(tools.CodeForbidden, "you are not a member of room %s", room)
	}
	return r, nil
}

// infoOf is a room's record from its state: named by its m.room.name, else
// its canonical alias, else its id (as roomInfo reads them).
func (h *Reader) infoOf(r roomstate.Room) tools.RoomInfo {
	info := tools.RoomInfo{ID: r.ID, Transport: h.opts.Transport, Name: r.Name}
	if info.Name == "" {
		info.Name = string(r.Alias)
	}
	if info.Name == "" {
		info.Name = string(r.ID)
	}
	return info
}

func (h *Reader) roomInfo(ctx context.Context, cli *mautrix.Client, room id.RoomID) tools.RoomInfo {
	info := tools.RoomInfo{ID: room, Transport: h.opts.Transport}
	var name event.RoomNameEventContent
	if err := cli.StateEvent(ctx, room, event.StateRoomName, "", &name); err == nil && name.Name != "" {
		info.Name = name.Name
		return info
	}
	var alias event.CanonicalAliasEventContent
	if err := cli.StateEvent(ctx, room, event.StateCanonicalAlias, "", &alias); err == nil && alias.Alias != "" {
		info.Name = string(alias.Alias)
		return info
	}
	info.Name = string(room)
	return info
}

// RoomInfo is zooid_get_room_info for the session's room: from the room
// state when the Reader has it (no homeserver request while it is current).
// Without it, the membership check and the name read are sent together, so
// the call waits for one homeserver round trip instead of two; the name is
// used only once the check passed (the homeserver answers the read either
// way, so a non-member learns nothing from it), and the read is cancelled and
// waited for when it fails.
func (h *Reader) RoomInfo(ctx context.Context, c tools.Caller) (tools.RoomInfo, error) {
	if c.Room == "" {
		return tools.RoomInfo{}, tools.Errorf(tools.CodeForbidden, "this session is not in a room")
	}
	cli, err := h.client(c)
	if err != nil {
		return tools.RoomInfo{}, err
	}
	if h.opts.State != nil {
		r, err := h.joinedState(ctx, c, c.Room)
		if err != nil {
			return tools.RoomInfo{}, err
		}
		return h.infoOf(r), nil
	}
	nctx, cancel := context.WithCancel(ctx)
	defer cancel()
	named := make(chan tools.RoomInfo, 1)
	go func() { named <- h.roomInfo(nctx, cli, c.Room) }() // owner: RoomInfo, which waits for it
	if err := checkJoined(ctx, cli, c.UserID, c.Room); err != nil {
		cancel()
		<-named
		return tools.RoomInfo{}, err
	}
	return <-named, nil
}

// roomNamesInFlight bounds the name reads zooid_get_rooms keeps open at once:
// enough that an agent bound to a handful of rooms waits for one round trip,
// few enough that one call cannot flood the homeserver.
const roomNamesInFlight = 8

// Rooms is zooid_get_rooms: the rooms the caller is bound to and has joined, in
// binding order. A room dropped from zooid.yaml is not listed even while the
// agent's user is still in it. With the room state, membership and names
// come from it; without, the rooms' names are read concurrently (at most
// roomNamesInFlight at once), so the call costs about one name read's round
// trip however many rooms the agent is bound to, not one per room.
func (h *Reader) Rooms(ctx context.Context, c tools.Caller) ([]tools.RoomInfo, error) {
	cli, err := h.client(c)
	if err != nil {
		return nil, err
	}
	if h.opts.State != nil {
		var out []tools.RoomInfo
		for _, room := range c.Rooms {
			r, err := h.joinedState(ctx, c, room)
			var refused *tools.Error
			if errors.As(err, &refused) && refused.Code == tools.CodeForbidden {
				continue
			}
			if err != nil {
				return nil, err
			}
			if !slices.ContainsFunc(out, func(i tools.RoomInfo) bool { return i.ID == room }) {
				out = append(out, h.infoOf(r))
			}
		}
		return out, nil
	}
	resp, err := cli.JoinedRooms(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading joined rooms of %s: %w", c.UserID, err)
	}
	var rooms []id.RoomID
	for _, room := range c.Rooms {
		if slices.Contains(resp.JoinedRooms, room) && !slices.Contains(rooms, room) {
			rooms = append(rooms, room)
		}
	}
	out := make([]tools.RoomInfo, len(rooms))
	slots := make(chan struct{}, roomNamesInFlight)
	var wg sync.WaitGroup
	for i, room := range rooms {
		wg.Go(func() { // owner: Rooms, which waits for all of them below
			slots <- struct{}{}
			defer func() { <-slots }()
			out[i] = h.roomInfo(ctx, cli, room)
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		// A name read cut short falls back to the room id; say the call was
		// cancelled rather than answer with names that only look read.
		return nil, fmt.Errorf("reading the names of %d rooms: %w", len(rooms), err)
	}
	return out, nil
}

// target resolves a zooid_send_message room, written in any form zooid.yaml
// accepts (room id, full alias, or an alias without server on the agent's own
// server), to a room the caller is bound to and joined.
func (h *Reader) target(ctx context.Context, cli *mautrix.Client, c tools.Caller, room string) (id.RoomID, error) {
	notIn := func() error {
		return tools.Errorf(tools.CodeNotInRoom, "%s is not among your rooms; see zooid_get_rooms", room)
	}
	ref, err := config.ParseRoomRef(room, c.UserID.Homeserver())
	if err != nil {
		return "", tools.Errorf(tools.CodeInvalidArgument, "room %s", err)
	}
	target, isID := ref.RoomID()
	if alias, isAlias := ref.Alias(); isAlias {
		resp, err := cli.ResolveAlias(ctx, alias)
		if err != nil {
			if errors.Is(err, mautrix.MNotFound) || isRefusal(err) {
				return "", notIn()
			}
			return "", fmt.Errorf("resolving %s: %w", alias, err)
		}
		target = resp.RoomID
	} else if !isID {
		return "", notIn()
	}
	if !slices.Contains(c.Rooms, target) {
		return "", notIn()
	}
	joined, err := cli.JoinedRooms(ctx)
	if err != nil {
		return "", fmt.Errorf("reading joined rooms of %s: %w", c.UserID, err)
	}
	if !slices.Contains(joined.JoinedRooms, target) {
		return "", notIn()
	}
	return target, nil
}

var userMention = regexp.MustCompile(`@[a-z0-9._=/+\-]+:[A-Za-z0-9.\-]+(:[0-9]+)?`)

// Send is zooid_send_message. The post is an m.notice (agent prose is notices,
// so .m.rule.suppress_notices keeps it quiet); full user ids of joined members
// written in the text become m.mentions, so their clients notify them. No
// agent is woken by it: the router wakes nobody on an agent's own post (only
// the daemon's handoffs and task roots wake agents), which keeps agents from
// looping on each other.
func (h *Reader) Send(ctx context.Context, c tools.Caller, room string, thread id.EventID, body string) (tools.SendResult, error) {
	cli, err := h.client(c)
	if err != nil {
		return tools.SendResult{}, err
	}
	target, err := h.target(ctx, cli, c, room)
	if err != nil {
		return tools.SendResult{}, err
	}
	content := &event.MessageEventContent{MsgType: event.MsgNotice, Body: body}
	if thread != "" {
		if _, err := h.getRoot(ctx, cli, target, thread); err != nil {
			return tools.SendResult{}, err
		}
		latest := thread
		if resp, err := cli.GetRelations(ctx, target, thread, &mautrix.ReqGetRelations{
			RelationType: event.RelThread, Dir: mautrix.DirectionBackward, Limit: 1,
		}); err == nil && len(resp.Chunk) > 0 && threadOf(resp.Chunk[0]) == thread {
			latest = resp.Chunk[0].ID
		}
		content.RelatesTo = zevent.ThreadReply(thread, latest)
	}
	if ids := userMention.FindAllString(body, -1); len(ids) > 0 {
		if members, err := cli.JoinedMembers(ctx, target); err == nil {
			mentions := &event.Mentions{}
			for _, s := range ids {
				uid := id.UserID(s)
				if _, ok := members.Joined[uid]; ok && uid != c.UserID && !slices.Contains(mentions.UserIDs, uid) {
					mentions.UserIDs = append(mentions.UserIDs, uid)
				}
			}
			if len(mentions.UserIDs) > 0 {
				content.Mentions = mentions
			}
		}
	}
	txn := newTxnID()
	var evtID id.EventID
	if h.opts.Send != nil {
		evtID, err = h.opts.Send(ctx, c.UserID, target, content, txn)
	} else {
		var resp *mautrix.RespSendEvent
		resp, err = cli.SendMessageEvent(ctx, target, event.EventMessage, content, mautrix.ReqSendEvent{TransactionID: txn})
		if resp != nil {
			evtID = resp.EventID
		}
	}
	if err != nil {
		if isRefusal(err) {
			return tools.SendResult{}, tools.Errorf(tools.CodeForbidden, "the homeserver refused your message in %s", room)
		}
		return tools.SendResult{}, fmt.Errorf("sending into %s: %w", target, err)
	}
	h.notePost(c.UserID, target, evtID)
	return tools.SendResult{EventID: evtID, ThreadID: thread}, nil
}

func newTxnID() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("history: crypto/rand failed: %v", err))
	}
	return "zooid-mcp-" + hex.EncodeToString(b)
}
