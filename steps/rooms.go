package steps

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/zevent"
)

// busySpec is a generated room history: total messages, of which threads are
// thread roots, from the named senders in turn.
type busySpec struct {
	total   int
	threads int
	senders []string
}

// seeded is one message of a generated history.
type seeded struct {
	id     id.EventID
	sender string
	body   string
	root   id.EventID // thread root for a reply; empty for top-level
	isRoot bool
}

// layout decides the generated history: roots spread evenly, the other
// messages alternating between top-level chatter and replies to one of the
// last few roots, so threads interleave as in a real room. It is
// deterministic so a failure can be reproduced.
func (b *busySpec) layout() (senders []int, roots []int) {
	rng := rand.New(rand.NewPCG(uint64(b.total), uint64(b.threads)))
	roots = make([]int, b.total)
	senders = make([]int, b.total)
	step := b.total + 1 // no roots at all
	if b.threads > 0 {
		step = b.total / b.threads
	}
	var open []int
	for i := range b.total {
		senders[i] = i % len(b.senders)
		roots[i] = -1
		switch {
		case len(open) < b.threads && i%step == 0:
			open = append(open, i)
			roots[i] = -2 // a root itself
		case len(open) > 0 && rng.IntN(2) == 0:
			recent := open[max(0, len(open)-5):]
			roots[i] = recent[rng.IntN(len(recent))]
		}
	}
	return senders, roots
}

// createRoom creates (or imports) a declared room and makes every human a member.
func (w *world) createRoom(ctx context.Context, r *room) error {
	if r.created {
		return nil
	}
	creator := w.humans[w.humanSeq[0]]
	n := w.names()
	if r.busy != nil {
		return w.seedRoom(ctx, r, creator)
	}
	if r.replay != nil && !r.replay.play {
		return w.replayRoom(ctx, r, creator)
	}
	resp, err := creator.cli.CreateRoom(ctx, &mautrix.ReqCreateRoom{
		Preset: "public_chat", Visibility: "private",
		RoomAliasName: n.aliasLocalpart(r.name), Name: r.name,
	})
	if err != nil {
		return fmt.Errorf("creating %s as %s: %w", r.name, creator.name, err)
	}
	r.id, r.created = resp.RoomID, true
	for _, hn := range w.humanSeq[1:] {
		if err := w.join(ctx, w.humans[hn], r); err != nil {
			return err
		}
	}
	return nil
}

// join makes a human a member of a room.
func (w *world) join(ctx context.Context, h *human, r *room) error {
	if _, err := h.cli.JoinRoom(ctx, string(r.id), nil); err != nil {
		return fmt.Errorf("%s joining %s: %w", h.name, r.name, err)
	}
	return nil
}

// seedRoom gives a room its generated history: imported in one go where the
// homeserver can (fakehs), sent message by message where it can't.
func (w *world) seedRoom(ctx context.Context, r *room, creator *human) error {
	b := r.busy
	senderIdx, roots := b.layout()
	ids := make([]id.UserID, len(b.senders))
	for i, s := range b.senders {
		uid, err := w.userID(s)
		if err != nil {
			return fmt.Errorf("seeding %s: %w", r.name, err)
		}
		ids[i] = uid
	}
	members := []id.UserID{}
	for _, hn := range w.humanSeq {
		members = append(members, w.humans[hn].id)
	}
	for i, s := range b.senders {
		if _, ok := w.agents[s]; ok {
			members = append(members, ids[i])
		}
	}
	base := time.Now().Add(-time.Duration(b.total+60) * time.Second).UTC().Truncate(time.Second)
	seed := roomSeed{creator: creator.id, name: r.name, aliasLocalpart: w.names().aliasLocalpart(r.name), members: members}
	r.seeded = make([]seeded, b.total)
	thread := 0
	for i := range b.total {
		s := seeded{sender: b.senders[senderIdx[i]]}
		switch roots[i] {
		case -2:
			thread++
			s.isRoot = true
			s.body = fmt.Sprintf("thread %02d: %s opens topic %d", thread, s.sender, thread)
		case -1:
			s.body = fmt.Sprintf("message %04d from %s", i, s.sender)
		default:
			s.body = fmt.Sprintf("reply %04d from %s", i, s.sender)
		}
		r.seeded[i] = s
		tr := roots[i]
		if tr < 0 {
			tr = -1
		}
		seed.events = append(seed.events, seedEvent{sender: ids[senderIdx[i]], body: s.body, ts: base.Add(time.Duration(i) * time.Second), threadRoot: tr})
	}
	roomID, evIDs, ok, err := w.lease.hs.importRoom(seed)
	if err != nil {
		return err
	}
	if !ok {
		return w.seedBySending(ctx, r, seed)
	}
	if len(evIDs) != b.total {
		return fmt.Errorf("seeding %s: homeserver returned %d event ids for %d messages", r.name, len(evIDs), b.total)
	}
	r.id, r.created = roomID, true
	w.fillSeeded(r, evIDs, seed)
	return nil
}

func (w *world) fillSeeded(r *room, evIDs []id.EventID, seed roomSeed) {
	for i := range r.seeded {
		r.seeded[i].id = evIDs[i]
		if tr := seed.events[i].threadRoot; tr >= 0 {
			r.seeded[i].root = evIDs[tr]
		}
	}
}

// seedBySending creates the room and sends the history through the
// client-server API, each message as its sender.
func (w *world) seedBySending(ctx context.Context, r *room, seed roomSeed) error {
	creator := w.humans[w.humanSeq[0]]
	resp, err := creator.cli.CreateRoom(ctx, &mautrix.ReqCreateRoom{
		Preset: "public_chat", Visibility: "private", RoomAliasName: seed.aliasLocalpart, Name: seed.name,
	})
	if err != nil {
		return fmt.Errorf("creating %s: %w", r.name, err)
	}
	r.id, r.created = resp.RoomID, true
	clients := map[id.UserID]*mautrix.Client{creator.id: creator.cli}
	for _, m := range seed.members {
		if _, ok := clients[m]; ok {
			continue
		}
		cli, err := w.clientFor(ctx, m)
		if err != nil {
			return err
		}
		if _, err := cli.JoinRoom(ctx, string(r.id), nil); err != nil {
			return fmt.Errorf("%s joining %s: %w", m, r.name, err)
		}
		clients[m] = cli
	}
	evIDs := make([]id.EventID, len(seed.events))
	for i, e := range seed.events {
		content := map[string]any{"msgtype": "m.text", "body": e.body}
		if e.threadRoot >= 0 {
			content["m.relates_to"] = threadRelation(evIDs[e.threadRoot], "")
		}
		typ := event.EventMessage
		if e.send != nil {
			content = e.send(evIDs[:i])
			typ = event.Type{Type: e.typ, Class: event.MessageEventType}
		}
		sent, err := clients[e.sender].SendMessageEvent(ctx, r.id, typ, content)
		if err != nil {
			return fmt.Errorf("seeding %s, message %d of %d: %w", r.name, i+1, len(seed.events), err)
		}
		evIDs[i] = sent.EventID
	}
	w.fillSeeded(r, evIDs, seed)
	return nil
}

// clientFor is a client acting as a human or (through the appservice) an agent.
func (w *world) clientFor(ctx context.Context, uid id.UserID) (*mautrix.Client, error) {
	for _, h := range w.humans {
		if h.id == uid {
			return h.cli, nil
		}
	}
	cli, err := mautrix.NewClient(w.lease.hs.baseURL(), uid, w.lease.reg.AppToken)
	if err != nil {
		return nil, fmt.Errorf("appservice client for %s: %w", uid, err)
	}
	cli.SetAppServiceUserID = true
	_, _, err = cli.Register(ctx, &mautrix.ReqRegister[any]{Username: uid.Localpart(), Type: mautrix.AuthTypeAppservice, InhibitLogin: true})
	if err != nil && !errors.Is(err, mautrix.MUserInUse) {
		return nil, fmt.Errorf("registering %s through the appservice: %w", uid, err)
	}
	return cli, nil
}

// threadRelation is the m.relates_to of a human's threaded reply; inReplyTo is
// the latest event of the thread (the root when empty) for clients without
// thread support.
func threadRelation(root, inReplyTo id.EventID) *event.RelatesTo {
	if inReplyTo == "" {
		inReplyTo = root
	}
	return zevent.ThreadReply(root, inReplyTo)
}
