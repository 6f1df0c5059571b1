// Package bench is `zooid bench`: it runs the go test benchmarks of issue 15
// (their bodies live here and in steps, so go test -bench and zooid bench run
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
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zooid-dev/zooid/fakehs"
	"github.com/zooid-dev/zooid/steps"
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
	// Synapse also times each feature file on fakehs and on Synapse (needs
	// docker; many minutes), Runs times each.
	Synapse bool
	Runs    int
	// Log hears progress; nil: silent.
	Log io.Writer
}

// Row is one line of the table.
type Row struct {
	// Item is the issue 15 item the row measures (1–5).
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
	n := func(short, full int) string {
		if o.Short {
			return fmt.Sprintf("%dx", short)
		}
		return fmt.Sprintf("%dx", full)
	}
	t := Table{Machine: machine()}
	add := func(r Row) { t.Rows = append(t.Rows, r) }

	// Times are the fastest of Rounds interleaved runs: on a loaded machine
	// the minimum is the least disturbed, and interleaving puts the two sides
	// of a ratio under the same load.
	rounds := 3
	best := func(name, benchtime string, f func(b *testing.B)) (float64, testing.BenchmarkResult, error) {
		r, err := measure(name, benchtime, f)
		return nsPerOp(r), r, err
	}
	var cpuNs, echoNs, bridgeNs, callNs, directNs float64 = math.Inf(1), math.Inf(1), math.Inf(1), math.Inf(1), math.Inf(1)
	small, err := SeedRoom(100, fakehs.Profile{})
	if err != nil {
		return t, err
	}
	defer small.Close()
	for i := range rounds {
		logf("round %d of %d: cpu unit, unix-socket echo, echo through the bridge, tool call end to end (agent → bridge → daemon → fakehs), its handler alone", i+1, rounds)
		for _, m := range []struct {
			name, short, full string
			f                 func(b *testing.B)
			into              *float64
		}{
			{"cpu", "100x", "1000x", BenchCPU, &cpuNs},
			{"echo", "1000x", "10000x", BenchEchoUnixSocket, &echoNs},
			{"bridge", "300x", "3000x", BenchEchoViaBridge, &bridgeNs},
			{"toolcall", "100x", "1000x", steps.BenchToolCall, &callNs},
			{"roominfo", "100x", "1000x", func(b *testing.B) { BenchRoomInfoDirect(b, small) }, &directNs},
		} {
			bt := m.full
			if o.Short {
				bt = m.short
			}
			ns, _, err := best(m.name, bt, m.f)
			if err != nil {
				return t, err
			}
			*m.into = min(*m.into, ns)
		}
	}

	// 2. One tool call end to end against the floor, and its parts.
	ratio := callNs / echoNs
	add(Row{Item: 2, Key: "toolcall/echo", What: "MCP tool call end to end ÷ bare unix-socket round trip",
		Value: ratio, Unit: "×", From: fmt.Sprintf("%s ÷ %s", dur(callNs), dur(echoNs)),
		Goal: "≤ 5×", Met: met(ratio <= 5)})
	add(Row{Item: 2, Key: "bridge/echo", What: "of which the bridge process: echo through `zooid mcp` ÷ bare echo",
		Value: bridgeNs / echoNs, Unit: "×", From: fmt.Sprintf("%s ÷ %s", dur(bridgeNs), dur(echoNs))})
	add(Row{Item: 2, Key: "toolcall/bridge", What: "MCP tool call end to end ÷ echo through the bridge (the CI check: both cross processes)",
		Value: callNs / bridgeNs, Unit: "×", From: fmt.Sprintf("%s ÷ %s", dur(callNs), dur(bridgeNs)), Check: true})
	add(Row{Item: 2, Key: "roominfo/toolcall", What: "of which the handler and fakehs (zooid_get_room_info in-process)",
		Value: 100 * directNs / callNs, Unit: "%", From: fmt.Sprintf("%s ÷ %s", dur(directNs), dur(callNs))})

	// 3. History pages in rooms of growing size, all seeded first so the
	// sizes can be measured in turn.
	sizes := []int{1_000, 10_000, 100_000}
	if o.Short {
		sizes = sizes[:2]
	}
	rooms := map[int]*Room{}
	defer func() {
		for _, r := range rooms {
			r.Close()
		}
	}()
	for _, size := range sizes {
		logf("seeding a room of %d events", size)
		if rooms[size], err = SeedRoom(size, fakehs.Profile{}); err != nil {
			return t, err
		}
	}
	pageNs := map[string]map[int]float64{}
	reqs := map[string]float64{}
	for i := range rounds {
		logf("round %d of %d: history pages", i+1, rounds)
		for _, tool := range Tools {
			if pageNs[tool.Name] == nil {
				pageNs[tool.Name] = map[int]float64{}
			}
			for _, size := range sizes {
				ns, r, err := best(tool.Name, n(10, 50), func(b *testing.B) { BenchPage(b, rooms[size], tool) })
				if err != nil {
					return t, err
				}
				if old, ok := pageNs[tool.Name][size]; !ok || ns < old {
					pageNs[tool.Name][size] = ns
				}
				reqs[tool.Name] = max(reqs[tool.Name], r.Extra["requests/op"])
			}
		}
	}
	for _, tool := range Tools {
		for _, size := range sizes[1:] {
			ratio := pageNs[tool.Name][size] / pageNs[tool.Name][sizes[0]]
			add(Row{Item: 3, Key: fmt.Sprintf("page/%s/%dk÷1k", tool.Name, size/1000),
				What:  fmt.Sprintf("%s: a page of %d at %dk events ÷ at 1k", tool.Name, PageLimit, size/1000),
				Value: ratio, Unit: "×", From: fmt.Sprintf("%s ÷ %s", dur(pageNs[tool.Name][size]), dur(pageNs[tool.Name][sizes[0]])),
				Goal: "≤ 1.5×", Met: met(ratio <= 1.5), Check: true})
		}
		add(Row{Item: 3, Key: "requests/" + tool.Name, What: tool.Name + ": homeserver requests per page (most over the sizes)",
			Value: reqs[tool.Name], Unit: "requests", Goal: "constant (TestPageRequestsBounded)", Check: true})
	}
	for _, r := range rooms {
		r.Close()
	}
	clear(rooms)

	// 4. Idle sessions in one daemon.
	logf("%d agents × %d sessions", o.Agents, o.Sessions)
	st, err := steps.MeasureIdleSessions(ctx, o.Agents, o.Sessions)
	if err != nil {
		return t, err
	}
	who := fmt.Sprintf("%d agents × %d sessions", o.Agents, o.Sessions)
	add(Row{Item: 4, Key: "session/heap", What: "daemon heap per idle session, " + who, Value: st.HeapPerSession / 1024, Unit: "KiB",
		Goal: "< 1024 KiB", Met: met(st.HeapPerSession < 1<<20)})
	add(Row{Item: 4, Key: "session/goroutines", What: "goroutines per idle session", Value: st.GoroutinesPerSession, Unit: "goroutines"})
	add(Row{Item: 4, Key: "session/fds", What: "file descriptors per idle session", Value: st.FDsPerSession, Unit: "fds"})
	add(Row{Item: 4, Key: "session/left", What: "goroutines and fds left after the daemon closed",
		Value: float64(st.GoroutinesLeft + st.FDsLeft), Unit: "", From: fmt.Sprintf("%d goroutines, %d fds", st.GoroutinesLeft, st.FDsLeft),
		Goal: "0 (TestIdleSessionsReturnToBaseline)", Met: met(st.GoroutinesLeft <= 0 && st.FDsLeft <= 0)})

	// 5. A scenario's world setup, and the whole fake suite.
	logf("scenario setup on fakehs")
	setupNs := math.Inf(1)
	for range rounds {
		ns, _, err := best("setup", n(3, 10), func(b *testing.B) { steps.BenchScenarioSetup(b, 0) })
		if err != nil {
			return t, err
		}
		setupNs = min(setupNs, ns)
		cpu, _, err := best("cpu", n(100, 1000), BenchCPU)
		if err != nil {
			return t, err
		}
		cpuNs = min(cpuNs, cpu)
	}
	add(Row{Item: 5, Key: "setup/cpu", What: "a scenario's world setup on fakehs ÷ the CPU unit (SHA-256 of 256 KiB)",
		Value: setupNs / cpuNs, Unit: "×", From: fmt.Sprintf("%s ÷ %s", dur(setupNs), dur(cpuNs)),
		Goal: "setup < 20 ms", Met: met(setupNs < 20e6)})
	if o.Suite {
		logf("the whole fake feature suite")
		start := time.Now()
		var out bytes.Buffer
		status := steps.Run(steps.Options{Homeserver: "fake", Format: "progress", Output: &out, Concurrency: 4})
		el := time.Since(start)
		if status != 0 {
			logf("the fake suite failed:\n%s", tail(out.String(), 4000))
		}
		add(Row{Item: 5, Key: "suite/fake", What: fmt.Sprintf("the whole fake feature suite, concurrency 4, on %d CPUs", cpus()),
			Value: el.Seconds(), Unit: "s", Goal: "passes", Met: met(status == 0)})
	}
	if o.Synapse {
		rows, err := featureRatios(ctx, o, logf)
		t.Rows = append(t.Rows, rows...)
		if err != nil {
			return t, err
		}
	}
	t.Machine += "; after: " + loadavg()
	slices.SortStableFunc(t.Rows, func(a, b Row) int { return a.Item - b.Item })
	return t, nil
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
// baseline value (every checked value is lower-is-better), and baseline keys
// t did not measure. A baseline of 0 allows nothing above 0.
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
