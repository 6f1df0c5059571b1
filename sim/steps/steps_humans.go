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

	"github.com/zooid-dev/zooid/zooid/zevent"
)

func humanSteps(w *world) []stepDef {
	return []stepDef{
		{area: "humans", pattern: `^([a-z0-9-]+) says in "(#[a-z0-9-]+)": "([^"]*)"$`,
			example: `ori says in "#ops": "@agent-a can someone audit svc-a"`,
			doc:     "Posts a top-level message; it becomes the current thread and the thread of every agent it mentions.",
			fn:      w.stepSays},
		{area: "humans", pattern: `^([a-z0-9-]+) says in "(#[a-z0-9-]+)" without m\.mentions: "([^"]*)"$`,
			example: `ori says in "#ops" without m.mentions: "agent-a, are you there?"`,
			doc:     "Posts a top-level message as an old client would: mentions only in the body, no m.mentions.",
			fn:      w.stepSaysPlain},
		{area: "humans", pattern: `^([a-z0-9-]+) says in "(#[a-z0-9-]+)" with (\{.*\}): "([^"]*)"$`,
			example: `mia says in "#ops" with {"msgtype": "m.notice"}: "@agent-a deploy done"`,
			doc:     "Posts a top-level message whose content also holds (or overrides with) the JSON's fields, placeholders resolved.",
			fn:      w.stepSaysWith},
		{area: "humans", pattern: `^([a-z0-9-]+) replies in the thread: "([^"]*)"$`,
			example: `mia replies in the thread: "and svc-b too"`,
			doc:     "Posts a reply in the current thread.",
			fn:      w.stepReplies},
		{area: "humans", pattern: `^([a-z0-9-]+) replies in the thread of "([^"]+)": "([^"]*)"$`,
			example: `ori replies in the thread of "audit svc-a": "any news?"`,
			doc:     "Posts a reply in the thread whose root contains the quoted text; that thread becomes current.",
			fn:      w.stepRepliesIn},
		{area: "humans", pattern: `^([a-z0-9-]+) redacts "([^"]*)"$`,
			example: `ori redacts "posted the wrong log, ignore"`,
			doc:     "Redacts the human's own latest post with exactly that text (its content is emptied and, as on Synapse, it leaves its thread).",
			fn:      w.stepRedacts},
		{area: "humans", pattern: `^([a-z0-9-]+) clears the thread$`,
			example: `ori clears the thread`,
			doc:     "Sends /clear in the current thread (a dev.zooid.session_reset event with an m.thread relation).",
			fn:      w.stepClears},
		{area: "humans", pattern: `^([a-z0-9-]+) posts (\d+) messages in "(#[a-z0-9-]+)"$`,
			example: `mia posts 10 messages in "#ops"`,
			doc:     "Posts that many plain top-level messages (mentioning nobody); the current thread stays the one it was.",
			fn:      w.stepPostsMany},
		{area: "humans", pattern: `^the daemon is pushed the last message again$`,
			example: `the daemon is pushed the last message again`,
			doc:     "Replays the last human message to the daemon's appservice endpoint as the homeserver would on a retry: the same transaction twice and once in a new one.",
			fn:      w.stepRepush},
	}
}

func (w *world) stepSays(ctx context.Context, who, roomName, text string) error {
	_, err := w.say(ctx, who, roomName, text, "", true)
	return err
}

func (w *world) stepSaysPlain(ctx context.Context, who, roomName, text string) error {
	_, err := w.say(ctx, who, roomName, text, "", false)
	return err
}

func (w *world) stepSaysWith(ctx context.Context, who, roomName, js, text string) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	extra, err := w.toolArgs(who, js)
	if err != nil {
		return err
	}
	_, err = w.sayWith(ctx, who, roomName, text, "", true, extra)
	return err
}

func (w *world) stepReplies(ctx context.Context, who, text string) error {
	if w.thread == nil {
		return fmt.Errorf("there is no current thread yet; start one with: %s says in \"#room\": \"...\"", who)
	}
	_, err := w.say(ctx, who, w.thread.room.name, text, w.thread.root, true)
	return err
}

func (w *world) stepRepliesIn(ctx context.Context, who, rootText, text string) error {
	root, err := w.threadOf(rootText)
	if err != nil {
		return err
	}
	_, err = w.say(ctx, who, root.room.name, text, root.root, true)
	return err
}

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

func (w *world) stepRedacts(ctx context.Context, who, text string) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	h, err := w.human(who)
	if err != nil {
		return err
	}
	for i := len(w.posts) - 1; i >= 0; i-- {
		p := w.posts[i]
		if p.sender != who || p.text != text {
			continue
		}
		if _, err := h.cli.RedactEvent(ctx, p.room.id, p.id); err != nil {
			return fmt.Errorf("%s redacting %q: %w", who, text, err)
		}
		return nil
	}
	return fmt.Errorf("%s posted nothing with the text %q to redact", who, text)
}

func (w *world) stepClears(ctx context.Context, who string) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	h, err := w.human(who)
	if err != nil {
		return err
	}
	if w.thread == nil {
		return fmt.Errorf("there is no current thread to clear")
	}
	content := &zevent.SessionResetEventContent{RelatesTo: zevent.InThread(w.thread.root)}
	if _, err := h.cli.SendMessageEvent(ctx, w.thread.room.id, zevent.EventSessionReset, content); err != nil {
		return fmt.Errorf("%s sending /clear: %w", who, err)
	}
	return nil
}

func (w *world) stepPostsMany(ctx context.Context, who, n, roomName string) error {
	count, _ := strconv.Atoi(n)
	// Chatter buries the conversation; it doesn't become the thread a later
	// "replies in the thread" step answers in.
	current := w.thread
	defer func() { w.thread = current }()
	for i := range count {
		w.stepSeq++
		if _, err := w.say(ctx, who, roomName, fmt.Sprintf("chatter %d from %s (%d)", i+1, who, w.stepSeq), "", true); err != nil {
			return err
		}
	}
	return nil
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
		uid, err := w.userID(name)
		if err != nil {
			return "", nil, fmt.Errorf("mention %s: %w", f, err)
		}
		fields[i] = strings.Replace(f, "@"+name, string(uid), 1)
		mentioned = append(mentioned, name)
	}
	return strings.Join(fields, " "), mentioned, nil
}

func (w *world) stepRepush(ctx context.Context) error {
	if len(w.posts) == 0 {
		return fmt.Errorf("no message has been posted yet")
	}
	p := w.posts[len(w.posts)-1]
	h := w.humans[p.sender]
	ev, err := h.cli.GetEvent(ctx, p.room.id, p.id)
	if err != nil {
		return fmt.Errorf("reading back %s: %w", p.id, err)
	}
	raw, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", p.id, err)
	}
	w.pushes++
	txn := fmt.Sprintf("harness-replay-%d", w.pushes)
	for _, t := range []string{txn, txn, txn + "-again"} {
		if err := w.push(ctx, t, raw); err != nil {
			return err
		}
	}
	return nil
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
