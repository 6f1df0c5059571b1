package steps

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/zooid-dev/zooid/fakeagent"
	"github.com/zooid-dev/zooid/zooid/zevent"
)

func longSteps(w *world) []stepDef {
	return []stepDef{
		{area: "script", pattern: `^([a-z0-9-]+) will reply with (\d+) bytes of prose$`,
			example: `agent-a will reply with 150000 bytes of prose`,
			doc:     "Queues a turn that says a long text of that many bytes (numbered paragraphs of mixed ASCII and UTF-8, each starting \"long report\") in one chunk, and ends.",
			fn:      w.stepWillReplyProse},
		{area: "tools", pattern: `^([a-z0-9-]+) calls zooid_send_message in "(#[a-z0-9-]+)" with (\d+) bytes of prose$`,
			example: `agent-a calls zooid_send_message in "#ops" with 70000 bytes of prose`,
			doc:     "Calls zooid_send_message top-level in the room with a text of that many bytes, made as the long reply's prose is.",
			fn:      w.stepSendsProse},
		{area: "posts", pattern: `^([a-z0-9-]+)'s long reply arrives in the thread as (\d+) notices$`,
			example: `agent-a's long reply arrives in the thread as 4 notices`,
			doc:     "After a barrier, the agent's notices in the current thread are exactly that many; each holds at most zevent.MaxBodyBytes, and in order, joined by the paragraph breaks they were cut at, they are the queued text.",
			fn:      w.stepLongReplyArrives},
		{area: "posts", pattern: `^([a-z0-9-]+) posts the (\d+) bytes of prose whole top-level in "(#[a-z0-9-]+)"$`,
			example: `agent-a posts the 49152 bytes of prose whole top-level in "#ops"`,
			doc:     "Waits for exactly one m.notice from the agent outside any thread whose body is that long text, whole.",
			fn:      w.stepPostsProseWhole},
	}
}

// longProse is a deterministic text of exactly n bytes as JSON counts them (zevent.BodySize): numbered paragraphs
// of ASCII, quotes and multi-byte runes, so a cut inside a rune or an escape
// would show.
func longProse(n int) string {
	var b strings.Builder
	for i := 1; b.Len() < n; i++ {
		if i > 1 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "long report, paragraph %d: the \"svc-a\" audit found naïve retries — ", i)
		b.WriteString(strings.Repeat("every request is checked twice, ", 9))
		b.WriteString("done ✓.")
	}
	// Cut to n bytes as JSON counts them (zevent.BodySize), on a rune, then pad.
	s, size := b.String(), 0
	for i, r := range s {
		if size+zevent.BodySize(string(r)) > n {
			s = s[:i]
			break
		}
		size += zevent.BodySize(string(r))
	}
	trimmed := strings.TrimRight(s, "\n ")
	size -= zevent.BodySize(s[len(trimmed):])
	return trimmed + strings.Repeat(".", n-size)
}

func (w *world) stepWillReplyProse(agent, n string) error {
	k, _ := strconv.Atoi(n)
	if w.prose == nil {
		w.prose = map[string]string{}
	}
	w.prose[agent] = longProse(k)
	return w.queue(agent, fakeagent.Turn{fakeagent.Say(w.prose[agent]), fakeagent.Stop("end_turn")})
}

func (w *world) stepSendsProse(ctx context.Context, agent, roomName, n string) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	args, err := w.toolArgs(agent, fmt.Sprintf(`{"room": %q}`, roomName)) // the room's name on this homeserver
	if err != nil {
		return err
	}
	k, _ := strconv.Atoi(n)
	args["text"] = longProse(k)
	_, err = w.call(ctx, agent, "zooid_send_message", args)
	return err
}

func (w *world) stepLongReplyArrives(ctx context.Context, agent, n string) error {
	want, _ := strconv.Atoi(n)
	text, ok := w.prose[agent]
	if !ok {
		return fmt.Errorf("%s was not given a long reply", agent)
	}
	if w.thread == nil {
		return fmt.Errorf("there is no current thread yet")
	}
	r, root := w.thread.room, w.thread.root
	var parts []seenMsg
	look := func() (bool, string, error) {
		msgs, err := w.readRoom(ctx, r, 3)
		if err != nil {
			return false, "", err
		}
		mine, seen := w.fromAgent(msgs, agent)
		parts = parts[:0]
		for _, m := range mine {
			if m.thread == root && m.msgtype == "m.notice" {
				parts = append(parts, m)
			}
		}
		return len(parts) >= want, seen, nil
	}
	if err := w.eventually(ctx, fmt.Sprintf("%s posts %d notices in the thread", agent, want), look); err != nil {
		return err
	}
	if err := w.barrier(ctx, agent); err != nil {
		return err
	}
	if _, _, err := look(); err != nil {
		return err
	}
	if len(parts) != want {
		return fmt.Errorf("%s posted %d notices in the thread, want %d", agent, len(parts), want)
	}
	slices.Reverse(parts) // readRoom is newest first
	bodies := make([]string, len(parts))
	for i, p := range parts {
		if size := zevent.BodySize(p.body); size > zevent.MaxBodyBytes {
			return fmt.Errorf("notice %d of %d holds %d bytes, over %d", i+1, want, size, zevent.MaxBodyBytes)
		}
		if !strings.HasPrefix(p.body, "long report, paragraph ") {
			return fmt.Errorf("notice %d of %d does not start at a paragraph: %.40q", i+1, want, p.body)
		}
		bodies[i] = p.body
	}
	if got := strings.Join(bodies, "\n\n"); got != text {
		return fmt.Errorf("the %d notices joined by paragraph breaks (%d bytes) are not the %d-byte reply", want, len(got), len(text))
	}
	return nil
}

func (w *world) stepPostsProseWhole(ctx context.Context, agent, n, roomName string) error {
	r, err := w.room(ctx, roomName)
	if err != nil {
		return err
	}
	k, _ := strconv.Atoi(n)
	text := longProse(k)
	return w.waitPost(ctx, agent, r, fmt.Sprintf("the %d bytes of prose", k), "", func(m seenMsg) bool { return m.body == text })
}
