package steps

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/fakehs"
)

// The fake homeserver across a restart: the server itself, the requests it
// turned away, and the transaction id a post landed with.

// fakeServer is the scenario's fake homeserver, for what only it can do.
func (w *world) fakeServer(ctx context.Context, what string) (*fakehs.Server, error) {
	if err := w.start(ctx); err != nil {
		return nil, err
	}
	f, ok := w.lease.hs.(fakeHS)
	if !ok {
		return nil, fmt.Errorf("only the fake homeserver can %s; tag the scenario %s", what, FakeOnlyTag)
	}
	return f.srv, nil
}

func turnedAway(rs []fakehs.TurnedAway) string {
	if len(rs) == 0 {
		return "none"
	}
	var b strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&b, "\n    %s %s %s from %s", r.At.Format("15:04:05.000"), r.Method, r.Path, r.User)
	}
	return b.String()
}

// postTxnID is the transaction id the agent's post of text in the current
// thread landed with, as the homeserver shows it to the appservice.
func (w *world) postTxnID(ctx context.Context, agent, text string) (string, error) {
	if w.thread == nil {
		return "", errors.New("there is no current thread yet")
	}
	msgs, err := w.readRoom(ctx, w.thread.room, 3)
	if err != nil {
		return "", err
	}
	mine, seen := w.fromAgent(msgs, agent)
	var evID id.EventID
	for _, m := range mine {
		if m.body == text && m.thread == w.thread.root {
			if evID != "" {
				return "", fmt.Errorf("%s posted %q twice in the thread: %s", agent, text, seen)
			}
			evID = m.id
		}
	}
	if evID == "" {
		return "", fmt.Errorf("%s has not posted %q in the thread: %s", agent, text, seen)
	}
	cli, err := w.clientFor(ctx, w.agentUser(agent))
	if err != nil {
		return "", err
	}
	ev, err := cli.GetEvent(ctx, w.thread.room.id, evID)
	if err != nil {
		return "", fmt.Errorf("reading %s's post %s: %w", agent, evID, err)
	}
	if ev.Unsigned.TransactionID == "" {
		return "", fmt.Errorf("%s's post %s shows no transaction_id to its appservice", agent, evID)
	}
	return ev.Unsigned.TransactionID, nil
}
