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
		defer w.timing.add(phaseSeed, time.Now())
		return w.seedRoom(ctx, r, creator)
	}
	if r.replay != nil && !r.replay.play {
		defer w.timing.add(phaseSeed, time.Now())
		return w.replayRoom(ctx, r, creator)
	}
	defer w.timing.add(phaseRooms, time.Now())
	req := &mautrix.ReqCreateRoom{
		Preset: "public_chat", Visibility: "private",
		RoomAliasName: n.aliasLocalpart(r.name), Name: r.name,
	}
	if r.encrypted {
		req.InitialState = append(req.InitialState, &event.Event{
			Type: event.StateEncryption, StateKey: new(string),
			Content: event.Content{Parsed: &event.EncryptionEventContent{Algorithm: id.AlgorithmMegolmV1}},
		})
	}
	resp, err := creator.cli.CreateRoom(ctx, req)
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

// generate lays out the generated history: each message's sender (by step
// name) and body, and the events to seed given each sender's id (ids[i] is
// the id of b.senders[i]) and the first message's time.
func (b *busySpec) generate(ids []id.UserID, base time.Time) ([]seeded, []seedEvent) {
	senderIdx, roots := b.layout()
	out := make([]seeded, b.total)
	events := make([]seedEvent, 0, b.total)
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
		out[i] = s
		tr := roots[i]
		if tr < 0 {
			tr = -1
		}
		events = append(events, seedEvent{sender: ids[senderIdx[i]], body: s.body, ts: base.Add(time.Duration(i) * time.Second), threadRoot: tr})
	}
	return out, events
}

// seedRoom gives a room its generated history: imported in one go where the
// homeserver can (fakehs), sent message by message where it can't.
func (w *world) seedRoom(ctx context.Context, r *room, creator *human) error {
	b := r.busy
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
	r.seeded, seed.events = b.generate(ids, base)
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
	fillSeeded(r.seeded, evIDs, seed.events)
	return nil
}

// fillSeeded gives the generated messages their event ids and thread roots.
func fillSeeded(msgs []seeded, evIDs []id.EventID, events []seedEvent) {
	for i := range msgs {
		msgs[i].id = evIDs[i]
		if tr := events[i].threadRoot; tr >= 0 {
			msgs[i].root = evIDs[tr]
		}
	}
}

// seedBySending creates the room and sends the history through the
// client-server API, each message as its sender.
func (w *world) seedBySending(ctx context.Context, r *room, seed roomSeed) error {
	creator := w.humans[w.humanSeq[0]]
	roomID, evIDs, err := sendSeed(ctx, creator.cli, w.clientFor, seed)
	if roomID != "" {
		r.id, r.created = roomID, true
	}
	if err != nil {
		return err
	}
	fillSeeded(r.seeded, evIDs, seed.events)
	return nil
}

// sendSeed creates the seed's room as creator, joins its members (clients
// from clientFor) and sends its history message by message.
func sendSeed(ctx context.Context, creator *mautrix.Client, clientFor func(context.Context, id.UserID) (*mautrix.Client, error), seed roomSeed) (id.RoomID, []id.EventID, error) {
	resp, err := creator.CreateRoom(ctx, &mautrix.ReqCreateRoom{
		Preset: "public_chat", Visibility: "private", RoomAliasName: seed.aliasLocalpart, Name: seed.name,
	})
	if err != nil {
		return "", nil, fmt.Errorf("creating %s: %w", seed.name, err)
	}
	roomID := resp.RoomID
	clients := map[id.UserID]*mautrix.Client{creator.UserID: creator}
	for _, m := range seed.members {
		if _, ok := clients[m]; ok {
			continue
		}
		cli, err := clientFor(ctx, m)
		if err != nil {
			return roomID, nil, err
		}
		if _, err := cli.JoinRoom(ctx, string(roomID), nil); err != nil {
			return roomID, nil, fmt.Errorf("%s joining %s: %w", m, seed.name, err)
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
		sent, err := clients[e.sender].SendMessageEvent(ctx, roomID, typ, content)
		if err != nil {
			return roomID, nil, fmt.Errorf("seeding %s, message %d of %d: %w", seed.name, i+1, len(seed.events), err)
		}
		evIDs[i] = sent.EventID
	}
	return roomID, evIDs, nil
}

// clientFor is a client acting as a human or (through the appservice) an agent.
func (w *world) clientFor(ctx context.Context, uid id.UserID) (*mautrix.Client, error) {
	for _, h := range w.humans {
		if h.id == uid {
			return h.cli, nil
		}
	}
	return appserviceUser(ctx, w.lease.hs.baseURL(), w.lease.reg.AppToken, uid)
}

// appserviceUser is a client acting as uid through the appservice whose
// as_token is asToken, registering the user first if it is new.
func appserviceUser(ctx context.Context, baseURL, asToken string, uid id.UserID) (*mautrix.Client, error) {
	cli, err := mautrix.NewClient(baseURL, uid, asToken)
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
