package steps

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/fakehs"
)

// restartSteps stop the fake homeserver and start it again on the same
// address with its state, and have it push transactions again.
func restartSteps(w *world) []stepDef {
	return []stepDef{
		{area: "setup", pattern: `^the homeserver stops until it has turned away (\d+) (GET|PUT|POST) (/\S+) from ([a-z0-9-]+)$`,
			example: `the homeserver stops until it has turned away 2 PUT /_matrix/client/v3/rooms/*/send/*/* from agent-a`,
			doc:     "Stops the fake homeserver as a process that went down (connections closed, each new request read and closed unanswered, appservice pushes paused) and has it start again by itself on the same address, with all its state, right after it turned away that many matching requests (fakehs StopUntil: exactly that many, however slow the run); @fake-only.",
			fn:      w.stepStopUntil},
		{area: "setup", pattern: `^the homeserver serves again on the same address with its state$`,
			example: `the homeserver serves again on the same address with its state`,
			doc:     "Waits until the stopped fake homeserver has started again, and checks each human's client, which has the address from before the stop, is answered there with its access token (the state is kept).",
			fn:      w.stepServesAgain},
		{area: "setup", pattern: `^the homeserver turned away (\d+) (GET|PUT|POST) (/\S+) from ([a-z0-9-]+)(?:, each the send of "([^"]*)" with its txn id)?$`,
			example: `the homeserver turned away 2 PUT /_matrix/client/v3/rooms/*/send/*/* from agent-a, each the send of "svc-a is up" with its txn id`,
			doc:     "Exactly that many matching requests were turned away while the homeserver was stopped; with a text, each was a send whose path ends in the txn id the agent's post of that text in the current thread landed with (so the retries kept one txn id and the post is the one retried).",
			fn:      w.stepTurnedAway},
		{area: "setup", pattern: `^the homeserver pushes again every transaction since "([^"]*)", with their txn ids$`,
			example: `the homeserver pushes again every transaction since "is svc-a up?", with their txn ids`,
			doc:     "Has the fake homeserver push to the daemon again every transaction already delivered from the one that carried the harness's message containing the text on, each with its own txn id, as a homeserver that lost the acknowledgements would; waits until the daemon has acknowledged all of them; @fake-only.",
			fn:      w.stepPushAgain},
	}
}

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

func (w *world) stepStopUntil(ctx context.Context, n int, method, path, agent string) error {
	srv, err := w.fakeServer(ctx, "be stopped")
	if err != nil {
		return err
	}
	if _, err := w.agent(agent); err != nil {
		return err
	}
	return srv.StopUntil(fakehs.Fault{Method: method, PathPattern: path, User: w.names().agent(agent)}, n)
}

func (w *world) stepServesAgain(ctx context.Context) error {
	srv, err := w.fakeServer(ctx, "be restarted")
	if err != nil {
		return err
	}
	wctx, cancel := w.waitCtx(ctx)
	defer cancel()
	if err := srv.AwaitRestart(wctx); err != nil {
		return fmt.Errorf("%w; turned away so far: %s", err, turnedAway(srv.TurnedAwayRequests()))
	}
	// The humans' clients still have the address from before the stop.
	if len(w.humans) == 0 {
		return errors.New("no human to check the restarted homeserver with; declare one first")
	}
	for _, h := range w.humans {
		who, err := h.cli.Whoami(ctx)
		if err != nil {
			return fmt.Errorf("%s's access token at %s after the restart: %w", h.name, h.cli.HomeserverURL, err)
		}
		if who.UserID != h.id {
			return fmt.Errorf("%s's access token is %s's after the restart", h.name, who.UserID)
		}
	}
	return nil
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

func (w *world) stepTurnedAway(ctx context.Context, n int, method, path, agent, text string) error {
	srv, err := w.fakeServer(ctx, "turn requests away")
	if err != nil {
		return err
	}
	if _, err := w.agent(agent); err != nil {
		return err
	}
	uid := w.names().agent(agent)
	m := fakehs.Fault{Method: method, PathPattern: path, User: uid}
	all := srv.TurnedAwayRequests()
	var got []fakehs.TurnedAway
	for _, r := range all {
		if r.Matches(m) {
			got = append(got, r)
		}
	}
	if len(got) != n {
		return fmt.Errorf("the homeserver turned away %d %s %s from %s, want %d; all it turned away: %s", len(got), method, path, agent, n, turnedAway(all))
	}
	if text == "" {
		return nil
	}
	txn, err := w.postTxnID(ctx, agent, text)
	if err != nil {
		return err
	}
	for _, r := range got {
		if !strings.HasSuffix(r.Path, "/"+txn) {
			return fmt.Errorf("turned away %s %s, want the send with txn id %s that %q landed with; all it turned away: %s", r.Method, r.Path, txn, text, turnedAway(all))
		}
	}
	return nil
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
	cli, err := w.clientFor(ctx, w.names().agent(agent))
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

func (w *world) stepPushAgain(ctx context.Context, text string) error {
	srv, err := w.fakeServer(ctx, "push transactions again")
	if err != nil {
		return err
	}
	var since id.EventID
	for i := len(w.posts) - 1; i >= 0 && since == ""; i-- {
		if strings.Contains(w.posts[i].text, text) {
			since = w.posts[i].id
		}
	}
	if since == "" {
		return fmt.Errorf("no message of the harness contains %q", text)
	}
	before := srv.Repushed(w.lease.reg.ID)
	n, err := srv.Repush(w.lease.reg.ID, since)
	if err != nil {
		return err
	}
	return w.eventually(ctx, fmt.Sprintf("the daemon acknowledges the %d transactions pushed again", n), func() (bool, string, error) {
		got := srv.Repushed(w.lease.reg.ID) - before
		return got == n, fmt.Sprintf("%d of %d acknowledged", got, n), nil
	})
}
