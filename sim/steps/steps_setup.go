package steps

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/fakehs"
)

// quoted matches one "name" of a list like "ori", "mia" and "kai".
var quoted = regexp.MustCompile(`"([^"]+)"`)

// quotedList is the regex of such a list.
const quotedList = `((?:"[^"]+"(?:, | and )?)+)`

func listOf(s string) []string {
	var out []string
	for _, m := range quoted.FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}

// bareList splits ori, mia and agent-a.
func bareList(s string) []string {
	s = strings.ReplaceAll(s, " and ", ", ")
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func setupSteps(w *world) []stepDef {
	return []stepDef{
		{area: "setup", pattern: `^agent processes stop after (\d+) seconds? idle$`,
			example: `agent processes stop after 1 second idle`,
			doc:     "Sets zooid.yaml idle_timeout (at least 1s, as zooid.yaml allows): a thread's agent process that waits that long for a turn is stopped.",
			fn:      w.stepIdleTimeout},
		{area: "setup", pattern: `^a turn times out after (\d+(?:\.\d+)?) seconds?$`,
			example: `a turn times out after 3 seconds`,
			doc:     "Sets the daemon's turn timeout (an agent's start-up stays bounded by the step wait); by default it is the step wait bound, so only a scenario about hung agents should need it.",
			fn:      w.stepTurnTimeout},
		{area: "setup", pattern: `^the homeserver has users? ` + quotedList + `$`,
			example: `the homeserver has users "ori" and "mia"`,
			doc:     "Registers human accounts; the first one creates the scenario's rooms.",
			fn:      w.stepUsers},
		{area: "setup", pattern: `^agents? ` + quotedList + ` (?:is|are) bound to ` + quotedList + `(?: with trigger (mention|any))?$`,
			example: `agents "agent-a" and "agent-b" are bound to "#ops" with trigger any`,
			doc:     "Configures agents in zooid.yaml, bound to those rooms; the trigger defaults to mention.",
			fn:      w.stepAgents},
		{area: "setup", pattern: `^"(#[a-z0-9-]+)" has (\d+) messages in (\d+) threads from ([a-z0-9, -]+)$`,
			example: `"#ops" has 2000 messages in 40 threads from ori, mia, agent-a and agent-b`,
			doc:     "Gives a room a generated history: that many thread roots spread evenly, the rest alternating top-level chatter and replies to recent threads (imported on fakehs, sent on a real server).",
			fn:      w.stepBusyRoom},
		{area: "setup", pattern: `^the homeserver answers (every|the next \d+) (GET|PUT|POST) (/\S+?)(?: from ([a-z0-9-]+))? with (\d{3}) (M_[A-Z_]+)$`,
			example: `the homeserver answers the next 2 PUT /_matrix/client/v3/rooms/*/send/*/* from agent-a with 429 M_LIMIT_EXCEEDED`,
			doc:     "Programs a fault on the fake homeserver (path.Match pattern, * is one segment), optionally only for one user's requests; @fake-only.",
			fn:      w.stepFault},
		{area: "setup", pattern: `^the homeserver (has no /threads endpoint|bundles no aggregations|ignores relation filters|filters events after the page limit|serves history to non-members|shows new events (\d+) ms after their send)$`,
			example: `the homeserver filters events after the page limit`,
			doc:     "Turns on one way of doing less than Synapse on the fake homeserver (fakehs.Profile), for the rest of the scenario; fake-degraded runs have them all; @fake-only.",
			fn:      w.stepDegrade},
		{area: "setup", pattern: `^the homeserver was asked no (GET|PUT|POST) (/\S+)( as an agent)?$`,
			example: `the homeserver was asked no GET /_matrix/client/v1/rooms/*/relations/*/*`,
			doc:     "No request so far matched (path.Match pattern, * is one segment); with \"as an agent\", none the daemon made as one of the scenario's agents (people's requests, the harness's included, don't count); @fake-only. Checked after a tool result, the count is final.",
			fn: func(ctx context.Context, method, pattern, asAgent string) error {
				return w.stepAskedAtMost(ctx, method, pattern, 0, asAgent != "")
			}},
		{area: "setup", pattern: `^the homeserver was asked (GET|PUT|POST) (/\S+) at most (once|twice|\d+ times)( as an agent)?$`,
			example: `the homeserver was asked GET /_matrix/client/v3/rooms/*/event/* at most twice`,
			doc:     "At most that many requests so far matched (path.Match pattern, * is one segment), e.g. no polling for what cannot come; with \"as an agent\", only those the daemon made as one of the scenario's agents count; @fake-only. Checked after a tool result, the count is final.",
			fn: func(ctx context.Context, method, pattern, n, asAgent string) error {
				return w.stepAskedAtMost(ctx, method, pattern, times(n), asAgent != "")
			}},
		{area: "setup", pattern: `^([a-z0-9-]+) reacts (\d+) times to the last message of "(#[a-z0-9-]+)"$`,
			example: `ori reacts 600 times to the last message of "#ops"`,
			doc:     "A human sends that many m.reaction events (distinct keys) to the room's newest message (the scenario starts).",
			fn:      w.stepReactions},
		{area: "setup", pattern: `^([a-z0-9-]+) removes ([a-z0-9-]+) from "(#[a-z0-9-]+)"$`,
			example: `ori removes agent-b from "#ops"`,
			doc:     "A human kicks an agent out of a room (the daemon runs; the agent stays bound in zooid.yaml).",
			fn:      w.stepRemoves},
		{area: "setup", pattern: `^the homeserver itself serves the history of "(#[a-z0-9-]+)" to ([a-z0-9-]+)$`,
			example: `the homeserver itself serves the history of "#ops" to agent-b`,
			doc:     "Reads /messages of the room as the agent's own Matrix user, bypassing the daemon: the server answers, so a refusal by a tool comes from the daemon's own check.",
			fn:      w.stepServerServes},
		{area: "setup", pattern: `^the homeserver's last fault fired (once|twice|\d+ times)$`,
			example: `the homeserver's last fault fired twice`,
			doc:     "Waits until the most recently programmed fault has applied to that many requests, and checks it applied to no more. Every programmed fault is also checked when the scenario passes: a \"the next N\" fault must have fired N times, an \"every\" fault at least once.",
			fn:      func(ctx context.Context, n string) error { return w.stepFaultFired(ctx, times(n)) }},
		{area: "setup", pattern: `^([a-z0-9-]+) is still a member of "(#[a-z0-9-]+)", which zooid.yaml does not bind it to$`,
			example: `agent-a is still a member of "#old", which zooid.yaml does not bind it to`,
			doc:     "Starts the scenario, then joins the agent's Matrix user to the room (created if new) through the appservice, as a room removed from its binding leaves it.",
			fn:      w.stepStrayMember},
		{area: "setup", pattern: `^([a-z0-9-]+) is answering a mention in "(#[a-z0-9-]+)"$`,
			example: `agent-a is answering a mention in "#ops"`,
			doc:     "The first human mentions the agent top-level in the room and waits until it is prompted; that thread becomes the current one.",
			fn:      w.stepAnswering},
	}
}

func (w *world) stepStrayMember(ctx context.Context, agent, roomName string) error {
	a, err := w.agent(agent)
	if err != nil {
		return err
	}
	if slices.Contains(a.rooms, roomName) {
		return fmt.Errorf("%s is bound to %s; a stray membership needs a room it is not bound to", agent, roomName)
	}
	if err := w.start(ctx); err != nil {
		return err
	}
	r, err := w.room(ctx, roomName)
	if err != nil {
		return err
	}
	cli, err := w.clientFor(ctx, w.names().agent(agent))
	if err != nil {
		return err
	}
	if _, err := cli.JoinRoom(ctx, string(r.id), nil); err != nil {
		return fmt.Errorf("%s joining %s outside zooid.yaml: %w", agent, roomName, err)
	}
	return nil
}

func (w *world) stepUsers(ctx context.Context, list string) error {
	for _, n := range listOf(list) {
		if err := w.addHuman(ctx, n); err != nil {
			return err
		}
	}
	return nil
}

func (w *world) stepAgents(ctx context.Context, list, rooms, trigger string) error {
	if w.started {
		return fmt.Errorf("agents must be declared before the first action (the daemon is already running)")
	}
	if err := w.ensureHomeserver(ctx); err != nil {
		return err
	}
	if trigger == "" {
		trigger = "mention"
	}
	rs := listOf(rooms)
	for _, r := range rs {
		if _, err := w.room(ctx, r); err != nil {
			return err
		}
	}
	for _, n := range listOf(list) {
		if err := checkName(n); err != nil {
			return err
		}
		if _, ok := w.humans[n]; ok {
			return fmt.Errorf("%q is already a human", n)
		}
		a, ok := w.agents[n]
		if !ok {
			a = &agentDecl{name: n}
			w.agents[n] = a
			w.agentSeq = append(w.agentSeq, n)
		}
		for _, r := range rs {
			if !slices.Contains(a.rooms, r) {
				a.rooms = append(a.rooms, r)
			}
		}
		a.trigger = trigger
	}
	return nil
}

func (w *world) stepBusyRoom(ctx context.Context, name, total, threads, senders string) error {
	if w.started {
		return fmt.Errorf("a busy room must be declared before the first action")
	}
	r, err := w.room(ctx, name)
	if err != nil {
		return err
	}
	t, _ := strconv.Atoi(total)
	th, _ := strconv.Atoi(threads)
	if t < 1 || th > t {
		return fmt.Errorf("%s: %d messages can't hold %d threads", name, t, th)
	}
	ss := bareList(senders)
	for _, s := range ss {
		if _, ok := w.humans[s]; ok {
			continue
		}
		if _, ok := w.agents[s]; ok {
			continue
		}
		return fmt.Errorf("sender %q of %s is neither a declared user nor an agent (declare them first)", s, name)
	}
	r.busy = &busySpec{total: t, threads: th, senders: ss}
	return nil
}

func (w *world) stepDegrade(ctx context.Context, what, delayMS string) error {
	if err := w.ensureHomeserver(ctx); err != nil {
		return err
	}
	return w.lease.hs.degrade(func(p *fakehs.Profile) {
		switch what {
		case "has no /threads endpoint":
			p.NoThreads = true
		case "bundles no aggregations":
			p.NoBundles = true
		case "ignores relation filters":
			p.IgnoreRelationFilters = true
		case "filters events after the page limit":
			p.FilterAfterLimit = true
		case "serves history to non-members":
			p.NonMembersRead = true
		default:
			ms, _ := strconv.Atoi(delayMS)
			p.VisibilityDelay = time.Duration(ms) * time.Millisecond
		}
	})
}

func (w *world) stepRemoves(ctx context.Context, who, agent, roomName string) error {
	h, r, err := w.humanIn(ctx, who, roomName)
	if err != nil {
		return err
	}
	if _, err := h.cli.KickUser(ctx, r.id, &mautrix.ReqKickUser{UserID: w.names().agent(agent), Reason: "test"}); err != nil {
		return fmt.Errorf("%s removing %s from %s: %w", who, agent, roomName, err)
	}
	return nil
}

func (w *world) stepServerServes(ctx context.Context, roomName, agent string) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	r, err := w.room(ctx, roomName)
	if err != nil {
		return err
	}
	cli, err := mautrix.NewClient(w.lease.hs.baseURL(), w.names().agent(agent), w.lease.reg.AppToken)
	if err != nil {
		return err
	}
	cli.SetAppServiceUserID = true
	resp, err := cli.Messages(ctx, r.id, "", "", mautrix.DirectionBackward, nil, 5)
	if err != nil {
		return fmt.Errorf("the homeserver refused %s's read of %s itself: %w", agent, roomName, err)
	}
	if len(resp.Chunk) == 0 {
		return fmt.Errorf("the homeserver served %s an empty page of %s", agent, roomName)
	}
	return nil
}

func (w *world) stepAskedAtMost(ctx context.Context, method, pattern string, most int, asAgent bool) error {
	if err := w.ensureHomeserver(ctx); err != nil {
		return err
	}
	var as []id.UserID
	who := ""
	if asAgent {
		as = []id.UserID{} // no agents: nothing counts
		for name := range w.agents {
			as = append(as, w.names().agent(name))
		}
		who = " as an agent"
	}
	n, err := w.lease.hs.requests(method, pattern, as)
	if err != nil {
		return err
	}
	if n > most {
		return fmt.Errorf("the homeserver was asked %s %s%s %d times, at most %d expected", method, pattern, who, n, most)
	}
	return nil
}

func (w *world) stepReactions(ctx context.Context, who string, n int, roomName string) error {
	h, r, err := w.humanIn(ctx, who, roomName)
	if err != nil {
		return err
	}
	// Page back unfiltered rather than ask for one filtered event: a server
	// that filters after the page limit (degraded fakehs) answers that with
	// nothing when the newest event is not a message, such as an agent's
	// join the daemon made a moment ago.
	var target id.EventID
	from := ""
	for target == "" {
		resp, err := h.cli.Messages(ctx, r.id, from, "", mautrix.DirectionBackward, nil, 50)
		if err != nil {
			return fmt.Errorf("finding the last message of %s: %w", roomName, err)
		}
		for _, ev := range resp.Chunk {
			if ev.Type == event.EventMessage {
				target = ev.ID
				break
			}
		}
		if target == "" && (resp.End == "" || len(resp.Chunk) == 0) {
			return fmt.Errorf("finding the last message of %s: the room has none", roomName)
		}
		from = resp.End
	}
	for i := range n {
		if _, err := h.cli.SendReaction(ctx, r.id, target, fmt.Sprintf("r%d", i)); err != nil {
			return fmt.Errorf("reaction %d to %s: %w", i, target, err)
		}
	}
	return nil
}

func (w *world) stepFault(ctx context.Context, count, method, path, who, status, errcode string) error {
	f := fakehs.Fault{Errcode: errcode}
	f.Status, _ = strconv.Atoi(status)
	if f.Status == 429 {
		f.RetryAfter = 20 * time.Millisecond
	}
	return w.programFault(ctx, count, method, path, who, f, status)
}

// programFault injects f for count ("every" or "the next N") requests of
// method on path, from who when not empty; what names it in failures.
func (w *world) programFault(ctx context.Context, count, method, path, who string, f fakehs.Fault, what string) error {
	if err := w.ensureHomeserver(ctx); err != nil {
		return err
	}
	f.Method, f.PathPattern = method, path
	if count != "every" {
		f.Count, _ = strconv.Atoi(strings.TrimPrefix(count, "the next "))
	}
	if who != "" {
		if _, ok := w.agents[who]; ok {
			f.User = w.names().agent(who)
		} else if h, ok := w.humans[who]; ok {
			f.User = h.id
		} else {
			return fmt.Errorf("fault for %q: declare the user or agent first", who)
		}
	}
	h, err := w.lease.hs.injectFault(f)
	if err != nil {
		return err
	}
	w.faults = append(w.faults, &programmedFault{what: fmt.Sprintf("%s %s %s %s", count, method, path, what), handle: h})
	return nil
}

// programmedFault is a fault a step injected, kept so the scenario can show
// it fired: see stepFaultFired and faultsUsed.
type programmedFault struct {
	what   string
	handle *fakehs.FaultHandle
}

func (w *world) stepFaultFired(ctx context.Context, n int) error {
	if len(w.faults) == 0 {
		return fmt.Errorf("no fault has been programmed")
	}
	f := w.faults[len(w.faults)-1]
	err := w.eventually(ctx, fmt.Sprintf("the fault (%s) fires %d times", f.what, n), func() (bool, string, error) {
		got := f.handle.Hits()
		return got >= n, fmt.Sprintf("%d hits", got), nil
	})
	if err != nil {
		return err
	}
	if got := f.handle.Hits(); got != n {
		return fmt.Errorf("the fault (%s) fired %d times, want %d", f.what, got, n)
	}
	return nil
}

// faultsUsed is checked when a scenario has passed: a "the next N" fault must
// have fired N times and an "every" fault at least once, or the scenario
// passed without the misbehaviour it was written to survive.
func (w *world) faultsUsed() error {
	var errs []error
	for _, f := range w.faults {
		got, want := f.handle.Hits(), f.handle.Fault().Count
		switch {
		case want > 0 && got != want:
			errs = append(errs, fmt.Errorf("the fault (%s) fired %d times, want %d", f.what, got, want))
		case want == 0 && got == 0:
			errs = append(errs, fmt.Errorf("the fault (%s) never fired", f.what))
		}
	}
	for _, n := range w.agentSeq {
		if w.agents[n].real == nil {
			continue
		}
		for _, st := range w.model.Script(n).Unfired() {
			errs = append(errs, fmt.Errorf("%s's model fault (%s) never fired", n, st))
		}
	}
	return errors.Join(errs...)
}

func (w *world) stepAnswering(ctx context.Context, agent, roomName string) error {
	if _, err := w.agent(agent); err != nil {
		return err
	}
	if err := w.start(ctx); err != nil {
		return err
	}
	w.stepSeq++
	text := fmt.Sprintf("@%s please take a look (%d)", agent, w.stepSeq)
	p, err := w.say(ctx, w.humanSeq[0], roomName, text, "", true)
	if err != nil {
		return err
	}
	return w.waitPrompted(ctx, agent, p.core)
}

func (w *world) stepTurnTimeout(secs string) error {
	if w.started {
		return fmt.Errorf("set the turn timeout before the first action starts the daemon")
	}
	f, err := strconv.ParseFloat(secs, 64)
	if err != nil {
		return fmt.Errorf("turn timeout %q: %w", secs, err)
	}
	w.turnTimeout = time.Duration(f * float64(time.Second))
	return nil
}

func (w *world) stepIdleTimeout(secs string) error {
	if w.started {
		return fmt.Errorf("set the idle timeout before the first action starts the daemon")
	}
	f, err := strconv.ParseFloat(secs, 64)
	if err != nil {
		return fmt.Errorf("idle timeout %q: %w", secs, err)
	}
	w.idleTimeout = time.Duration(f * float64(time.Second))
	return nil
}
