package steps

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/cucumber/godog"
)

// The phases of a scenario's wall time that Options.Timings reports; the
// rest of a scenario's time is its steps ("steps").
const (
	phaseLease    = "lease"    // waiting for a homeserver slot
	phaseHumans   = "humans"   // registering the scenario's humans
	phaseRooms    = "rooms"    // creating plain rooms and joining them
	phaseSeed     = "seed"     // giving busy and recorded rooms their history
	phaseHandover = "handover" // waiting for the homeserver to push the history to the drain
	phaseDaemon   = "daemon"   // starting the daemon and its agents
	phaseTeardown = "teardown" // closing the world
)

// phaseOrder is the column order of the report.
var phaseOrder = []string{phaseLease, phaseHumans, phaseRooms, phaseSeed, phaseHandover, phaseDaemon, "steps", phaseTeardown}

// timings collects where a run's time went: the homeserver's start, and each
// scenario's wall time split into phases. It is what -godog.timings and
// `zooid sim --timings` print.
type timings struct {
	mu        sync.Mutex
	start     time.Time
	backend   time.Duration // starting the homeserver (the Synapse container)
	notes     []string      // what the backend said while starting (a snapshot built or reused)
	scenarios []*scenarioTiming
}

// note keeps a line for the report; t may be nil.
func (t *timings) note(line string) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.notes = append(t.notes, line)
	t.mu.Unlock()
}

// scenarioTiming is one scenario's wall time and its phases.
type scenarioTiming struct {
	feature, name string
	start, end    time.Time
	failed        bool
	mu            sync.Mutex
	phases        map[string]time.Duration
}

// add charges the time since begin to phase.
func (s *scenarioTiming) add(phase string, begin time.Time) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.phases[phase] += time.Since(begin)
	s.mu.Unlock()
}

// begin starts timing a scenario.
func (t *timings) begin(sc *godog.Scenario) *scenarioTiming {
	st := &scenarioTiming{feature: relPath(sc.Uri), name: sc.Name, start: time.Now(), phases: map[string]time.Duration{}}
	t.mu.Lock()
	t.scenarios = append(t.scenarios, st)
	t.mu.Unlock()
	return st
}

// finish ends a scenario's timing.
func (s *scenarioTiming) finish(failed bool) {
	s.mu.Lock()
	s.end, s.failed = time.Now(), failed
	var known time.Duration
	for _, d := range s.phases {
		known += d
	}
	s.phases["steps"] = max(0, s.end.Sub(s.start)-known)
	s.mu.Unlock()
}

func (s *scenarioTiming) wall() time.Duration { return s.end.Sub(s.start) }

// featureTiming sums a feature's scenarios.
type featureTiming struct {
	name        string
	scenarios   int
	first, last time.Time
	sum         time.Duration // scenario-seconds: the scenarios' wall times added up
	phases      map[string]time.Duration
}

// write prints the report: per feature, its span (first scenario's start to
// last one's end, which overlaps other features when scenarios run
// concurrently), its scenario-seconds and their phases; then the slowest
// scenarios.
func (t *timings) write(out io.Writer, slowest int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	total := time.Since(t.start)
	byName := map[string]*featureTiming{}
	var feats []*featureTiming
	var all []*scenarioTiming
	for _, s := range t.scenarios {
		if s.end.IsZero() {
			continue
		}
		all = append(all, s)
		f := byName[s.feature]
		if f == nil {
			f = &featureTiming{name: s.feature, first: s.start, last: s.end, phases: map[string]time.Duration{}}
			byName[s.feature] = f
			feats = append(feats, f)
		}
		f.scenarios++
		f.first = minTime(f.first, s.start)
		if s.end.After(f.last) {
			f.last = s.end
		}
		f.sum += s.wall()
		for p, d := range s.phases {
			f.phases[p] += d
		}
	}
	slices.SortFunc(feats, func(a, b *featureTiming) int { return int(b.sum - a.sum) })
	fmt.Fprintf(out, "\nzooid sim: timings: run %s, homeserver start %s, %d scenarios\n", secs(total), secs(t.backend), len(all))
	for _, n := range t.notes {
		fmt.Fprintf(out, "  %s\n", n)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "scen\tspan\tscen-s\t%s\t  feature\n", strings.Join(phaseOrder, "\t"))
	sumAll := &featureTiming{name: "all", phases: map[string]time.Duration{}}
	for _, f := range feats {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t  %s\n", f.scenarios, secs(f.last.Sub(f.first)), secs(f.sum), phaseCells(f.phases), f.name)
		sumAll.scenarios += f.scenarios
		sumAll.sum += f.sum
		for p, d := range f.phases {
			sumAll.phases[p] += d
		}
	}
	fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t  %s\n", sumAll.scenarios, secs(total), secs(sumAll.sum), phaseCells(sumAll.phases), sumAll.name)
	_ = tw.Flush()
	slices.SortFunc(all, func(a, b *scenarioTiming) int { return int(b.wall() - a.wall()) })
	if len(all) > slowest {
		all = all[:slowest]
	}
	fmt.Fprintf(out, "\nslowest scenarios:\n")
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "wall\t%s\t  scenario\n", strings.Join(phaseOrder, "\t"))
	for _, s := range all {
		mark := ""
		if s.failed {
			mark = " (failed)"
		}
		fmt.Fprintf(tw, "%s\t%s\t  %s: %s%s\n", secs(s.wall()), phaseCells(s.phases), s.feature, s.name, mark)
	}
	_ = tw.Flush()
}

// RunTimes is where one run's time went, as Options.Times receives it.
type RunTimes struct {
	// Total is the run's wall time, the homeserver's start included.
	Total time.Duration
	// Backend is starting the homeserver (the Synapse container, its snapshot).
	Backend time.Duration
	// Scenarios are the finished scenarios in the order they started.
	Scenarios []ScenarioTime
}

// ScenarioTime is one scenario's wall time in a run.
type ScenarioTime struct {
	// Feature is the feature file's path from the module root; Name the scenario's.
	Feature, Name string
	// Wall is from the scenario's start to the end of its teardown.
	Wall time.Duration
	// Lease is the part of Wall spent waiting for a homeserver slot (another
	// scenario's time, not this one's).
	Lease  time.Duration
	Failed bool
}

func (t *timings) times() RunTimes {
	t.mu.Lock()
	defer t.mu.Unlock()
	rt := RunTimes{Total: time.Since(t.start), Backend: t.backend}
	for _, s := range t.scenarios {
		s.mu.Lock()
		if !s.end.IsZero() {
			rt.Scenarios = append(rt.Scenarios, ScenarioTime{Feature: s.feature, Name: s.name, Wall: s.wall(), Lease: s.phases[phaseLease], Failed: s.failed})
		}
		s.mu.Unlock()
	}
	return rt
}

func phaseCells(p map[string]time.Duration) string {
	cells := make([]string, len(phaseOrder))
	for i, name := range phaseOrder {
		cells[i] = secs(p[name])
	}
	return strings.Join(cells, "\t")
}

func secs(d time.Duration) string { return fmt.Sprintf("%.1fs", d.Seconds()) }

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
