package steps

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/fakeagent"
	"github.com/zooid-dev/zooid/fakehs"
)

// RoutingLoad is a busy homeserver for the daemon to route: Rooms rooms, each
// receiving PerSecond messages a second for Duration, Agents agents bound to
// the rooms in turn (room i to agent i mod Agents), each with a warm process
// and a session open in every room it serves. Every MentionEvery-th message of a
// room mentions its agent in that session's thread; the rest are chatter that
// wakes nobody but still has to be routed.
//
// Each room's messages come at random, as people's do: independent arrivals
// (exponential gaps, a fixed seed per room) averaging PerSecond, so rooms
// now and then coincide, as busy rooms do. Lockstep instead sends every
// room's messages on one shared tick, so each tick is a burst of Rooms
// messages at once, every MentionEvery-th a burst of Rooms mentions, which
// the homeserver pushes together: the daemon's part of the last of them is
// the whole burst's (the load of docs/performance.md's runs before
// 2026-12-05 night).
type RoutingLoad struct {
	Rooms, Agents, PerSecond, MentionEvery int
	Duration                               time.Duration
	Lockstep                               bool
}

// RoutingResult is what one RoutingLoad run measured.
type RoutingResult struct {
	// Sent is the messages the humans sent during the load; Mentions those
	// that mention an agent.
	Sent, Mentions int
	// Daemon are, for each mention its agent received in a prompt of its
	// own, the daemon's part of its way, sorted: from the push that carried
	// it arriving to the session/prompt it triggered being written
	// (daemon.Observer).
	Daemon []time.Duration
	// EndToEnd are the same mentions' times from fakehs starting the
	// transaction that carried it to the agent reading the prompt, sorted:
	// the daemon's part plus the push's HTTP request and the agent's pipe.
	EndToEnd []time.Duration
	// Batched counts mentions that reached their agent in a prompt holding
	// several: they arrived while the thread's turn ran, so their time is
	// the turn's, not the routing's, and they are not in Latencies.
	Batched int
	// OutOfOrder counts mentions a session received before an earlier
	// mention of the same room: per-room order broken.
	OutOfOrder int
	// Wall is the load's duration; CPU this process's CPU time over it
	// (the daemon, fakehs and the senders: the agents are other processes).
	Wall, CPU time.Duration
}

// Quantile is the q-quantile (0 < q ≤ 1, nearest rank) of sorted
// durations; 0 for none.
func Quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*q+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// routingObserver keeps the daemon's timings of a routing load.
type routingObserver struct {
	mu       sync.Mutex
	received map[id.EventID]time.Time
	prompted map[id.EventID]time.Time
}

func (o *routingObserver) PushReceived(events []id.EventID, at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, e := range events {
		if _, ok := o.received[e]; !ok {
			o.received[e] = at
		}
	}
}

func (o *routingObserver) PromptWritten(trigger id.EventID, at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.prompted[trigger] = at
}

// EventsPerCoreSecond is the events routed per second of this process's CPU:
// a lower bound on what one core of the daemon alone routes, since fakehs and
// the senders share the process.
func (r RoutingResult) EventsPerCoreSecond() float64 {
	if r.CPU <= 0 {
		return 0
	}
	return float64(r.Sent) / r.CPU.Seconds()
}

// mentionToken marks a mention so its prompt can be told apart: room index
// and the mention's number in that room.
var mentionToken = regexp.MustCompile(`\bk(\d+)-(\d+)\b`)

// RunRoutingLoad sets up a world on fakehs, warms every agent's sessions,
// drives the load and collects the prompts (docs/performance.md item 6).
func RunRoutingLoad(ctx context.Context, load RoutingLoad) (RoutingResult, error) {
	if load.Rooms < 1 || load.Agents < 1 || load.PerSecond < 1 || load.MentionEvery < 1 || load.Duration <= 0 {
		return RoutingResult{}, fmt.Errorf("routing load %+v: every figure must be positive", load)
	}
	w := newWorld(benchRunner())
	obs := &routingObserver{received: map[id.EventID]time.Time{}, prompted: map[id.EventID]time.Time{}}
	w.observer = obs
	res, err := w.routingLoad(ctx, load, obs)
	if cerr := w.close(); err == nil && cerr != nil {
		err = fmt.Errorf("closing the routing world: %w", cerr)
	}
	return res, err
}

// schedule is when room sends its messages, Duration×PerSecond of them,
// from began: on the shared tick in lockstep, else at random (exponential
// gaps averaging 1/PerSecond, seeded by the room so runs repeat).
func (l RoutingLoad) schedule(room int, began time.Time) []time.Time {
	interval := time.Second / time.Duration(l.PerSecond)
	n := int(l.Duration / interval)
	gaps := rand.New(rand.NewPCG(uint64(room)+1, 38))
	times := make([]time.Time, n)
	at := began
	for k := range times {
		if l.Lockstep {
			at = began.Add(time.Duration(k+1) * interval)
		} else {
			at = at.Add(time.Duration(gaps.ExpFloat64() * float64(interval)))
		}
		times[k] = at
	}
	return times
}

// sleepUntil waits for the clock to reach at, false if ctx ended first. A
// sender behind its schedule (the homeserver slow to answer) sends at once.
func sleepUntil(ctx context.Context, at time.Time) bool {
	t := time.NewTimer(time.Until(at))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

func (w *world) routingLoad(ctx context.Context, load RoutingLoad, obs *routingObserver) (RoutingResult, error) {
	if err := w.stepUsers(ctx, `"ori"`); err != nil {
		return RoutingResult{}, err
	}
	roomName := func(i int) string { return fmt.Sprintf("#busy-%d", i) }
	agentName := func(i int) string { return fmt.Sprintf("router-%d", i%load.Agents) }
	for i := range load.Rooms {
		if err := w.stepAgents(ctx, strconv.Quote(agentName(i)), strconv.Quote(roomName(i)), ""); err != nil {
			return RoutingResult{}, err
		}
	}
	// Warm means every session's process stays up: one process an agent,
	// hosting all its rooms' sessions, so the daemon's cap on processes
	// (16 by default) never stops one to start another.
	perAgent := map[string]int{}
	for i := range load.Rooms {
		perAgent[agentName(i)]++
	}
	for name, n := range perAgent {
		a := w.agents[name]
		a.perProc, a.maxProcs, a.closeSessions = n, 1, true
	}
	srv, err := w.fakeServer(ctx, "time its pushes")
	if err != nil {
		return RoutingResult{}, err
	}
	w.ctl.Respond(func(string, fakeagent.Prompt) (fakeagent.Turn, bool) {
		return fakeagent.Turn{fakeagent.Stop("end_turn")}, true
	})

	// Warm up: one thread per room, its session opened by a first mention.
	roots := make([]id.EventID, load.Rooms)
	for i := range load.Rooms {
		p, err := w.say(ctx, "ori", roomName(i), fmt.Sprintf("@%s warm-up of room %d", agentName(i), i), "", true)
		if err != nil {
			return RoutingResult{}, err
		}
		roots[i] = p.id
	}
	// A session is warm once its agent's MCP bridge is up too: the agent
	// starts it beside session/new, and twenty bridges starting at once,
	// processes of their own, took the two cores for the load's first
	// 300 ms, and its tail with them (docs/performance.md, item 6).
	for a, n := range perAgent {
		wctx, cancel := w.waitCtx(ctx)
		_, err := w.ctl.WaitPrompts(wctx, a, n)
		if err == nil {
			_, err = w.ctl.WaitToolLists(wctx, a, n)
		}
		cancel()
		if err != nil {
			return RoutingResult{}, fmt.Errorf("warming %s's %d sessions: %w", a, n, err)
		}
	}
	before := map[string]int{}
	for a := range perAgent {
		before[a] = len(w.ctl.Prompts(a))
	}

	var mu sync.Mutex
	pushed := map[id.EventID]time.Time{}
	srv.WatchPushes(func(p fakehs.Push) {
		mu.Lock()
		for _, e := range p.Events {
			pushed[e] = p.At
		}
		mu.Unlock()
	})
	defer srv.WatchPushes(nil)

	h, err := w.human("ori")
	if err != nil {
		return RoutingResult{}, err
	}
	uid := func(i int) string { u, _ := w.userID(agentName(i)); return string(u) }
	type sent struct {
		ev   id.EventID
		room int
	}
	mentions := make([][]sent, load.Rooms) // per room, in send order
	var sentN, mentionN int
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, load.Rooms)
	cpu0, began := processCPU(), time.Now()
	for i := range load.Rooms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := w.rooms[roomName(i)]
			for k, at := range load.schedule(i, began) {
				if !sleepUntil(lctx, at) {
					return
				}
				content := map[string]any{"msgtype": "m.text", "body": fmt.Sprintf("chatter %d in room %d", k, i)}
				mention := k%load.MentionEvery == load.MentionEvery-1
				if mention {
					token := fmt.Sprintf("k%d-%d", i, len(mentions[i]))
					content["body"] = uid(i) + " please look at " + token
					content["m.mentions"] = map[string]any{"user_ids": []string{uid(i)}}
					content["m.relates_to"] = threadRelation(roots[i], roots[i])
				}
				resp, err := h.cli.SendMessageEvent(lctx, r.id, event.EventMessage, content)
				if err != nil {
					errs[i] = fmt.Errorf("sending message %d in %s: %w", k, roomName(i), err)
					cancel()
					return
				}
				mu.Lock()
				sentN++
				if mention {
					mentionN++
					mentions[i] = append(mentions[i], sent{ev: resp.EventID, room: i})
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return RoutingResult{}, err
	}
	res := RoutingResult{Sent: sentN, Mentions: mentionN}

	// Every mention reaches its agent, alone or in a batch.
	want := map[string]int{}
	for i := range load.Rooms {
		want[agentName(i)] += len(mentions[i])
	}
	var prompts []fakeagent.Prompt
	for a := range perAgent {
		wctx, cancel := w.waitCtx(ctx)
		got, err := w.waitTokens(wctx, a, before[a], want[a])
		cancel()
		if err != nil {
			return RoutingResult{}, err
		}
		prompts = append(prompts, got...)
	}
	res.Wall, res.CPU = time.Since(began), processCPU()-cpu0

	mu.Lock()
	defer mu.Unlock()
	obs.mu.Lock()
	defer obs.mu.Unlock()
	next := make([]int, load.Rooms) // per room, the mention expected next
	for _, p := range prompts {
		toks := mentionToken.FindAllStringSubmatch(p.Text, -1)
		for _, t := range toks {
			room, _ := strconv.Atoi(t[1])
			k, _ := strconv.Atoi(t[2])
			if room >= load.Rooms || k >= len(mentions[room]) {
				return RoutingResult{}, fmt.Errorf("a prompt names mention %s, never sent", t[0])
			}
			if k != next[room] {
				res.OutOfOrder++
			}
			next[room] = k + 1
			if len(toks) > 1 {
				res.Batched++
				continue
			}
			ev := mentions[room][k].ev
			at, ok := pushed[ev]
			if !ok {
				return RoutingResult{}, fmt.Errorf("mention %s reached its agent without fakehs pushing it", t[0])
			}
			received, ok1 := obs.received[ev]
			prompted, ok2 := obs.prompted[ev]
			if !ok1 || !ok2 {
				return RoutingResult{}, fmt.Errorf("mention %s: the daemon's observer heard its push %v and its prompt %v", t[0], ok1, ok2)
			}
			res.EndToEnd = append(res.EndToEnd, p.At.Sub(at))
			res.Daemon = append(res.Daemon, prompted.Sub(received))
		}
	}
	slices.Sort(res.EndToEnd)
	slices.Sort(res.Daemon)
	return res, nil
}

// waitTokens waits until agent's prompts after the first skip hold n mention
// tokens, and returns those prompts.
func (w *world) waitTokens(ctx context.Context, agent string, skip, n int) ([]fakeagent.Prompt, error) {
	for have := skip + 1; ; have++ {
		ps, err := w.ctl.WaitPrompts(ctx, agent, have)
		if err != nil {
			return nil, fmt.Errorf("%s: waiting for %d mentions: %w", agent, n, err)
		}
		got := 0
		for _, p := range ps[skip:] {
			got += len(mentionToken.FindAllString(p.Text, -1))
		}
		if got >= n {
			return ps[skip:], nil
		}
	}
}
