// Package bench is `zooid bench`: it runs the go test benchmarks behind the
// numbered items of docs/performance.md (their bodies live here and in steps, so go test -bench and zooid bench run
// the same code) side by side in one process, and prints one table of ratios.
// Ratios of things measured in the same run on the same machine survive a
// loaded machine far better than absolute times; the CI check compares them
// with a committed baseline (testdata/baseline.json).
package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zooid-dev/zooid/fakehs"
	"github.com/zooid-dev/zooid/sim/steps"
)

// Options select what Run measures.
type Options struct {
	// Short is the CI version: seconds, rooms up to 10k events, 10 agents × 2
	// sessions, few iterations.
	Short bool
	// Agents and Sessions size the idle-sessions measure (default 200 × 5;
	// 10 × 2 when Short).
	Agents, Sessions int
	// Suite also times the whole fake feature suite (a minute or more).
	Suite bool
	// Synapse also measures the Synapse side (needs docker): the history
	// pages of item 3 in rooms of SynapseSizes events sent to a Synapse in a
	// container, and item 1, each feature file on fakehs and on Synapse, Runs
	// times each (many minutes).
	Synapse      bool
	Runs         int
	SynapseSizes []int
	// Items limits the run to these items of docs/performance.md (1–7); none: all.
	Items []int
	// Log hears progress; nil: silent.
	Log io.Writer
}

// Row is one line of the table.
type Row struct {
	// Item is the item of docs/performance.md the row measures (1–6).
	Item int `json:"item"`
	// Key names the row in the baseline.
	Key  string `json:"key"`
	What string `json:"what"`
	// Value is the ratio, count or size the row is about, in Unit.
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
	// From says what Value was computed from, for the reader.
	From string `json:"from,omitempty"`
	// Goal is the target in words; Met whether Value reaches it.
	Goal string `json:"goal,omitempty"`
	Met  *bool  `json:"met,omitempty"`
	// Check marks the rows the baseline comparison covers: ratios and
	// counts that do not move with the machine's load.
	Check bool `json:"check,omitempty"`
}

// Table is the outcome of one Run.
type Table struct {
	Rows []Row `json:"rows"`
	// Machine describes where it ran: CPUs, load average before and after.
	Machine string `json:"machine"`
	Command string `json:"command"`
}

var (
	failMu  sync.Mutex
	failed  = map[string]error{}
	initOne sync.Once
)

// fatal records why a benchmark body failed (testing.Benchmark drops the
// message), then fails it.
func fatal(b *testing.B, err error) {
	b.Helper()
	noteFailure(b.Name(), err)
	b.Fatal(err)
}

func noteFailure(name string, err error) {
	failMu.Lock()
	failed[name] = err
	failMu.Unlock()
}

// measure runs f as a benchmark of benchtime ("100x", "1s").
func measure(name, benchtime string, f func(b *testing.B)) (testing.BenchmarkResult, error) {
	initOne.Do(func() {
		if flag.Lookup("test.benchtime") == nil {
			testing.Init()
		}
		steps.BenchFailure = noteFailure
	})
	if err := flag.Set("test.benchtime", benchtime); err != nil {
		return testing.BenchmarkResult{}, fmt.Errorf("benchtime %q: %w", benchtime, err)
	}
	failMu.Lock()
	clear(failed)
	failMu.Unlock()
	r := testing.Benchmark(f)
	if r.N == 0 {
		failMu.Lock()
		defer failMu.Unlock()
		var why []string
		for n, err := range failed {
			if n != "" {
				n += ": "
			}
			why = append(why, n+err.Error())
		}
		sort.Strings(why)
		if len(why) == 0 {
			why = []string{"no reason recorded"}
		}
		return r, fmt.Errorf("benchmark %s failed: %s", name, strings.Join(why, "; "))
	}
	return r, nil
}

func nsPerOp(r testing.BenchmarkResult) float64 {
	if v, ok := r.Extra["ns/op"]; ok {
		return v
	}
	return float64(r.T.Nanoseconds()) / float64(r.N)
}

func met(ok bool) *bool { return &ok }

// Run measures and returns the table.
func Run(ctx context.Context, o Options) (Table, error) {
	logf := func(format string, args ...any) {
		if o.Log != nil {
			fmt.Fprintf(o.Log, "zooid bench: "+format+"\n", args...)
		}
	}
	if o.Agents == 0 {
		o.Agents, o.Sessions = 200, 5
		if o.Short {
			o.Agents, o.Sessions = 10, 2
		}
	}
	t := Table{Machine: machine()}
	want := func(item int) bool { return len(o.Items) == 0 || slices.Contains(o.Items, item) }
	items := []struct {
		item int
		run  func(context.Context, Options, func(string, ...any)) ([]Row, error)
	}{{2, toolCallRows}, {3, pageRows}, {4, sessionRows}, {5, setupRows}, {6, routingRows}, {7, firstAnswerRows}, {1, featureRatios}}
	for _, s := range items {
		if !want(s.item) || (s.item == 1 && !o.Synapse) {
			continue
		}
		if s.item == 7 && o.Short && !slices.Contains(o.Items, 7) {
			// A real agent started six times: a minute CI's short run
			// does not spend unless asked (--items 7).
			continue
		}
		rows, err := s.run(ctx, o, logf)
		t.Rows = append(t.Rows, rows...)
		if err != nil {
			return t, err
		}
	}
	t.Machine += "; after: " + loadavg()
	slices.SortStableFunc(t.Rows, func(a, b Row) int { return a.Item - b.Item })
	return t, nil
}

// rounds is how many interleaved runs each time is the fastest of: on a
// loaded machine the minimum is the least disturbed, and interleaving puts
// the two sides of a ratio under the same load.
const rounds = 3

// iterations is short's or full's count as a benchtime.
func iterations(o Options, short, full int) string {
	if o.Short {
		return fmt.Sprintf("%dx", short)
	}
	return fmt.Sprintf("%dx", full)
}

// toolCallRows is item 2: one tool call end to end against the floor, and
// the layers in between, each measured in every round.
func toolCallRows(ctx context.Context, o Options, logf func(string, ...any)) ([]Row, error) {
	small, err := SeedRoom(100, fakehs.Profile{})
	if err != nil {
		return nil, err
	}
	defer small.Close()
	type layer struct {
		name        string
		short, full int
		f           func(b *testing.B)
		ns, cpu     float64 // fastest wall time and least CPU of this process a call
	}
	inf := math.Inf(1)
	echo := &layer{"echo", 1000, 10000, BenchEchoUnixSocket, inf, inf}
	xecho := &layer{"xecho", 1000, 10000, BenchEchoCrossProcess, inf, inf}
	bridge := &layer{"bridge", 300, 3000, BenchEchoViaBridge, inf, inf}
	canned := &layer{"canned", 300, 3000, BenchToolCallCanned, inf, inf}
	nohs := &layer{"nohs", 300, 3000, BenchToolCallNoHomeserver, inf, inf}
	call := &layer{"toolcall", 100, 1000, steps.BenchToolCall, inf, inf}
	raw := &layer{"frombridge", 100, 1000, steps.BenchToolCallFromBridge, inf, inf}
	direct := &layer{"roominfo", 100, 1000, func(b *testing.B) { BenchRoomInfoDirect(b, small) }, inf, inf}
	for i := range rounds {
		logf("round %d of %d: unix-socket echo in one process and across two, echo through the bridge, MCP client to a canned server and to zooid's without a homeserver, tool call end to end (agent → bridge → daemon → fakehs) from the agent's MCP client and from the bridge's stdin, its handler alone", i+1, rounds)
		for _, l := range []*layer{echo, xecho, bridge, canned, nohs, call, raw, direct} {
			r, err := measure(l.name, iterations(o, l.short, l.full), l.f)
			if err != nil {
				return nil, err
			}
			l.ns = min(l.ns, nsPerOp(r))
			if c, ok := r.Extra["cpu-ns/op"]; ok {
				l.cpu = min(l.cpu, c)
			}
		}
	}
	logf("counting the homeserver requests of one call of each room tool (room info, members, rooms)")
	reqs, err := steps.MeasureRoomToolRequests(ctx)
	if err != nil {
		return nil, fmt.Errorf("counting the room tools' requests: %w", err)
	}
	of := func(a, b *layer) string { return fmt.Sprintf("%s ÷ %s", dur(a.ns), dur(b.ns)) }
	ratio := call.ns / echo.ns
	rawRatio, rawCross := raw.ns/echo.ns, raw.ns/xecho.ns
	floorRatio := call.ns / canned.ns
	rows := []Row{
		{Item: 2, Key: "toolcall/canned", What: "issue 38, goal 3: the tool call end to end from the agent's MCP client (zooid_get_room_info: bridge, daemon, its room state; fakehs behind it) ÷ the same client through the same bridge to the canned server",
			Value: floorRatio, Unit: "×", From: of(call, canned), Goal: "≤ 2.5×", Met: met(floorRatio <= 2.5)},
	}
	for _, tool := range steps.RoomTools {
		rows = append(rows, Row{Item: 2, Key: "requests/" + tool, What: tool + ": homeserver requests of one call once its room's state is read (the room state, zooid/roomstate)",
			Value: float64(reqs[tool]), Unit: "requests", Goal: "0 (TestRoomToolsAskTheHomeserverNothing)", Met: met(reqs[tool] == 0), Check: true})
	}
	return append(rows, []Row{
		{Item: 2, Key: "frombridge/echo", What: "the issue's path: a tools/call line written to the agent-side bridge's stdin until its answer's line is read from its stdout (daemon, fakehs behind it) ÷ bare unix-socket round trip in one process",
			Value: rawRatio, Unit: "×", From: of(raw, echo), Goal: "≤ 5×", Met: met(rawRatio <= 5)},
		{Item: 2, Key: "frombridge/xecho", What: "the same ÷ bare unix-socket round trip across two processes (a line echoed by another process: the floor of a path that crosses processes)",
			Value: rawCross, Unit: "×", From: of(raw, xecho), Goal: "≤ 5×", Met: met(rawCross <= 5)},
		{Item: 2, Key: "xecho/echo", What: "crossing a process: the cross-process echo ÷ the one-process echo",
			Value: xecho.ns / echo.ns, Unit: "×", From: of(xecho, echo)},
		{Item: 2, Key: "frombridge/bridge", What: "the issue's path ÷ echo through the bridge (the CI check: the same processes and hops, so what is left is the daemon's side and fakehs)",
			Value: raw.ns / bridge.ns, Unit: "×", From: of(raw, bridge), Check: true},
		{Item: 2, Key: "toolcall/echo", What: "MCP tool call end to end from the agent's MCP client (mcp-go, in the fake agent) ÷ bare unix-socket round trip in one process",
			Value: ratio, Unit: "×", From: of(call, echo), Goal: "≤ 5×", Met: met(ratio <= 5)},
		{Item: 2, Key: "client", What: "the agent's side: the call from the agent's MCP client, less the same from the bridge's stdin (mcp-go's client, its ACP tool-call updates)",
			Value: (call.ns - raw.ns) / 1e3, Unit: "µs", From: fmt.Sprintf("%s − %s", dur(call.ns), dur(raw.ns))},
		{Item: 2, Key: "bridge/echo", What: "the bridge process: echo through `zooid mcp` ÷ bare echo",
			Value: bridge.ns / echo.ns, Unit: "×", From: of(bridge, echo)},
		{Item: 2, Key: "canned/echo", What: "the floor with the agent's MCP client: mcp-go through the bridge to a server answering a canned line ÷ bare echo",
			Value: canned.ns / echo.ns, Unit: "×", From: of(canned, echo)},
		{Item: 2, Key: "nohs/canned", What: "zooid's MCP server and handler, no homeserver behind it, in place of the canned server (same client, same bridge)",
			Value: nohs.ns / canned.ns, Unit: "×", From: of(nohs, canned)},
		{Item: 2, Key: "cpu/nohs÷canned", What: "this process's CPU a call with zooid's MCP server ÷ with the canned server (the CI check: CPU moves less with the load than wall time)",
			Value: nohs.cpu / canned.cpu, Unit: "×", From: fmt.Sprintf("%s ÷ %s", dur(nohs.cpu), dur(canned.cpu)), Check: true},
		{Item: 2, Key: "toolcall/bridge", What: "MCP tool call end to end ÷ echo through the bridge (the CI check: both cross processes)",
			Value: call.ns / bridge.ns, Unit: "×", From: of(call, bridge), Check: true},
		{Item: 2, Key: "roominfo/toolcall", What: "of a tool call end to end, the handler as it read before the room state: zooid_get_room_info in-process with its two fakehs requests (history without the room state)",
			Value: 100 * direct.ns / call.ns, Unit: "%", From: of(direct, call)},
		{Item: 2, Key: "cpu/server", What: "CPU a call in zooid's MCP server: this process's CPU a call with it, less with the canned server (both hold the same mcp-go client)",
			Value: (nohs.cpu - canned.cpu) / 1e3, Unit: "µs", From: fmt.Sprintf("%s − %s", dur(nohs.cpu), dur(canned.cpu))},
		{Item: 2, Key: "cpu/homeserver", What: "CPU a call in the handler and fakehs as it read before the room state (both in one process, so this counts both sides of the two HTTP requests)",
			Value: direct.cpu / 1e3, Unit: "µs"},
	}...), nil
}

// pageRows is item 3: history pages in rooms of growing size on fakehs and,
// with o.Synapse, on Synapse.
func pageRows(ctx context.Context, o Options, logf func(string, ...any)) ([]Row, error) {
	sizes := []int{1_000, 10_000, 100_000}
	if o.Short {
		sizes = sizes[:2]
	}
	// Every room is seeded first, so the sizes can be measured in turn.
	rooms := map[int]*Room{}
	defer func() {
		for _, r := range rooms {
			r.Close()
		}
	}()
	for _, size := range sizes {
		logf("seeding a fakehs room of %d events", size)
		r, err := SeedRoom(size, fakehs.Profile{})
		if err != nil {
			return nil, err
		}
		rooms[size] = r
	}
	rows, err := measurePages(o, logf, "", "fakehs", rooms, sizes, iterations(o, 30, 50), true, true)
	if err != nil || !o.Synapse {
		return rows, err
	}
	for _, r := range rooms {
		r.Close()
	}
	clear(rooms)

	sizes = o.SynapseSizes
	if len(sizes) == 0 {
		sizes = []int{1_000, 10_000, 100_000}
		if o.Short {
			sizes = sizes[:2]
		}
	}
	// The rooms come from snapshots, sent once (for 100k, the better part of
	// an hour on a busy machine) and reused while the Synapse image and the
	// rooms' recipe are unchanged.
	logf("starting Synapse from the snapshot of rooms of %v events (building what is missing)", sizes)
	syn, srooms, have, err := SnapshotRooms(ctx, sizes, logf)
	if err != nil {
		return rows, fmt.Errorf("the Synapse bench rooms: %w", err)
	}
	defer func() {
		if err := syn.Close(); err != nil {
			logf("%v", err)
		}
	}()
	maps.Copy(rooms, srooms)
	for _, h := range have {
		rows = append(rows, Row{Item: 3, Key: "synapse/seed/" + sizeLabel(h.Events),
			What: fmt.Sprintf("Synapse: sending the room of %s events into its snapshot (%d at once, %s; reused until the image or the recipe changes)",
				sizeLabel(h.Events), h.Workers, h.Built.Format("2006-01-02 15:04 UTC")),
			Value: h.Send, Unit: "s"})
	}
	// A page's time is the median of its reads: one read now and then takes
	// many times the others (a burst of load; on Synapse its caches and its
	// one busy process).
	srows, err := measurePages(o, logf, "synapse/", "Synapse", rooms, sizes, iterations(o, 9, 15), false, true)
	return append(rows, srows...), err
}

// sizeLabel is 1000 as "1k", 1500 as "1500".
func sizeLabel(n int) string {
	if n%1000 == 0 {
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// measurePages reads the second page of each tool in each room, rounds
// times interleaved, and gives each size's ratio to the smallest and the
// most requests a page made. A page's time is the fastest round's mean, or
// with median its median read.
func measurePages(o Options, logf func(string, ...any), prefix, where string, rooms map[int]*Room, sizes []int, benchtime string, check, median bool) ([]Row, error) {
	pageNs := map[string]map[int]float64{}
	extra := map[string]map[int]map[string]float64{} // the fastest run's metrics
	reqs := map[string]float64{}
	for i := range rounds {
		logf("round %d of %d: history pages on %s", i+1, rounds, where)
		for _, tool := range Tools {
			if pageNs[tool.Name] == nil {
				pageNs[tool.Name] = map[int]float64{}
				extra[tool.Name] = map[int]map[string]float64{}
			}
			for _, size := range sizes {
				r, err := measure(tool.Name, benchtime, func(b *testing.B) { BenchPage(b, rooms[size], tool) })
				if err != nil {
					return nil, fmt.Errorf("%s: %w", where, err)
				}
				ns := nsPerOp(r)
				if median {
					ns = r.Extra["median-ns/op"]
				}
				if old, ok := pageNs[tool.Name][size]; !ok || ns < old {
					pageNs[tool.Name][size] = ns
					extra[tool.Name][size] = r.Extra
				}
				reqs[tool.Name] = max(reqs[tool.Name], r.Extra["requests/op"])
			}
		}
	}
	var rows []Row
	label := ""
	if prefix != "" {
		label = where + ": "
	}
	for _, tool := range Tools {
		base := pageNs[tool.Name][sizes[0]]
		for _, size := range sizes[1:] {
			ratio := pageNs[tool.Name][size] / base
			rows = append(rows, Row{Item: 3, Key: fmt.Sprintf("%spage/%s/%s÷%s", prefix, tool.Name, sizeLabel(size), sizeLabel(sizes[0])),
				What:  fmt.Sprintf("%s%s: a page of %d at %s events ÷ at %s", label, tool.Name, PageLimit, sizeLabel(size), sizeLabel(sizes[0])),
				Value: ratio, Unit: "×", From: fmt.Sprintf("%s ÷ %s", dur(pageNs[tool.Name][size]), dur(base)),
				Goal: "≤ 1.5×", Met: met(ratio <= 1.5), Check: check})
		}
		rows = append(rows, Row{Item: 3, Key: prefix + "requests/" + tool.Name, What: label + tool.Name + ": homeserver requests per page (most over the sizes)",
			Value: reqs[tool.Name], Unit: "requests", Goal: "constant (TestPageRequestsBounded)", Check: check})
		if r := endpointRow(prefix, label, tool.Name, sizes, extra[tool.Name]); r != nil {
			rows = append(rows, *r)
		}
	}
	return rows, nil
}

// endpointRow says where a page's homeserver time went, endpoint by
// endpoint, at the smallest and the largest size, from the "ns/op:<endpoint>"
// metrics BenchPage reports when the room times its requests; its value is
// the growth of the endpoint that grew most. Nil when nothing was timed.
func endpointRow(prefix, label, tool string, sizes []int, extra map[int]map[string]float64) *Row {
	lo, hi := sizes[0], sizes[len(sizes)-1]
	var eps []string
	for k := range extra[hi] {
		if ep, ok := strings.CutPrefix(k, "ns/op:"); ok {
			eps = append(eps, ep)
		}
	}
	if len(eps) == 0 {
		return nil
	}
	sort.Strings(eps)
	var parts []string
	worst, growth := "", 0.0
	for _, ep := range eps {
		a, b := extra[lo]["ns/op:"+ep], extra[hi]["ns/op:"+ep]
		parts = append(parts, fmt.Sprintf("%s %s → %s", ep, dur(a), dur(b)))
		if a > 0 && b/a > growth {
			worst, growth = ep, b/a
		}
	}
	return &Row{Item: 3, Key: fmt.Sprintf("%sendpoints/%s", prefix, tool),
		What:  fmt.Sprintf("%s%s: homeserver time a page by endpoint, at %s → at %s events; the one that grew most: %s", label, tool, sizeLabel(lo), sizeLabel(hi), worst),
		Value: growth, Unit: "×", From: strings.Join(parts, "; ")}
}

// sessionRows is item 4: idle sessions in one daemon.
func sessionRows(ctx context.Context, o Options, logf func(string, ...any)) ([]Row, error) {
	logf("%d agents × %d sessions", o.Agents, o.Sessions)
	st, err := steps.MeasureIdleSessions(ctx, o.Agents, o.Sessions)
	if err != nil {
		return nil, err
	}
	who := fmt.Sprintf("%d agents × %d sessions", o.Agents, o.Sessions)
	return []Row{
		{Item: 4, Key: "session/heap", What: "daemon heap per idle session, " + who, Value: st.HeapPerSession / 1024, Unit: "KiB",
			Goal: "< 1024 KiB", Met: met(st.HeapPerSession < 1<<20)},
		{Item: 4, Key: "session/goroutines", What: "goroutines per idle session", Value: st.GoroutinesPerSession, Unit: "goroutines"},
		{Item: 4, Key: "session/fds", What: "file descriptors per idle session", Value: st.FDsPerSession, Unit: "fds"},
		{Item: 4, Key: "session/left", What: "goroutines and fds left after the daemon closed",
			Value: float64(st.GoroutinesLeft + st.FDsLeft), Unit: "", From: fmt.Sprintf("%d goroutines, %d fds", st.GoroutinesLeft, st.FDsLeft),
			Goal: "0 (TestIdleSessionsReturnToBaseline)", Met: met(st.GoroutinesLeft <= 0 && st.FDsLeft <= 0)},
	}, nil
}

// setupRows is item 5: a scenario's world setup, and the whole fake suite.
func setupRows(ctx context.Context, o Options, logf func(string, ...any)) ([]Row, error) {
	logf("scenario setup on fakehs")
	setupNs, cpuNs := math.Inf(1), math.Inf(1)
	for range rounds {
		r, err := measure("setup", iterations(o, 3, 10), func(b *testing.B) { steps.BenchScenarioSetup(b, 0) })
		if err != nil {
			return nil, err
		}
		setupNs = min(setupNs, nsPerOp(r))
		if r, err = measure("cpu", iterations(o, 100, 1000), BenchCPU); err != nil {
			return nil, err
		}
		cpuNs = min(cpuNs, nsPerOp(r))
	}
	rows := []Row{{Item: 5, Key: "setup/cpu", What: "a scenario's world setup on fakehs ÷ the CPU unit (SHA-256 of 256 KiB)",
		Value: setupNs / cpuNs, Unit: "×", From: fmt.Sprintf("%s ÷ %s", dur(setupNs), dur(cpuNs)),
		Goal: "setup < 20 ms", Met: met(setupNs < 20e6)}}
	if o.Suite {
		logf("the whole fake feature suite")
		start := time.Now()
		var out bytes.Buffer
		status := steps.Run(steps.Options{Context: ctx, Homeserver: "fake", Format: "progress", Output: &out, Concurrency: 4})
		el := time.Since(start)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if status != 0 {
			logf("the fake suite failed:\n%s", tail(out.String(), 4000))
		}
		rows = append(rows, Row{Item: 5, Key: "suite/fake", What: fmt.Sprintf("the whole fake feature suite, concurrency 4, on %d CPUs", cpus()),
			Value: el.Seconds(), Unit: "s", Goal: "passes", Met: met(status == 0)})
	}
	return rows, nil
}

// routingLoad is item 6's busy homeserver: 20 rooms at 50 messages a second,
// every fifth a mention of the room's agent in its thread, 10 agents with
// warm processes; short runs it for one second, full for ten.
func routingLoad(o Options) steps.RoutingLoad {
	l := steps.RoutingLoad{Rooms: 20, Agents: 10, PerSecond: 50, MentionEvery: 5, Duration: 10 * time.Second}
	if o.Short {
		l.Duration = time.Second
	}
	return l
}

// routingRows is item 6: the daemon's own part of an event's way, from the
// homeserver's push to the session/prompt the agent reads, while many rooms
// are busy at once; per-room order must hold.
func routingRows(ctx context.Context, o Options, logf func(string, ...any)) ([]Row, error) {
	load := routingLoad(o)
	logf("a busy homeserver: %d rooms at %d messages a second each for %s, %d agents with warm processes", load.Rooms, load.PerSecond, load.Duration, load.Agents)
	r, err := runRouting(ctx, load)
	if err != nil {
		return nil, err
	}
	lock := load
	lock.Lockstep = true
	logf("the same rooms sending in lockstep")
	l, err := runRouting(ctx, lock)
	if err != nil {
		return nil, err
	}
	p50, p99 := steps.Quantile(r.Daemon, 0.5), steps.Quantile(r.Daemon, 0.99)
	e50, e99 := steps.Quantile(r.EndToEnd, 0.5), steps.Quantile(r.EndToEnd, 0.99)
	counted := func(r steps.RoutingResult) string {
		return fmt.Sprintf("%d mentions of %d, %d messages", len(r.Daemon), r.Mentions, r.Sent)
	}
	from := counted(r)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
	return []Row{
		{Item: 6, Key: "route/p50", What: fmt.Sprintf("the daemon's part, push received → session/prompt written, median, %d rooms × %d messages/s, %d agents with warm processes", load.Rooms, load.PerSecond, load.Agents),
			Value: ms(p50), Unit: "ms", From: from, Goal: "≤ 2 ms", Met: met(p50 <= 2*time.Millisecond)},
		{Item: 6, Key: "route/p99", What: "the same, 99th percentile",
			Value: ms(p99), Unit: "ms", From: from, Goal: "≤ 10 ms", Met: met(p99 <= 10*time.Millisecond)},
		{Item: 6, Key: "route/e2e50", What: "fakehs starting the push → the agent reading the prompt (adds the push's HTTP request and the agent's pipe), median",
			Value: ms(e50), Unit: "ms", From: from},
		{Item: 6, Key: "route/e2e99", What: "the same, 99th percentile",
			Value: ms(e99), Unit: "ms", From: from},
		{Item: 6, Key: "route/rate", What: "events routed a second of this process's CPU (daemon, fakehs and the senders share it: a floor on one core of the daemon alone)",
			Value: r.EventsPerCoreSecond(), Unit: "events/s", From: fmt.Sprintf("%d events ÷ %s CPU", r.Sent, r.CPU.Round(time.Millisecond))},
		{Item: 6, Key: "route/batched", What: "mentions prompted together with another in one session/prompt (not in the quantiles: their wait is a turn's)",
			Value: float64(r.Batched), Unit: "mentions"},
		{Item: 6, Key: "route/lockstep50", What: fmt.Sprintf("the daemon's part with the rooms sending in lockstep (a burst of %d messages every %s, of %d mentions pushed together every %s), median",
			load.Rooms, time.Second/time.Duration(load.PerSecond), load.Rooms, time.Duration(load.MentionEvery)*time.Second/time.Duration(load.PerSecond)),
			Value: ms(steps.Quantile(l.Daemon, 0.5)), Unit: "ms", From: counted(l)},
		{Item: 6, Key: "route/lockstep99", What: "the same, 99th percentile (the last mention of a burst waits for the burst's others)",
			Value: ms(steps.Quantile(l.Daemon, 0.99)), Unit: "ms", From: counted(l)},
	}, nil
}

// runRouting runs one routing load and refuses a run that broke a room's order.
func runRouting(ctx context.Context, load steps.RoutingLoad) (steps.RoutingResult, error) {
	r, err := steps.RunRoutingLoad(ctx, load)
	if err != nil {
		return r, err
	}
	if r.OutOfOrder > 0 {
		return r, fmt.Errorf("routing (lockstep %t): %d of %d mentions reached their session out of their room's order", load.Lockstep, r.OutOfOrder, r.Mentions)
	}
	return r, nil
}

func dur(ns float64) string {
	d := time.Duration(ns)
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	default:
		return fmt.Sprintf("%.1f µs", float64(d)/1e3)
	}
}

// Markdown writes t as a markdown table.
func (t Table) Markdown(w io.Writer) {
	fmt.Fprintf(w, "| # | measure | value | from | goal | met |\n|---|---|---|---|---|---|\n")
	for _, r := range t.Rows {
		m := ""
		if r.Met != nil {
			m = "no"
			if *r.Met {
				m = "yes"
			}
		}
		fmt.Fprintf(w, "| %d | %s | %s %s | %s | %s | %s |\n", r.Item, r.What, num(r.Value), r.Unit, r.From, r.Goal, m)
	}
	fmt.Fprintf(w, "\nmachine: %s\n", t.Machine)
}

func num(v float64) string {
	switch {
	case v == math.Trunc(v) && math.Abs(v) < 1e6:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f", v)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// Baseline is the committed table of checked values.
type Baseline map[string]float64

// Baseline returns t's checked rows.
func (t Table) Baseline() Baseline {
	b := Baseline{}
	for _, r := range t.Rows {
		if r.Check {
			b[r.Key] = r.Value
		}
	}
	return b
}

// ReadBaseline reads a baseline file written by WriteBaseline.
func ReadBaseline(path string) (Baseline, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the baseline: %w", err)
	}
	var b Baseline
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, fmt.Errorf("reading the baseline %s: %w", path, err)
	}
	return b, nil
}

// WriteBaseline writes t's checked rows to path.
func (t Table) WriteBaseline(path string) error {
	data, err := json.MarshalIndent(t.Baseline(), "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the baseline: %w", err)
	}
	if err := os.WriteFile(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the baseline: %w", err)
	}
	return nil
}

// Regressions lists the checked rows of t more than factor times their
// baseline value (every checked value is lower-is-better), checked rows the
// baseline lacks, and baseline keys t did not measure. A baseline of 0
// allows nothing above 0.
func (t Table) Regressions(b Baseline, factor float64) []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range t.Rows {
		if !r.Check {
			continue
		}
		seen[r.Key] = true
		base, ok := b[r.Key]
		if !ok {
			// A check with nothing to compare against could never fail.
			out = append(out, r.Key+": checked but not in the baseline (add it: --write-baseline, or by hand)")
			continue
		}
		if r.Value > factor*base {
			out = append(out, fmt.Sprintf("%s: %s, baseline %s (more than %g×)", r.Key, num(r.Value), num(base), factor))
		}
	}
	for k := range b {
		if !seen[k] {
			out = append(out, k+": in the baseline but not measured")
		}
	}
	sort.Strings(out)
	return out
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
