package steps

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/internal/randid"
	"github.com/zooid-dev/zooid/zooid/recording"
	"github.com/zooid-dev/zooid/zooid/zevent"
)

// The catalogue's "Humans acting" steps (area humans) and the step methods they
// run.

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
		{area: "humans", pattern: `^([a-z0-9-]+) says in "(#[a-z0-9-]+)", encrypted: "([^"]*)"$`,
			example: `ori says in "#ops", encrypted: "@agent-a can someone audit svc-a"`,
			doc:     "Posts a top-level m.room.encrypted event (m.megolm.v1.aes-sha2). A human with an end-to-end encryption device really encrypts the text, sharing the room key with the room's devices first; one without sends random bytes no key opens, standing for the text. Trace steps find it by the text.",
			fn:      w.stepSaysEncrypted},
		{area: "humans", pattern: `^([a-z0-9-]+) (can|cannot) decrypt what ([a-z0-9-]+) posted: "([^"]*)"$`,
			example: `mia cannot decrypt what agent-a posted: "still on it"`,
			doc:     "Finds the agent's encrypted post with that text (decrypted by the first human's device), then has the human's own device decrypt it: can waits until it decrypts to that text; cannot checks, after a barrier, that the device holds no room key for it (mautrix's ErrNoSessionFound).",
			fn:      w.stepDecryptAgentPost},
		{area: "humans", pattern: `^([a-z0-9-]+) replies in the thread, encrypted: "([^"]*)"$`,
			example: `mia replies in the thread, encrypted: "and svc-b too"`,
			doc:     "The human's end-to-end encryption device replies in the current thread, the text and its thread relation encrypted (the relation also in the clear, as Element sends it), sharing the room key with the room's devices first.",
			fn:      w.stepRepliesEncrypted},
		{area: "humans", pattern: `^([a-z0-9-]+) says in "(#[a-z0-9-]+)", encrypted, its room key held back: "([^"]*)"$`,
			example: `ori says in "#ops", encrypted, its room key held back: "@agent-a the standby takes over at six"`,
			doc:     "The human's end-to-end encryption device sends the text encrypted with a room key it shares with no one yet: the room's devices hold the message before its key, as when a to-device message is slower than the room's event.",
			fn:      w.stepSaysEncryptedKeyHeld},
		{area: "humans", pattern: `^([a-z0-9-]+) sends the room key it held back in "(#[a-z0-9-]+)"$`,
			example: `ori sends the room key it held back in "#ops"`,
			doc:     "Delivers the room keys the human's device held back in the room (olm-encrypted m.room_key to-device messages) to every device of the room's other members.",
			fn:      w.stepSendsHeldKey},
		{area: "humans", pattern: `^([a-z0-9-]+) cannot decrypt "([^"]*)" in "(#[a-z0-9-]+)" yet$`,
			example: `mia cannot decrypt "@agent-a the standby takes over at six" in "#ops" yet`,
			doc:     "The human's end-to-end encryption device holds the encrypted message with that text and no key for it (mautrix: no session with its id).",
			fn:      w.stepCannotDecrypt},
		{area: "humans", pattern: `^([a-z0-9-]+) reads in "(#[a-z0-9-]+)", decrypted: "([^"]*)"$`,
			example: `mia reads in "#ops", decrypted: "@agent-a can someone audit svc-a"`,
			doc:     "The human's end-to-end encryption device reads the encrypted message a human sent with that text and decrypts it to exactly that text (waiting, up to 30s, for a room key that comes late).",
			fn:      w.stepReadsDecrypted},
		{area: "humans", pattern: `^([a-z0-9-]+) turns on encryption in "(#[a-z0-9-]+)"$`,
			example: `ori turns on encryption in "#ops"`,
			doc:     "Sends the room's m.room.encryption state event (m.megolm.v1.aes-sha2), as Element's \"Encrypted\" switch does; the human must have the power to (the room's creator has).",
			fn:      w.stepTurnsOnEncryption},
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
		{area: "humans", pattern: `^([a-z0-9-]+) posts (\d+) messages of (\d+) bytes in "(#[a-z0-9-]+)"$`,
			example: `mia posts 30 messages of 6000 bytes in "#ops"`,
			doc:     "Posts that many top-level messages of exactly that many bytes (UTF-8) each: a numbered line, then the long reply's prose on one line; the current thread stays the one it was.",
			fn:      w.stepPostsManyLong},
		// The room's state: what zooid_get_room_info and zooid_get_members show.
		{area: "humans", pattern: `^([a-z0-9-]+) renames "(#[a-z0-9-]+)" to "([^"]+)"$`,
			example: `ori renames "#ops" to "Ops war room"`,
			doc:     "Sends the room's m.room.name.",
			fn:      w.stepRenames},
		{area: "humans", pattern: `^([a-z0-9-]+) removes the name of "(#[a-z0-9-]+)"$`,
			example: `ori removes the name of "#ops"`,
			doc:     "Sends an m.room.name with an empty name: the room is then named by its canonical alias.",
			fn:      w.stepUnnames},
		{area: "humans", pattern: `^([a-z0-9-]+) makes "(#[a-z0-9-]+)" the canonical alias of "(#[a-z0-9-]+)"$`,
			example: `ori makes "#war-room" the canonical alias of "#ops"`,
			doc:     "Creates the alias (`\"#war-room:alias\"` in expected JSON) for the room and sends the room's m.room.canonical_alias naming it.",
			fn:      w.stepCanonicalAlias},
		{area: "humans", pattern: `^([a-z0-9-]+) (leaves|joins) "(#[a-z0-9-]+)"$`,
			example: `mia leaves "#ops"`,
			doc:     "A human leaves a room, or joins it (again).",
			fn:      w.stepLeavesJoins},
		{area: "humans", pattern: `^([a-z0-9-]+) changes (?:her|his|their) display name to "([^"]+)"$`,
			example: `mia changes her display name to "Mia R."`,
			doc:     "Sets the human's profile display name; the homeserver sends a new m.room.member into each of the human's rooms, and the step waits until each room holds it.",
			fn:      w.stepDisplayName},
		{area: "humans", pattern: `^the daemon is pushed the last message again$`,
			example: `the daemon is pushed the last message again`,
			doc:     "Replays the last human message to the daemon's appservice endpoint as the homeserver would on a retry: the same transaction twice and once in a new one.",
			fn:      w.stepRepush},

		// Recorded rooms (scenarios/), sent in as history or played into the
		// daemon.
		{area: "humans", pattern: `^the recording of "(#[a-z0-9-]+)" is played(?: up to "([^"]+)")?$`,
			example: `the recording of "#ops" is played up to "rollback"`,
			doc:     "Sends the recorded events (the rest, or up to and including the one with that label or index) in recorded order, each as its recorded sender (agents through the appservice), so the daemon is pushed them as a homeserver pushes live events. When the recording carries the daemon's trace, the agents answer with their recorded turns and the events the daemon posted are left to the daemon (the step waits for each), and before each event it sends the step waits for the turns the recorded daemon had started by then (their prompts in the live trace) and for the end of those that had ended, so an event that came in mid-turn comes in mid-turn again. Played up to a point, it ends by waiting the same way for the turns the recorded daemon had started and ended before the next event, so a restart or reply that follows meets them as the recorded one did.",
			fn:      w.stepPlay},
		{area: "humans", pattern: `^([a-z0-9-]+) replies in the recorded thread "([^"]+)" of "(#[a-z0-9-]+)": "([^"]*)"$`,
			example: `ori replies in the recorded thread "postmortem" of "#ops": "who owns the fix?"`,
			doc:     "Posts a reply in the replayed or played thread whose root has that label; that thread becomes current.",
			fn:      w.stepRepliesInRecorded},

		// The process caps: max_processes per agent and per daemon,
		// sessions_per_process, queue_notice_after.
		{area: "humans", pattern: `^([a-z0-9-]+) mentions ([a-z0-9-]+) in (\d+) new threads of "(#[a-z0-9-]+)"$`,
			example: `ori mentions agent-a in 30 new threads of "#ops"`,
			doc:     "Posts that many top-level mentions of the agent, one after another (\"question N of M\"); later steps call them \"those threads\".",
			fn:      w.stepMentionsMany},

		// Agents reached over the plain HTTP transport (behaviour §7).
		{area: "humans", pattern: `^([a-z0-9-]+) is asked over HTTP: "([^"]*)"$`,
			example: `hook is asked over HTTP: "how is the build?"`,
			doc:     "POSTs the prompt with the transport's bearer token and reads the event stream to its end.",
			fn:      w.stepAskHTTP},
		{area: "humans", pattern: `^([a-z0-9-]+) is asked over HTTP (\d+) times at once: "([^"]*)"$`,
			example: `hook is asked over HTTP 10 times at once: "how is the build?"`,
			doc:     "Sends that many POSTs at the same time, in the background; \"every HTTP answer streams …\" waits for them all.",
			fn:      w.stepAskHTTPAtOnce},
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

func (w *world) stepSaysEncrypted(ctx context.Context, who, roomName, text string) error {
	h, r, err := w.humanIn(ctx, who, roomName)
	if err != nil {
		return err
	}
	if h.dev != nil {
		evt, err := h.dev.SendText(ctx, r.id, text)
		if err != nil {
			return fmt.Errorf("%s posting an encrypted message in %s: %w", who, roomName, err)
		}
		w.postedEncrypted(&post{room: r, id: evt, sender: who, text: text, core: stripMentions(text), root: evt})
		return nil
	}
	// Opaque: no session with this id was ever shared, so nobody can decrypt
	// it; the fields are those a megolm event carries, the session the same
	// for the human's messages in the room.
	if h.opaqueSessions == nil {
		h.opaqueSessions = map[*room]string{}
	}
	if h.opaqueSessions[r] == "" {
		h.opaqueSessions[r] = randid.Hex(16)
	}
	content := map[string]any{
		"algorithm":  id.AlgorithmMegolmV1,
		"ciphertext": base64.RawStdEncoding.EncodeToString([]byte(randid.Hex(48))),
		"session_id": h.opaqueSessions[r],
		"sender_key": randid.Hex(16),
		"device_id":  h.cli.DeviceID,
	}
	resp, err := h.cli.SendMessageEvent(ctx, r.id, event.EventEncrypted, content)
	if err != nil {
		return fmt.Errorf("%s posting an encrypted message in %s: %w", who, roomName, err)
	}
	w.postedEncrypted(&post{room: r, id: resp.EventID, sender: who, text: text, core: stripMentions(text), root: resp.EventID})
	return nil
}

func (w *world) stepRepliesEncrypted(ctx context.Context, who, text string) error {
	if w.thread == nil {
		return fmt.Errorf("there is no current thread yet")
	}
	root := w.thread
	h, r, err := w.deviceIn(ctx, who, root.room.name)
	if err != nil {
		return err
	}
	evt, err := h.dev.SendThreadReply(ctx, r.id, root.id, text)
	if err != nil {
		return fmt.Errorf("%s replying encrypted in the thread of %s: %w", who, root.id, err)
	}
	w.encrypted = append(w.encrypted, &post{room: r, id: evt, sender: who, text: text, core: stripMentions(text), root: root.id})
	return nil
}

// postedEncrypted notes a top-level encrypted post, found by its text, and
// makes it the current thread (for "agent-a posts … in the thread") and the
// thread of each agent it mentions.
func (w *world) postedEncrypted(p *post) {
	w.encrypted = append(w.encrypted, p)
	w.thread = p
	// As for a plain post: an agent it mentions has it as its thread (where
	// "agent-a calls …" asks it to go on).
	if _, mentioned, err := w.expandMentions(p.text); err == nil {
		for _, n := range mentioned {
			if _, ok := w.agents[n]; ok {
				w.focus[n] = p
			}
		}
	}
}

// decryptTimeout bounds a read of an encrypted message: the room key comes
// through the reader's /sync, which a late key makes wait.
const decryptTimeout = 30 * time.Second

// deviceIn is a human with an encryption device and the room a step has
// them act in.
func (w *world) deviceIn(ctx context.Context, who, roomName string) (*human, *room, error) {
	h, r, err := w.humanIn(ctx, who, roomName)
	if err != nil {
		return nil, nil, err
	}
	if h.dev == nil {
		return nil, nil, fmt.Errorf("%s has no encryption device; give it one first: %s has an end-to-end encryption device", who, who)
	}
	return h, r, nil
}

// encryptedPostExactly is the encrypted message a human sent in r with
// exactly text (the newest, if several).
func (w *world) encryptedPostExactly(r *room, roomName, text string) (*post, error) {
	var p *post
	for _, e := range w.encrypted {
		if e.room == r && e.text == text {
			p = e
		}
	}
	if p == nil {
		return nil, fmt.Errorf("no encrypted message %q was sent in %s", text, roomName)
	}
	return p, nil
}

func (w *world) stepSaysEncryptedKeyHeld(ctx context.Context, who, roomName, text string) error {
	h, r, err := w.deviceIn(ctx, who, roomName)
	if err != nil {
		return err
	}
	evt, deliver, err := h.dev.SendTextKeyLater(ctx, r.id, text)
	if err != nil {
		return fmt.Errorf("%s posting an encrypted message in %s: %w", who, roomName, err)
	}
	if h.heldKeys == nil {
		h.heldKeys = map[*room][]func(context.Context) error{}
	}
	h.heldKeys[r] = append(h.heldKeys[r], deliver)
	w.postedEncrypted(&post{room: r, id: evt, sender: who, text: text, core: stripMentions(text), root: evt})
	return nil
}

func (w *world) stepSendsHeldKey(ctx context.Context, who, roomName string) error {
	h, r, err := w.deviceIn(ctx, who, roomName)
	if err != nil {
		return err
	}
	if len(h.heldKeys[r]) == 0 {
		return fmt.Errorf("%s held back no room key in %s", who, roomName)
	}
	for len(h.heldKeys[r]) > 0 {
		if err := h.heldKeys[r][0](ctx); err != nil {
			return err
		}
		h.heldKeys[r] = h.heldKeys[r][1:]
	}
	return nil
}

func (w *world) stepCannotDecrypt(ctx context.Context, who, text, roomName string) error {
	h, r, err := w.deviceIn(ctx, who, roomName)
	if err != nil {
		return err
	}
	p, err := w.encryptedPostExactly(r, roomName, text)
	if err != nil {
		return err
	}
	got, noKey, err := h.dev.ReadTextNow(ctx, r.id, p.id)
	switch {
	case noKey:
		return nil
	case err != nil:
		return fmt.Errorf("%s decrypting %s's message in %s failed, but not for want of its key: %w", who, p.sender, roomName, err)
	default:
		return fmt.Errorf("%s decrypted %s's message in %s to %q: it holds the key already", who, p.sender, roomName, got)
	}
}

func (w *world) stepReadsDecrypted(ctx context.Context, who, roomName, text string) error {
	h, r, err := w.deviceIn(ctx, who, roomName)
	if err != nil {
		return err
	}
	p, err := w.encryptedPostExactly(r, roomName, text)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, decryptTimeout)
	defer cancel()
	got, err := h.dev.ReadText(rctx, r.id, p.id)
	if err != nil {
		return fmt.Errorf("%s reading %s's encrypted message %q in %s: %w", who, p.sender, text, roomName, err)
	}
	if got != text {
		return fmt.Errorf("%s decrypted %s's message in %s to %q, want %q", who, p.sender, roomName, got, text)
	}
	return nil
}

// encryptedPost is the encrypted event a human sent in room standing for a
// text containing text.
func (w *world) encryptedPost(room *room, text string) (*post, bool) {
	for _, p := range w.encrypted {
		if p.room == room && strings.Contains(p.text, text) {
			return p, true
		}
	}
	return nil, false
}

func (w *world) stepTurnsOnEncryption(ctx context.Context, who, roomName string) error {
	h, r, err := w.humanIn(ctx, who, roomName)
	if err != nil {
		return err
	}
	if _, err := h.cli.SendStateEvent(ctx, r.id, event.StateEncryption, "", &event.EncryptionEventContent{Algorithm: id.AlgorithmMegolmV1}); err != nil {
		return fmt.Errorf("%s turning on encryption in %s: %w", who, roomName, err)
	}
	return nil
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

func (w *world) stepPostsManyLong(ctx context.Context, who, n, size, roomName string) error {
	count, _ := strconv.Atoi(n)
	want, _ := strconv.Atoi(size)
	current := w.thread
	defer func() { w.thread = current }()
	for i := range count {
		w.stepSeq++
		line := fmt.Sprintf("long message %d from %s (%d):", i+1, who, w.stepSeq)
		if want <= len(line) {
			return fmt.Errorf("a message of %d bytes has no room beside its line %q", want, line)
		}
		// One line, words single-spaced, as say sends a text (it rejoins
		// the words around mentions); dots make up the bytes a rune cut.
		prose := line + " " + strings.Join(strings.Fields(longProse(want-len(line)-1)), " ")
		for len(prose) > want {
			_, last := utf8.DecodeLastRuneInString(prose)
			prose = prose[:len(prose)-last]
		}
		prose += strings.Repeat(".", want-len(prose))
		if _, err := w.say(ctx, who, roomName, prose, "", true); err != nil {
			return err
		}
	}
	return nil
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

// stepPlay sends the recording's next events into the running daemon's room.
func (w *world) stepPlay(ctx context.Context, roomName, upTo string) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	r, ok := w.rooms[roomName]
	if !ok || r.replay == nil || !r.replay.play {
		return fmt.Errorf("%s is not played from a recording; declare it with: %q is played from the recording \"name\"", roomName, roomName)
	}
	rp := r.replay
	rec := rp.rec
	last := len(rec.Events) - 1
	if upTo != "" {
		i, err := recordedIndex(rec, upTo)
		if err != nil {
			return err
		}
		last = i
	}
	if last < rp.next {
		return fmt.Errorf("%s: the recording is already played past event %d", roomName, last)
	}
	user := func(n string) id.UserID { u, _ := w.userID(n); return u }
	if r.seeded == nil {
		r.seeded = make([]seeded, len(rec.Events))
	}
	ids := make([]id.EventID, len(rec.Events))
	for i := range r.seeded {
		ids[i] = r.seeded[i].id
	}
	if sc := rp.script; sc != nil {
		sc.mu.Lock()
		sc.room = r.id
		sc.mu.Unlock()
	}
	for i := rp.next; i <= last; i++ {
		e := rec.Events[i]
		if sc := rp.script; sc != nil && sc.MadeByDaemon(i) {
			eid, err := w.madeByDaemon(ctx, sc, rec, i)
			if err != nil {
				return err
			}
			ids[i] = eid
			s := seeded{id: eid, sender: e.Sender, body: rec.Text(i), isRoot: len(rec.Replies(i)) > 0}
			if e.Thread >= 0 {
				s.root = ids[e.Thread]
			}
			r.seeded[i] = s
			rp.next = i + 1
			continue
		}
		if rp.script != nil {
			if err := w.waitRecordedTurns(ctx, r, i); err != nil {
				return err
			}
		}
		uid, err := w.userID(e.Sender)
		if err != nil {
			return fmt.Errorf("playing %s event %d: %w", rec.Path, i, err)
		}
		cli, err := w.clientFor(ctx, uid)
		if err != nil {
			return err
		}
		if _, agent := w.agents[e.Sender]; agent && !rp.joined[e.Sender] {
			// The daemon joins its agents at start; joining again is a no-op
			// and makes the send independent of when that happened.
			if _, err := cli.JoinRoom(ctx, string(r.id), nil); err != nil {
				return fmt.Errorf("%s joining %s to play its recorded events: %w", e.Sender, roomName, err)
			}
			if rp.joined == nil {
				rp.joined = map[string]bool{}
			}
			rp.joined[e.Sender] = true
		}
		typ := event.Type{Type: e.Type, Class: event.MessageEventType}
		sent, err := cli.SendMessageEvent(ctx, r.id, typ, rec.Content(i, user, ids[:i]))
		if err != nil {
			return fmt.Errorf("playing %s event %d (%s) as %s: %w", rec.Path, i, e.Type, e.Sender, err)
		}
		ids[i] = sent.EventID
		if rp.script != nil {
			rp.script.SetEventID(i, sent.EventID)
		}
		s := seeded{id: sent.EventID, sender: e.Sender, body: rec.Text(i), isRoot: len(rec.Replies(i)) > 0}
		if e.Thread >= 0 {
			s.root = ids[e.Thread]
		}
		r.seeded[i] = s
		rp.next = i + 1
	}
	// Played up to a point, the room is left as the recording had it just
	// before the next event: the turns the recorded daemon had started are
	// running and those it had ended have ended. A step that follows (a
	// restart, a reply) then meets them as the recorded one did; without
	// this a kill could cut a turn the recording shows finished, whose end
	// the next event then waits for in vain.
	if last+1 < len(rec.Events) && rp.script != nil && !rp.script.MadeByDaemon(last+1) {
		if err := w.waitRecordedTurns(ctx, r, last+1); err != nil {
			return err
		}
	}
	return nil
}

func (w *world) stepRepliesInRecorded(ctx context.Context, who, label, roomName, text string) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	_, root, err := w.recordedRoot(roomName, label)
	if err != nil {
		return err
	}
	_, err = w.say(ctx, who, roomName, text, root, true)
	return err
}

func (w *world) stepMentionsMany(ctx context.Context, who, agent, count, roomName string) error {
	if _, err := w.agent(agent); err != nil {
		return err
	}
	n, _ := strconv.Atoi(count)
	w.stepSeq++
	w.batch = w.batch[:0]
	for i := range n {
		p, err := w.say(ctx, who, roomName, fmt.Sprintf("@%s question %d of %d (batch %d)", agent, i+1, n, w.stepSeq), "", true)
		if err != nil {
			return err
		}
		w.batch = append(w.batch, p)
	}
	return nil
}

func (w *world) stepAskHTTP(ctx context.Context, agent, prompt string) error {
	url, err := w.httpSessionURL(ctx, agent)
	if err != nil {
		return err
	}
	ans, err := askHTTP(ctx, url, agent, prompt)
	if err != nil {
		return err
	}
	w.http = ans
	return nil
}

// stepAskHTTPAtOnce sends n requests at the same time in the background; the
// step "every HTTP answer streams …" waits for them. The scenario's close
// cancels and waits for requests still out.
func (w *world) stepAskHTTPAtOnce(ctx context.Context, agent, count, prompt string) error {
	url, err := w.httpSessionURL(ctx, agent)
	if err != nil {
		return err
	}
	n, _ := strconv.Atoi(count)
	rctx, cancel := context.WithCancel(context.Background())
	answers := make([]*httpAnswer, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { answers[i], errs[i] = askHTTP(rctx, url, agent, prompt) })
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	w.closers = append(w.closers, func() error { cancel(); <-done; return nil })
	w.httpWait = func(ctx context.Context) ([]*httpAnswer, error) {
		// Answers served one process at a time take long in all.
		t := time.NewTimer(time.Duration(n) * w.run.wait)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			return nil, fmt.Errorf("%d requests to %s not all answered within %s", n, agent, time.Duration(n)*w.run.wait)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return answers, errors.Join(errs...)
	}
	return nil
}

// recordedIndex is the index of the recording's event named by ref: its
// label, or its index as a number (labels never start with a digit).
func recordedIndex(rec *recording.Recording, ref string) (int, error) {
	i, err := strconv.Atoi(ref)
	if err != nil {
		return rec.Find(ref)
	}
	if i < 0 || i >= len(rec.Events) {
		return 0, fmt.Errorf("%s has no event %d (it has %d)", rec.Path, i, len(rec.Events))
	}
	return i, nil
}

func (w *world) stepRenames(ctx context.Context, who, roomName, name string) error {
	return w.sendName(ctx, who, roomName, name)
}

func (w *world) stepUnnames(ctx context.Context, who, roomName string) error {
	return w.sendName(ctx, who, roomName, "")
}

func (w *world) sendName(ctx context.Context, who, roomName, name string) error {
	h, r, err := w.humanIn(ctx, who, roomName)
	if err != nil {
		return err
	}
	if _, err := h.cli.SendStateEvent(ctx, r.id, event.StateRoomName, "", &event.RoomNameEventContent{Name: name}); err != nil {
		return fmt.Errorf("%s naming %s %q: %w", who, roomName, name, err)
	}
	return nil
}

func (w *world) stepCanonicalAlias(ctx context.Context, who, aliasName, roomName string) error {
	if err := checkRoom(aliasName); err != nil {
		return err
	}
	h, r, err := w.humanIn(ctx, who, roomName)
	if err != nil {
		return err
	}
	alias := w.names().alias(aliasName)
	if _, err := h.cli.CreateAlias(ctx, alias, r.id); err != nil {
		return fmt.Errorf("%s creating %s for %s: %w", who, alias, roomName, err)
	}
	if _, err := h.cli.SendStateEvent(ctx, r.id, event.StateCanonicalAlias, "", &event.CanonicalAliasEventContent{Alias: alias}); err != nil {
		return fmt.Errorf("%s making %s the canonical alias of %s: %w", who, alias, roomName, err)
	}
	return nil
}

func (w *world) stepLeavesJoins(ctx context.Context, who, how, roomName string) error {
	h, r, err := w.humanIn(ctx, who, roomName)
	if err != nil {
		return err
	}
	if how == "joins" {
		return w.join(ctx, h, r)
	}
	if _, err := h.cli.LeaveRoom(ctx, r.id); err != nil {
		return fmt.Errorf("%s leaving %s: %w", who, roomName, err)
	}
	return nil
}

func (w *world) stepDisplayName(ctx context.Context, who, name string) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	h, err := w.human(who)
	if err != nil {
		return err
	}
	if err := h.cli.SetDisplayName(ctx, name); err != nil {
		return fmt.Errorf("%s setting display name %q: %w", who, name, err)
	}
	// Synapse answers the profile change before it has sent the new
	// m.room.member into the human's rooms; a message sent now could reach
	// the daemon ahead of the name (seen in CI). The step ends once each room
	// holds the new name, as a person sees it in their client before typing on.
	joined, err := h.cli.JoinedRooms(ctx)
	if err != nil {
		return fmt.Errorf("%s's joined rooms: %w", who, err)
	}
	for _, room := range joined.JoinedRooms {
		err := w.eventually(ctx, fmt.Sprintf("%s's name %q in %s", who, name, room), func() (bool, string, error) {
			var m event.MemberEventContent
			if err := h.cli.StateEvent(ctx, room, event.StateMember, h.cli.UserID.String(), &m); err != nil {
				return false, "", fmt.Errorf("reading %s's membership in %s: %w", who, room, err)
			}
			return m.Displayname == name, fmt.Sprintf("%q", m.Displayname), nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (w *world) stepDecryptAgentPost(ctx context.Context, who, can, agent, text string) error {
	h, err := w.human(who)
	if err != nil {
		return err
	}
	if h.dev == nil {
		return fmt.Errorf("%s has no end-to-end encryption device", who)
	}
	if _, err := w.agent(agent); err != nil {
		return err
	}
	uid := w.agentUser(agent)
	reader := w.humans[w.humanSeq[0]]
	// The agent's post, as the first human's device reads it, and its
	// ciphertext as the homeserver holds it.
	var raw *event.Event
	find := func() (bool, string, error) {
		for _, r := range w.rooms {
			if !r.created {
				continue
			}
			resp, err := reader.cli.Messages(ctx, r.id, "", "", mautrix.DirectionBackward, nil, 100)
			if err != nil {
				return false, "", err
			}
			for _, ev := range resp.Chunk {
				if ev.Sender != uid || ev.Type != event.EventEncrypted {
					continue
				}
				cp := *ev
				cp.RoomID = r.id
				if m := seenOf(reader.plain(ctx, &cp)); m.body == text {
					ev.RoomID = r.id
					raw = ev
					return true, "", nil
				}
			}
		}
		return false, fmt.Sprintf("no encrypted post of %s reads %q to %s", agent, text, reader.name), nil
	}
	if err := w.eventually(ctx, fmt.Sprintf("%s's encrypted post %q", agent, text), find); err != nil {
		return err
	}
	try := func() (string, error) {
		cp := *raw
		if err := cp.Content.ParseRaw(event.EventEncrypted); err != nil {
			return "", err
		}
		dec, err := h.dev.Decrypt(ctx, &cp)
		if err != nil {
			return "", err
		}
		return seenOf(dec).body, nil
	}
	if can == "can" {
		return w.eventually(ctx, fmt.Sprintf("%s to decrypt %s's %q", who, agent, text), func() (bool, string, error) {
			got, err := try()
			if err != nil {
				return false, err.Error(), nil
			}
			return got == text, fmt.Sprintf("decrypted to %q", got), nil
		})
	}
	// Keys the device could still be sent come before a barrier's answer.
	if err := w.barrier(ctx, agent); err != nil {
		return err
	}
	got, err := try()
	switch {
	case err == nil:
		return fmt.Errorf("%s decrypted %s's %q (to %q): it was sent the room key", who, agent, text, got)
	case !strings.Contains(err.Error(), "no session with given ID found"):
		return fmt.Errorf("%s decrypting %s's %q failed, but not for want of its key: %w", who, agent, text, err)
	}
	return nil
}
