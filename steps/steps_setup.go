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
		{area: "setup", pattern: `^agent processes stop after (\d+(?:\.\d+)?) seconds? idle$`,
			example: `agent processes stop after 0.5 seconds idle`,
			doc:     "Sets zooid.yaml idle_timeout: a thread's agent process that waits that long for a turn is stopped.",
			fn:      w.stepIdleTimeout},
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
		{area: "setup", pattern: `^the homeserver's last fault fired (once|twice|\d+ times)$`,
			example: `the homeserver's last fault fired twice`,
			doc:     "Waits until the most recently programmed fault has applied to that many requests, and checks it applied to no more. Every programmed fault is also checked when the scenario passes: a \"the next N\" fault must have fired N times, an \"every\" fault at least once.",
			fn:      func(ctx context.Context, n string) error { return w.stepFaultFired(ctx, times(n)) }},
		{area: "setup", pattern: `^([a-z0-9-]+) is answering a mention in "(#[a-z0-9-]+)"$`,
			example: `agent-a is answering a mention in "#ops"`,
			doc:     "The first human mentions the agent top-level in the room and waits until it is prompted; that thread becomes the current one.",
			fn:      w.stepAnswering},
	}
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

func (w *world) stepFault(ctx context.Context, count, method, path, who, status, errcode string) error {
	if err := w.ensureHomeserver(ctx); err != nil {
		return err
	}
	f := fakehs.Fault{Method: method, PathPattern: path, Errcode: errcode}
	f.Status, _ = strconv.Atoi(status)
	if count != "every" {
		f.Count, _ = strconv.Atoi(strings.TrimPrefix(count, "the next "))
	}
	if f.Status == 429 {
		f.RetryAfter = 20 * time.Millisecond
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
	w.faults = append(w.faults, &programmedFault{what: fmt.Sprintf("%s %s %s %s", count, method, path, status), handle: h})
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
