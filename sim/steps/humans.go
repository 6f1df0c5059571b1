package steps

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"
)

// How the harness posts as a human: threads named by their text, mentions
// expanded, and appservice transactions pushed as the homeserver does.

// threadOf finds the harness post whose text contains s and returns its
// thread root post; failing that, a recorded thread root containing s.
func (w *world) threadOf(s string) (*post, error) {
	for i := len(w.posts) - 1; i >= 0; i-- {
		p := w.posts[i]
		if p.root == p.id && strings.Contains(p.text, s) {
			return p, nil
		}
	}
	rp, seen := w.recordedThreadOf(s)
	if rp != nil {
		return rp, nil
	}
	for _, p := range w.posts {
		if p.root == p.id {
			seen = append(seen, strconv.Quote(p.text))
		}
	}
	return nil, fmt.Errorf("no thread started by a message containing %q; threads so far: %s", s, strings.Join(seen, ", "))
}

// say posts as a human: top-level when root is empty, else in that thread.
// Every @name becomes the Matrix id in the body and, with mentions, an
// m.mentions entry.
func (w *world) say(ctx context.Context, who, roomName, text string, root id.EventID, mentions bool) (*post, error) {
	return w.sayWith(ctx, who, roomName, text, root, mentions, nil)
}

// sayWith is say with extra content fields, set last.
func (w *world) sayWith(ctx context.Context, who, roomName, text string, root id.EventID, mentions bool, extra map[string]any) (*post, error) {
	h, r, err := w.humanIn(ctx, who, roomName)
	if err != nil {
		return nil, err
	}
	body, mentioned, err := w.expandMentions(text)
	if err != nil {
		return nil, err
	}
	content := map[string]any{"msgtype": "m.text", "body": body}
	if mentions {
		ids := []string{}
		for _, n := range mentioned {
			uid, _ := w.userID(n)
			ids = append(ids, string(uid))
		}
		content["m.mentions"] = map[string]any{"user_ids": ids}
	}
	if root != "" {
		content["m.relates_to"] = threadRelation(root, w.lastIn(root))
	}
	for k, v := range extra {
		content[k] = v
	}
	resp, err := h.cli.SendMessageEvent(ctx, r.id, event.EventMessage, content)
	if err != nil {
		return nil, fmt.Errorf("%s posting in %s: %w", who, roomName, err)
	}
	p := &post{room: r, id: resp.EventID, sender: who, text: text, core: stripMentions(text), root: root, mentions: mentioned}
	if root == "" {
		p.root = p.id
	}
	w.posts = append(w.posts, p)
	w.thread = w.rootPost(p)
	for _, n := range mentioned {
		if _, ok := w.agents[n]; ok {
			w.focus[n] = p
		}
	}
	return p, nil
}

// rootPost is the post that started p's thread (p itself when top-level).
func (w *world) rootPost(p *post) *post {
	for _, q := range w.posts {
		if q.id == p.root {
			return q
		}
	}
	return p
}

// lastIn is the latest harness post in a thread, for the reply fallback.
func (w *world) lastIn(root id.EventID) id.EventID {
	last := root
	for _, p := range w.posts {
		if p.root == root {
			last = p.id
		}
	}
	return last
}

// expandMentions turns @name into Matrix ids and lists the names mentioned.
func (w *world) expandMentions(text string) (string, []string, error) {
	var mentioned []string
	fields := strings.Fields(text)
	for i, f := range fields {
		if !strings.HasPrefix(f, "@") {
			continue
		}
		name := strings.TrimRight(f[1:], ",.:;!?")
		if strings.Contains(name, ".") {
			continue // an address, workstation.name, written as people type it
		}
		uid, err := w.userID(name)
		if err != nil {
			return "", nil, fmt.Errorf("mention %s: %w", f, err)
		}
		fields[i] = strings.Replace(f, "@"+name, string(uid), 1)
		mentioned = append(mentioned, name)
	}
	return strings.Join(fields, " "), mentioned, nil
}

// push PUTs one appservice transaction to the daemon, as the homeserver does.
func (w *world) push(ctx context.Context, txn string, ev json.RawMessage) error {
	body, err := json.Marshal(map[string]any{"events": []json.RawMessage{ev}})
	if err != nil {
		return fmt.Errorf("encoding transaction: %w", err)
	}
	url := "http://" + w.lease.listen + "/_matrix/app/v1/transactions/" + txn
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("building push: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+w.lease.reg.ServerToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("pushing transaction %s: %w", txn, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("pushing transaction %s: daemon answered %s", txn, resp.Status)
	}
	return nil
}
