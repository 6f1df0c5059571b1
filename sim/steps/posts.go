package steps

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/zevent"
)

// Reading rooms back through the client-server API as a human member: messages,
// threads, dev.zooid.error events, and waiting for an agent's post.

// seenMsg is a message read back from the homeserver.
type seenMsg struct {
	id      id.EventID
	sender  id.UserID
	msgtype string
	body    string
	thread  id.EventID // m.thread root; empty when top-level
}

func (m seenMsg) String() string {
	where := "top-level"
	if m.thread != "" {
		where = "in thread " + string(m.thread)
	}
	return fmt.Sprintf("%s %s %s %q", m.sender, m.msgtype, where, m.body)
}

// seenOf is a message event as the steps compare it.
func seenOf(ev *event.Event) seenMsg {
	m := seenMsg{id: ev.ID, sender: ev.Sender, thread: zevent.ThreadRoot(ev)}
	m.msgtype, _ = ev.Content.Raw["msgtype"].(string)
	m.body, _ = ev.Content.Raw["body"].(string)
	return m
}

// readRoom reads the newest messages of a room through the client-server API
// as a human member, newest first.
func (w *world) readRoom(ctx context.Context, r *room, pages int) ([]seenMsg, error) {
	var out []seenMsg
	err := w.pageBack(ctx, r, pages, func(ev *event.Event) {
		if ev.Type == event.EventMessage {
			out = append(out, seenOf(ev))
		}
	})
	return out, err
}

// pageBack hands each event of a room's newest pages pages of 100 to each,
// newest first, read through the client-server API as the first human member
// (so it holds on any homeserver); it stops early at the room's start.
func (w *world) pageBack(ctx context.Context, r *room, pages int, each func(*event.Event)) error {
	reader := w.humans[w.humanSeq[0]]
	from := ""
	for range pages {
		resp, err := reader.cli.Messages(ctx, r.id, from, "", mautrix.DirectionBackward, nil, 100)
		if err != nil {
			return fmt.Errorf("reading %s as %s: %w", r.name, reader.name, err)
		}
		for _, ev := range resp.Chunk {
			each(reader.plain(ctx, ev))
		}
		if resp.End == "" || len(resp.Chunk) == 0 {
			return nil
		}
		from = resp.End
	}
	return nil
}

// plain is ev as the human reads it: an m.room.encrypted event decrypted
// when the human has a device holding its key (an agent's encrypted post
// reads as the message it is), else ev as it came.
func (h *human) plain(ctx context.Context, ev *event.Event) *event.Event {
	if h.dev == nil || ev.Type != event.EventEncrypted {
		return ev
	}
	if ev.Content.Parsed == nil {
		if err := ev.Content.ParseRaw(event.EventEncrypted); err != nil {
			return ev
		}
	}
	dec, err := h.dev.Decrypt(ctx, ev)
	if err != nil {
		return ev
	}
	return dec
}

// readThread reads the newest replies of the thread on root through
// /relations, in pages of 100, newest first, as the first human member. The
// reply is picked by its own m.thread relation, so a server that ignores the
// relation type filter answers the same.
func (w *world) readThread(ctx context.Context, r *room, root id.EventID, pages int) ([]seenMsg, error) {
	reader := w.humans[w.humanSeq[0]]
	var out []seenMsg
	from := ""
	for range pages {
		resp, err := reader.cli.GetRelations(ctx, r.id, root, &mautrix.ReqGetRelations{
			RelationType: event.RelThread, Dir: mautrix.DirectionBackward, From: from, Limit: 100})
		var he mautrix.HTTPError
		if errors.As(err, &he) && he.Response != nil && he.Response.StatusCode == http.StatusNotFound && from == "" {
			// A root the server doesn't show yet (Synapse and fakehs answer
			// 404 "Unknown parent event"; fakehs's visibility delay) has no
			// replies to see yet either.
			return nil, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading the thread %s of %s as %s: %w", string(root), r.name, reader.name, err)
		}
		for _, ev := range resp.Chunk {
			ev = reader.plain(ctx, ev)
			if m := seenOf(ev); ev.Type == event.EventMessage && m.thread == root {
				out = append(out, m)
			}
		}
		if from = resp.NextBatch; from == "" {
			break
		}
	}
	return out, nil
}

// fromAgent filters messages of agent, rendering the rest for failure messages.
func (w *world) fromAgent(msgs []seenMsg, agent string) (mine []seenMsg, seen string) {
	uid := w.agentUser(agent)
	var b strings.Builder
	for _, m := range msgs {
		if m.sender == uid {
			mine = append(mine, m)
			if len(mine) <= 12 {
				fmt.Fprintf(&b, "\n    %s", m)
			}
		}
	}
	if len(mine) > 12 {
		b.WriteString("\n    …")
	}
	if len(mine) == 0 {
		return nil, fmt.Sprintf("no message from %s among the newest %d", agent, len(msgs))
	}
	return mine, fmt.Sprintf("%d messages from %s, newest first:%s", len(mine), agent, b.String())
}

// waitPost waits until the agent has posted a message matching match in the
// room, then sends a barrier and checks it posted exactly one, an m.notice in
// the expected place: a duplicate posted after the first is caught too.
func (w *world) waitPost(ctx context.Context, agent string, r *room, what string, thread id.EventID, match func(seenMsg) bool) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	if _, err := w.agent(agent); err != nil {
		return err
	}
	var found []seenMsg
	lookIn := func(read func() ([]seenMsg, error)) func() (bool, string, error) {
		return func() (bool, string, error) {
			msgs, err := read()
			if err != nil {
				return false, "", err
			}
			mine, seen := w.fromAgent(msgs, agent)
			found = found[:0]
			for _, m := range mine {
				if match(m) {
					found = append(found, m)
				}
			}
			return len(found) > 0, seen, nil
		}
	}
	inRoom := lookIn(func() ([]seenMsg, error) { return w.readRoom(ctx, r, 3) })
	// Waiting on a thread reads only the thread: on a real homeserver a poll
	// of the room's newest 300 events, several times a second in every
	// scenario, is work the homeserver does instead of the scenario's.
	poll := inRoom
	if thread != "" {
		poll = lookIn(func() ([]seenMsg, error) { return w.readThread(ctx, r, thread, 3) })
	}
	if err := w.eventually(ctx, fmt.Sprintf("%s posts %s in %s", agent, what, r.name), poll); err != nil {
		if thread != "" {
			// Say so when it was posted, but elsewhere.
			if ok, _, rerr := inRoom(); rerr == nil && ok {
				return fmt.Errorf("%w; it is in %s outside the thread: %v", err, r.name, found)
			}
		}
		return err
	}
	if err := w.barrier(ctx, agent); err != nil {
		return err
	}
	// The final count reads the room, so a copy posted outside the thread
	// is caught too.
	if _, _, err := inRoom(); err != nil {
		return err
	}
	if len(found) != 1 {
		return fmt.Errorf("%s posted %s %d times: %v", agent, what, len(found), found)
	}
	m := found[0]
	if m.msgtype != "m.notice" {
		return fmt.Errorf("%s posted %s as %s, want m.notice", agent, what, m.msgtype)
	}
	if m.thread != thread {
		return fmt.Errorf("%s posted %s in thread %q, want %q", agent, what, m.thread, thread)
	}
	return nil
}

// errorEvent is a dev.zooid.error event read back from the homeserver.
type errorEvent struct {
	sender id.UserID
	agent  string
	code   string
	thread id.EventID
}

func (e errorEvent) String() string {
	return fmt.Sprintf("%s code=%s agent=%s thread=%s", e.sender, e.code, e.agent, string(e.thread))
}

// readErrors reads the dev.zooid.error events among a room's newest 300
// events, as a human member.
func (w *world) readErrors(ctx context.Context, r *room) ([]errorEvent, error) {
	var out []errorEvent
	err := w.pageBack(ctx, r, 3, func(ev *event.Event) {
		if ev.Type.Type != zevent.EventError.Type {
			return
		}
		e := errorEvent{sender: ev.Sender}
		e.agent, _ = ev.Content.Raw["agent"].(string)
		e.code, _ = ev.Content.Raw["code"].(string)
		e.thread = zevent.ThreadRoot(ev)
		out = append(out, e)
	})
	return out, err
}
