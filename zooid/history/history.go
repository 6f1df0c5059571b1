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
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/tools"
	"github.com/zooid-dev/zooid/zooid/zevent"
)

// Options configure a History.
type Options struct {
	// Client returns the impersonating appservice client for a user (as_token with
	// SetAppServiceUserID).
	Client func(user id.UserID) *mautrix.Client
	// Agents says whether a user is one of the daemon's configured agents, and its name.
	Agents func(user id.UserID) (name string, ok bool)
	// CursorKey is the HMAC key of cursors; random per History when nil.
	CursorKey []byte
	// Transport is the transport name reported in room records; default "matrix".
	Transport string
	// Send posts a message as a user with a txn id (the daemon's retrying sender);
	// when nil, the impersonating client sends directly.
	Send func(ctx context.Context, as id.UserID, room id.RoomID, content *event.MessageEventContent, txnID string) (id.EventID, error)
}

// History reads and posts room content as agents. It is safe for concurrent use.
type History struct {
	opts Options
	key  []byte
}

var _ tools.Rooms = (*History)(nil)

// New returns a History; a nil CursorKey gets a random one.
func New(opts Options) *History {
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
	return &History{opts: opts, key: key}
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

func (h *History) client(c tools.Caller) (*mautrix.Client, error) {
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
func (h *History) joinedClient(ctx context.Context, c tools.Caller, room id.RoomID) (*mautrix.Client, error) {
	if room == "" {
		return nil, tools.Errorf(tools.CodeForbidden, "this session is not in a room")
	}
	cli, err := h.client(c)
	if err != nil {
		return nil, err
	}
	var member event.MemberEventContent
	err = cli.StateEvent(ctx, room, event.StateMember, c.UserID.String(), &member)
	if err != nil {
		if isRefusal(err) {
			return nil, tools.Errorf(tools.CodeForbidden, "you are not a member of room %s", room)
		}
		return nil, fmt.Errorf("reading own membership in %s: %w", room, err)
	}
	if member.Membership != event.MembershipJoin {
		return nil, tools.Errorf(tools.CodeForbidden, "you are not a member of room %s", room)
	}
	return cli, nil
}

func isRefusal(err error) bool {
	return errors.Is(err, mautrix.MForbidden) || errors.Is(err, mautrix.MNotFound) || httpStatus(err) == http.StatusForbidden
}

// isUnsupported says an endpoint is missing on this homeserver (fall back).
func isUnsupported(err error) bool {
	if errors.Is(err, mautrix.MUnrecognized) {
		return true
	}
	switch httpStatus(err) {
	case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusNotImplemented, http.StatusBadRequest:
		return !errors.Is(err, mautrix.MNotFound) && !errors.Is(err, mautrix.MForbidden)
	}
	return false
}

func httpStatus(err error) int {
	var he mautrix.HTTPError
	if errors.As(err, &he) && he.Response != nil {
		return he.Response.StatusCode
	}
	var hp *mautrix.HTTPError
	if errors.As(err, &hp) && hp.Response != nil {
		return hp.Response.StatusCode
	}
	return 0
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
	if evt == nil || evt.Type != event.EventMessage {
		return ""
	}
	return zevent.ThreadRoot(evt)
}

// text renders an event as history text; ok is false for what is not history
// (state, reactions, redacted or unknown messages, edits, dev.zooid.* events).
func text(evt *event.Event) (string, bool) {
	rc, ok := parseContent(evt)
	if !ok {
		return "", false
	}
	if rc.RelatesTo != nil && rc.RelatesTo.Type == event.RelReplace {
		return "", false // an edit: the original carries the latest text
	}
	if evt.Unsigned.Relations != nil && evt.Unsigned.Relations.LatestEdit != nil {
		if edit, ok := parseContent(evt.Unsigned.Relations.LatestEdit); ok && len(edit.NewContent) > 0 {
			var nc rawContent
			if json.Unmarshal(edit.NewContent, &nc) == nil && nc.Body != "" {
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

func (h *History) message(evt *event.Event, body string) tools.Message {
	m := tools.Message{
		ID:        evt.ID,
		Sender:    evt.Sender,
		Text:      body,
		Timestamp: stamp(evt.Timestamp),
		ThreadID:  threadOf(evt),
	}
	if name, ok := h.opts.Agents(evt.Sender); ok {
		m.IsAgent, m.AgentName = true, name
	}
	return m
}

func isHistory(evt *event.Event) bool {
	_, ok := text(evt)
	return ok
}

var messageFilter = &mautrix.FilterPart{Types: []event.Type{event.EventMessage}}

func messagesFetch(cli *mautrix.Client, room id.RoomID, size int) chunkFetch {
	return func(ctx context.Context, from string) ([]*event.Event, string, string, error) {
		resp, err := cli.Messages(ctx, room, from, "", mautrix.DirectionBackward, messageFilter, size)
		if err != nil {
			return nil, "", "", wrapFetch("reading messages", room, err)
		}
		for _, evt := range resp.Chunk {
			evt.RoomID = room
		}
		return resp.Chunk, resp.Start, resp.End, nil
	}
}

func relationsFetch(cli *mautrix.Client, room id.RoomID, root id.EventID, size int) chunkFetch {
	return func(ctx context.Context, from string) ([]*event.Event, string, string, error) {
		resp, err := cli.GetRelations(ctx, room, root, &mautrix.ReqGetRelations{
			RelationType: event.RelThread,
			Dir:          mautrix.DirectionBackward,
			From:         from,
			Limit:        size,
		})
		if err != nil {
			return nil, "", "", fmt.Errorf("reading thread %s relations: %w", root, err)
		}
		return resp.Chunk, "", resp.NextBatch, nil
	}
}

// History is zooid_get_history: every message, newest page first, chronological
// within a page.
func (h *History) History(ctx context.Context, c tools.Caller, limit int, before string) (tools.MessagePage, error) {
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
	w := &walker{fetch: messagesFetch(cli, c.Room, min(limit+1, maxChunk))}
	if err := w.start(ctx, cur); err != nil {
		return tools.MessagePage{}, err
	}
	items, more, pos, err := collect(ctx, w, limit, isHistory, nil)
	if err != nil {
		return tools.MessagePage{}, err
	}
	page := tools.MessagePage{Messages: make([]tools.Message, 0, len(items)), HasMore: more}
	for i := len(items) - 1; i >= 0; i-- {
		body, _ := text(items[i].evt)
		page.Messages = append(page.Messages, h.message(items[i].evt, body))
	}
	if more {
		page.NextBefore = h.sealCursor(cursor{Tool: toolHistory, User: c.UserID, Room: c.Room, Mode: modeMessages, Token: pos.token, Last: pos.evt.ID})
	}
	return page, nil
}

// threadStats is what one scan learnt about thread replies.
type threadStats struct {
	count int
	last  int64
}

// RecentThreads is zooid_get_recent_threads: top-level messages and thread roots,
// newest first.
func (h *History) RecentThreads(ctx context.Context, c tools.Caller, limit int, before string) (tools.ThreadPage, error) {
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
	w := &walker{fetch: messagesFetch(cli, c.Room, recentChunk)}
	if err := w.start(ctx, cur); err != nil {
		return tools.ThreadPage{}, err
	}
	// A scan from the live end sees every reply of a root before the root itself,
	// so on the first page its own tally is exact without asking the server.
	fromLiveEnd := cur == nil
	seen := map[id.EventID]*threadStats{}
	bundles := false
	keep := func(evt *event.Event) bool {
		if evt.Unsigned.Relations != nil && evt.Unsigned.Relations.Thread != nil {
			bundles = true
		}
		if root := threadOf(evt); root != "" {
			st := seen[root]
			if st == nil {
				st = &threadStats{}
				seen[root] = st
			}
			st.count++
			st.last = max(st.last, evt.Timestamp)
			return false
		}
		return isHistory(evt)
	}
	items, more, pos, err := collect(ctx, w, limit, keep, nil)
	if err != nil {
		return tools.ThreadPage{}, err
	}
	page := tools.ThreadPage{Threads: make([]tools.ThreadOverview, 0, len(items)), HasMore: more}
	for _, it := range items {
		body, _ := text(it.evt)
		ov := tools.ThreadOverview{Message: h.message(it.evt, body)}
		count, last, err := h.replyStats(ctx, cli, c.Room, it.evt, seen[it.evt.ID], fromLiveEnd, bundles)
		if err != nil {
			return tools.ThreadPage{}, err
		}
		ov.ReplyCount = count
		ov.LastActivityAt = stamp(max(last, it.evt.Timestamp))
		page.Threads = append(page.Threads, ov)
	}
	if more {
		page.NextBefore = h.sealCursor(cursor{Tool: toolRecent, User: c.UserID, Room: c.Room, Mode: modeMessages, Token: pos.token, Last: pos.evt.ID})
	}
	return page, nil
}

// maxCountPages bounds the /relations pages read to count one thread's replies
// when the server bundles no aggregation: at most maxCountPages*maxChunk replies
// are counted (a larger thread reports that many).
const maxCountPages = 3

// replyStats finds a root's reply count and latest reply time: from the bundled
// m.thread aggregation, else from this scan when it began at the live end, else
// by counting /relations (bounded), else what this scan saw.
func (h *History) replyStats(ctx context.Context, cli *mautrix.Client, room id.RoomID, root *event.Event, st *threadStats, fromLiveEnd, bundles bool) (int, int64, error) {
	if rel := root.Unsigned.Relations; rel != nil && rel.Thread != nil {
		var last int64
		if rel.Thread.LatestEvent != nil {
			last = rel.Thread.LatestEvent.Timestamp
		}
		return rel.Thread.Count, last, nil
	}
	if st == nil {
		st = &threadStats{}
	}
	if fromLiveEnd || bundles {
		return st.count, st.last, nil
	}
	count, last, from := 0, int64(0), ""
	for range maxCountPages {
		resp, err := cli.GetRelations(ctx, room, root.ID, &mautrix.ReqGetRelations{
			RelationType: event.RelThread, Dir: mautrix.DirectionBackward, From: from, Limit: maxChunk,
		})
		if err != nil {
			if isUnsupported(err) {
				return st.count, st.last, nil
			}
			return 0, 0, fmt.Errorf("counting replies of %s: %w", root.ID, err)
		}
		for _, evt := range resp.Chunk {
			if threadOf(evt) == root.ID {
				count++
				last = max(last, evt.Timestamp)
			}
		}
		if resp.NextBatch == "" || resp.NextBatch == from || len(resp.Chunk) == 0 {
			break
		}
		from = resp.NextBatch
	}
	return max(count, st.count), max(last, st.last), nil
}

func (h *History) getRoot(ctx context.Context, cli *mautrix.Client, room id.RoomID, thread id.EventID) (*event.Event, error) {
	notFound := tools.Errorf(tools.CodeNotFound, "no thread %s in room %s", thread, room)
	evt, err := cli.GetEvent(ctx, room, thread)
	if err != nil {
		if isRefusal(err) || httpStatus(err) == http.StatusNotFound || httpStatus(err) == http.StatusBadRequest {
			return nil, notFound
		}
		return nil, fmt.Errorf("reading thread root %s: %w", thread, err)
	}
	if evt.RoomID != "" && evt.RoomID != room {
		return nil, notFound
	}
	evt.RoomID = room
	if evt.Type != event.EventMessage {
		return nil, notFound
	}
	if threadOf(evt) != "" {
		return nil, tools.Errorf(tools.CodeNotFound, "%s is a reply inside a thread, not a thread root; use its thread_id", thread)
	}
	return evt, nil
}

// ThreadHistory is zooid_get_thread_history: the root (first page only), then
// replies chronologically; pages go back in time.
func (h *History) ThreadHistory(ctx context.Context, c tools.Caller, thread id.EventID, limit int, before string) (tools.MessagePage, error) {
	var cur *cursor
	if before != "" {
		cc, err := h.openCursor(before, toolThread, c.UserID, c.Room, thread)
		if err != nil {
			return tools.MessagePage{}, err
		}
		cur = &cc
	}
	cli, err := h.joinedClient(ctx, c, c.Room)
	if err != nil {
		return tools.MessagePage{}, err
	}
	root, err := h.getRoot(ctx, cli, c.Room, thread)
	if err != nil {
		return tools.MessagePage{}, err
	}
	isReply := func(evt *event.Event) bool { return threadOf(evt) == thread && isHistory(evt) }

	mode := modeRelations
	if cur != nil {
		mode = cur.Mode
	}
	var items []item
	var more bool
	var pos item
	if mode == modeRelations {
		w := &walker{fetch: relationsFetch(cli, c.Room, thread, min(limit+1, maxChunk))}
		err = w.start(ctx, cur)
		if err == nil {
			items, more, pos, err = collect(ctx, w, limit, isReply, nil)
		}
		if err != nil && cur == nil && isUnsupported(err) {
			mode, err = modeScan, nil
		}
		if err != nil {
			return tools.MessagePage{}, err
		}
	}
	if mode == modeScan {
		// Fallback without /relations: scan the room backwards for this thread's
		// replies, stopping at the root (nothing older can reply to it); bounded
		// by maxScan events per page.
		w := &walker{fetch: messagesFetch(cli, c.Room, maxChunk)}
		if err := w.start(ctx, cur); err != nil {
			return tools.MessagePage{}, err
		}
		items, more, pos, err = collect(ctx, w, limit, isReply, func(evt *event.Event) bool { return evt.ID == thread })
		if err != nil {
			return tools.MessagePage{}, err
		}
	}
	page := tools.MessagePage{Messages: make([]tools.Message, 0, len(items)+1), HasMore: more}
	if cur == nil {
		body, ok := text(root)
		if !ok {
			body = ""
		}
		m := h.message(root, body)
		m.ThreadID = thread
		page.Messages = append(page.Messages, m)
	}
	for i := len(items) - 1; i >= 0; i-- {
		body, _ := text(items[i].evt)
		page.Messages = append(page.Messages, h.message(items[i].evt, body))
	}
	if more {
		page.NextBefore = h.sealCursor(cursor{Tool: toolThread, User: c.UserID, Room: c.Room, Thread: thread, Mode: mode, Token: pos.token, Last: pos.evt.ID})
	}
	return page, nil
}

// Members is zooid_get_members: the room's joined members, read as the caller.
func (h *History) Members(ctx context.Context, c tools.Caller) ([]tools.Member, error) {
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
	out := make([]tools.Member, 0, len(resp.Joined))
	for uid, m := range resp.Joined {
		mem := tools.Member{ID: uid, Name: m.DisplayName}
		if mem.Name == "" {
			mem.Name = uid.Localpart()
		}
		if name, ok := h.opts.Agents(uid); ok {
			mem.IsAgent, mem.AgentName = true, name
		}
		out = append(out, mem)
	}
	slices.SortFunc(out, func(a, b tools.Member) int { return strings.Compare(string(a.ID), string(b.ID)) })
	return out, nil
}

func (h *History) roomInfo(ctx context.Context, cli *mautrix.Client, room id.RoomID) tools.RoomInfo {
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

// RoomInfo is zooid_get_room_info for the session's room.
func (h *History) RoomInfo(ctx context.Context, c tools.Caller) (tools.RoomInfo, error) {
	cli, err := h.joinedClient(ctx, c, c.Room)
	if err != nil {
		return tools.RoomInfo{}, err
	}
	return h.roomInfo(ctx, cli, c.Room), nil
}

// Rooms is zooid_get_rooms: the rooms the caller's user has joined.
func (h *History) Rooms(ctx context.Context, c tools.Caller) ([]tools.RoomInfo, error) {
	cli, err := h.client(c)
	if err != nil {
		return nil, err
	}
	resp, err := cli.JoinedRooms(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading joined rooms of %s: %w", c.UserID, err)
	}
	out := make([]tools.RoomInfo, 0, len(resp.JoinedRooms))
	for _, room := range resp.JoinedRooms {
		out = append(out, h.roomInfo(ctx, cli, room))
	}
	return out, nil
}

var userMention = regexp.MustCompile(`@[a-z0-9._=/+\-]+:[A-Za-z0-9.\-]+(:[0-9]+)?`)

// Send is zooid_send_message. The post is an m.notice (agent prose is notices,
// so .m.rule.suppress_notices keeps it quiet); full user ids of joined members
// written in the text become m.mentions so they are woken as a human mention would.
func (h *History) Send(ctx context.Context, c tools.Caller, room string, thread id.EventID, body string) (tools.SendResult, error) {
	cli, err := h.client(c)
	if err != nil {
		return tools.SendResult{}, err
	}
	var target id.RoomID
	if strings.HasPrefix(room, "#") {
		resp, err := cli.ResolveAlias(ctx, id.RoomAlias(room))
		if err != nil {
			if errors.Is(err, mautrix.MNotFound) || isRefusal(err) {
				return tools.SendResult{}, tools.Errorf(tools.CodeNotInRoom, "no room %s among your rooms; see zooid_get_rooms", room)
			}
			return tools.SendResult{}, fmt.Errorf("resolving %s: %w", room, err)
		}
		target = resp.RoomID
	} else {
		target = id.RoomID(room)
	}
	joined, err := cli.JoinedRooms(ctx)
	if err != nil {
		return tools.SendResult{}, fmt.Errorf("reading joined rooms of %s: %w", c.UserID, err)
	}
	if !slices.Contains(joined.JoinedRooms, target) {
		return tools.SendResult{}, tools.Errorf(tools.CodeNotInRoom, "you are not a member of %s; valid targets are listed by zooid_get_rooms", room)
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
	return tools.SendResult{EventID: evtID, ThreadID: thread}, nil
}

func newTxnID() string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("history: crypto/rand failed: %v", err))
	}
	return "zooid-mcp-" + hex.EncodeToString(b)
}
