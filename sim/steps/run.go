// Package steps is the Gherkin harness: a fresh world per scenario (a
// homeserver, the daemon in-process, scripted agents as real child
// processes), the step vocabulary that drives it, and Run, which both
// `go test ./sim/steps` and `zooid sim` use to run the features.
package steps

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zooid-dev/zooid/internal/testdeps"
	"github.com/zooid-dev/zooid/sim/standin"

	"github.com/cucumber/godog"
)

// HomeserverEnv selects the homeserver when Options.Homeserver is empty.
const HomeserverEnv = "ZOOID_TEST_HOMESERVER"

// FakeOnlyTag marks scenarios that need fakehs (fault injection); they are
// excluded on any other homeserver.
const FakeOnlyTag = "@fake-only"

// Options configures one run of the features.
type Options struct {
	// Context, when it ends, interrupts the run (default: never): scenarios
	// not started yet fail at once as interrupted, the waits of running ones
	// end, every world is still torn down and the homeserver stopped, and Run
	// returns a failure status. zooid sim and zooid bench end it on SIGINT.
	Context context.Context
	// Paths are feature files or directories; empty means the module's features/.
	Paths []string
	// Homeserver is "fake", "fake-degraded", "synapse", "synapse-federation" or a URL; empty reads $ZOOID_TEST_HOMESERVER, then "fake".
	Homeserver string
	// Tags is a godog tag expression, e.g. "@mcp && ~@slow".
	Tags string
	// Format is pretty, progress, junit or cucumber (default progress).
	Format string
	// Concurrency is how many scenarios run at once (default 4).
	Concurrency int
	// Output receives the formatter's report (default stdout).
	Output io.Writer
	// TestingT, when set, runs each scenario as a subtest.
	TestingT *testing.T
	// Logger receives the daemon's and the harness's logs (default: discarded).
	Logger *slog.Logger
	// Wait bounds every wait of a step (default 10s; 30s on synapse).
	Wait time.Duration
	// TurnTimeout is the daemon's turn timeout (default: Wait; an agent's
	// start-up is bounded by Wait either way). A scenario about hung agents
	// sets a short one of its own ("a turn times out after 1 second").
	TurnTimeout time.Duration
	// Repeat runs every selected scenario this many times, in as many passes
	// (default 1). A scenario that fails in one pass and passes in another is
	// reported as flaky, and the run fails.
	Repeat int
	// Random shuffles the scenario order with this seed (pass k uses
	// seed+k-1); -1 picks a seed. The seeds are printed so an order that
	// failed can be replayed. 0 keeps the files' order.
	Random int64
	// Report, when set, is a file to write one HTML page to at the end: each
	// scenario's rooms as read back, with the daemon's trace where the
	// scenario turned it on (sim/report).
	Report string
	// Timings, when set, receives a report at the end of the run: the
	// homeserver's start, and per feature and per slowest scenario the wall
	// time split into phases (lease, humans, rooms, seed, handover, daemon,
	// steps, teardown).
	Timings io.Writer
	// Times, when set, is filled at the end of the run with the same
	// measures as Timings, for a program to read (zooid bench's item 1).
	Times *RunTimes

	// testSteps, set by this package's tests, registers extra steps.
	testSteps func(sc *godog.ScenarioContext)
	// testBackend, set by this package's tests, starts the homeserver in
	// place of Homeserver (each time Run starts one).
	testBackend func(ctx context.Context) (backend, error)
}

// errInterrupted fails the scenarios an interrupted run did not finish.
var errInterrupted = errors.New("the run was interrupted")

// runner is what every scenario of a run shares.
type runner struct {
	// ctx is the run's context (Options.Context): every step's context
	// descends from it.
	ctx         context.Context
	backend     backend
	log         *slog.Logger
	out         io.Writer // the run's output, where a failed scenario's log tail goes
	underTest   bool      // Options.TestingT is set: scenarios are subtests
	wait        time.Duration
	turnTimeout time.Duration
	// outcomes collects every scenario's result in every pass; pass is the
	// pass running now (passes run one after another).
	outcomes  *outcomes
	pass      int
	testSteps func(sc *godog.ScenarioContext)
	// reports collects the scenarios' worlds when Options.Report is set.
	reports *reports
	// timings collects the phases of every scenario when Options.Timings is set.
	timings *timings
	// realAgents holds a slot for each scenario running real agents now
	// (realAgentSlots at most).
	realAgents chan struct{}
}

// realAgentSlots is how many scenarios with real agents (tagged @pi or
// @real-agents) run at once, whatever the run's concurrency: each starts node
// or native agent processes costing seconds of CPU, and four at once on two
// cores starve the scripted scenarios beside them of the CPU their
// 10-second waits assume.
const realAgentSlots = 2

// runsRealAgents says a scenario's tags mark it as running real agents.
func runsRealAgents(s *godog.Scenario) bool {
	for _, t := range s.Tags {
		if t.Name == "@pi" || t.Name == "@real-agents" {
			return true
		}
	}
	return false
}

// Run runs the features and returns the godog exit status: 0 when all
// passed, non-zero on failures or a bad option.
func Run(opts Options) int {
	var out io.Writer = os.Stdout
	if opts.Output != nil {
		out = opts.Output
	}
	// godog's formatter and the logs of failed scenarios (logtail.go) write
	// from several goroutines.
	out = &lockedWriter{w: out}
	st, err := prepare(&opts)
	if err != nil {
		fmt.Fprintf(out, "zooid sim: %v\n", err)
		return 2
	}
	ctx := opts.Context
	if ctx == nil {
		ctx = context.Background()
	}
	var tm *timings
	if opts.Timings != nil || opts.Times != nil {
		tm = &timings{start: time.Now()}
	}
	// Building the agents' stand-in (standin.Path) takes the go command a
	// second or more; begun here, it overlaps the homeserver's start rather than
	// holding up the daemons of the first scenarios, which would all wait
	// for it. Scenarios that need it first still wait on its sync.Once.
	built := make(chan struct{})
	go func() { // owner: Run, which waits for it before returning
		defer close(built)
		_, _ = standin.Path() // an error is reported by the scenarios that need it
	}()
	defer func() { <-built }()
	start := func() (backend, error) {
		if opts.testBackend != nil {
			return opts.testBackend(ctx)
		}
		return newBackend(ctx, opts.Homeserver, opts.Concurrency, opts.Paths, func(format string, args ...any) {
			fmt.Fprintf(out, format+"\n", args...)
			tm.note(fmt.Sprintf(format, args...))
		})
	}
	b, err := start()
	if tm != nil {
		tm.backend = time.Since(tm.start)
	}
	if err != nil {
		fmt.Fprintf(out, "zooid sim: %v\n", err)
		return 2
	}
	defer func() {
		// An interrupted run still stops its homeserver (the one of the
		// last pass: renewIfWorn closes the ones before).
		if b == nil {
			return
		}
		if err := b.close(context.WithoutCancel(ctx)); err != nil {
			fmt.Fprintf(out, "zooid sim: %v\n", err)
		}
	}()
	if c, note := concurrencyFor(b, opts.Concurrency); note != "" {
		fmt.Fprintf(out, "zooid sim: %s\n", note)
		opts.Concurrency = c
	}
	if b.kind() != "fake" {
		opts.Tags = andTags(opts.Tags, "~"+FakeOnlyTag)
	}
	if b.kind() == Federation {
		opts.Tags = andTags(opts.Tags, FederationTag)
	} else {
		opts.Tags = andTags(opts.Tags, "~"+FederationTag)
	}
	// A dependency is asked for only by runs holding scenarios that need it:
	// a maintainer's generated feature, run outside the repository, has none.
	if !hasTag(opts.Paths, "@pi", "@real-agents") {
		// nothing to ask for
	} else if err, fail := realAgentPackages(); err != nil {
		if fail {
			fmt.Fprintf(out, "zooid sim: the real agents' scenarios (@pi, @real-agents): %v\n", err)
			return 2
		}
		// One line, and in go test a skipped subtest, so the run's summary
		// counts what was left out.
		fmt.Fprintf(out, "zooid sim: scenarios tagged @pi and @real-agents %v\n", err)
		opts.Tags = andTags(opts.Tags, "~@pi && ~@real-agents")
		if opts.TestingT != nil {
			opts.TestingT.Run("real agents", func(t *testing.T) { t.Skip(err) })
		}
	}
	if !hasTag(opts.Paths, "@landlock") {
		// nothing to ask for
	} else if err, fail := testdeps.Landlock.Missing(); err != nil {
		if fail {
			fmt.Fprintf(out, "zooid sim: the sandbox's scenarios (@landlock): %v\n", err)
			return 2
		}
		fmt.Fprintf(out, "zooid sim: scenarios tagged @landlock %v\n", err)
		opts.Tags = andTags(opts.Tags, "~@landlock")
		if opts.TestingT != nil {
			opts.TestingT.Run("landlock", func(t *testing.T) { t.Skip(err) })
		}
	}
	r := &runner{ctx: ctx, backend: b, log: st.log, out: out, underTest: opts.TestingT != nil, wait: st.wait, turnTimeout: st.turnTimeout, outcomes: newOutcomes(), testSteps: opts.testSteps, timings: tm,
		realAgents: make(chan struct{}, realAgentSlots)}
	if opts.Report != "" {
		r.reports = &reports{}
	}
	if opts.Wait == 0 && b.kind() != "fake" {
		r.wait = 30 * time.Second
	}
	if opts.TurnTimeout == 0 {
		// A turn no step would wait for anyway. It used to be 3s, and under
		// load (the flake hunt: 2 cores, one hogged, 8-12 scenarios at once)
		// agents took up to 3.9s to start and turns scripted to wait 1.5s
		// took over 3s: scenarios failed as "hung" agents at random.
		r.turnTimeout = r.wait
	}
	if opts.Random == -1 {
		opts.Random = newSeed()
	}
	status := 0
	for pass := 1; pass <= opts.Repeat && ctx.Err() == nil; pass++ {
		if pass > 1 {
			t0 := time.Now()
			if b, err = renewIfWorn(ctx, b, pass, out, start); err != nil {
				fmt.Fprintf(out, "zooid sim: pass %d: %v\n", pass, err)
				status = max(status, 2)
				break
			}
			r.backend = b
			if tm != nil {
				tm.backend += time.Since(t0)
			}
		}
		r.pass = pass
		seed := int64(0)
		if opts.Random != 0 {
			seed = opts.Random + int64(pass-1)
		}
		switch {
		case opts.Repeat > 1 && seed != 0:
			fmt.Fprintf(out, "zooid sim: pass %d of %d, order shuffled with seed %d (replay it: --random %d)\n", pass, opts.Repeat, seed, seed)
		case opts.Repeat > 1:
			fmt.Fprintf(out, "zooid sim: pass %d of %d\n", pass, opts.Repeat)
		case seed != 0:
			fmt.Fprintf(out, "zooid sim: order shuffled with seed %d (replay it: zooid sim --random %d, or go test -args -godog.random %d)\n", seed, seed, seed)
		}
		suite := godog.TestSuite{
			Name:                "zooid",
			ScenarioInitializer: r.initScenario,
			Options: &godog.Options{
				Paths: opts.Paths, Tags: opts.Tags, Format: opts.Format,
				Concurrency: opts.Concurrency, Output: out, TestingT: opts.TestingT,
				Strict: true, NoColors: true, Randomize: seed,
				DefaultContext: ctx,
			},
		}
		if st := suite.Run(); st > status {
			status = st
		}
	}
	if flaky, _ := r.outcomes.summary(out, opts.Repeat); flaky > 0 && status == 0 {
		status = 1
	}
	if ctx.Err() != nil {
		fmt.Fprintf(out, "zooid sim: %v\n", errInterrupted)
		status = max(status, 1)
	}
	if opts.Timings != nil {
		tm.write(opts.Timings, 15)
	}
	if opts.Times != nil {
		*opts.Times = tm.times()
	}
	if r.reports != nil {
		if err := r.reports.write(opts.Report); err != nil {
			fmt.Fprintf(out, "zooid sim: %v\n", err)
			return max(status, 2)
		}
		fmt.Fprintf(out, "zooid sim: wrote the report to %s\n", opts.Report)
	}
	return status
}

// renewIfWorn returns b as it is unless the passes so far spent seeded rooms
// of its snapshot (a wearing backend); then it says so, closes b and returns
// a fresh one from start. On error it returns nil: b is closed, or its close
// failed and may have left the old server running, so nothing new is
// started beside it.
func renewIfWorn(ctx context.Context, b backend, pass int, out io.Writer, start func() (backend, error)) (backend, error) {
	w, ok := b.(wearing)
	if !ok {
		return b, nil
	}
	spent, total := w.worn()
	if spent == 0 {
		return b, nil
	}
	fmt.Fprintf(out, "zooid sim: pass %d: the passes before spent %d of the snapshot's %d seeded rooms; starting the %s homeserver again from the snapshot\n",
		pass, spent, total, b.kind())
	if err := b.close(context.WithoutCancel(ctx)); err != nil {
		return nil, fmt.Errorf("restarting the homeserver: %w", err)
	}
	nb, err := start()
	if err != nil {
		return nil, fmt.Errorf("restarting the homeserver: %w", err)
	}
	return nb, nil
}

// interrupted says the run's context has ended; a runner built without one
// (the package's benchmarks and tests) never is.
func (r *runner) interrupted() bool { return r.ctx != nil && r.ctx.Err() != nil }

// newSeed picks a shuffle seed, positive so that it reads as one and
// godog never takes it for "no shuffle".
func newSeed() int64 {
	return time.Now().UnixNano()%1_000_000_000 + 1
}

type settings struct {
	log         *slog.Logger
	wait        time.Duration
	turnTimeout time.Duration
}

// prepare fills defaults in opts.
func prepare(opts *Options) (settings, error) {
	st := settings{log: opts.Logger, wait: opts.Wait, turnTimeout: opts.TurnTimeout}
	if st.log == nil {
		st.log = slog.New(slog.DiscardHandler)
	}
	if st.wait == 0 {
		st.wait = 10 * time.Second
	}
	if opts.Homeserver == "" {
		opts.Homeserver = os.Getenv(HomeserverEnv)
	}
	if opts.Format == "" {
		opts.Format = "progress"
	}
	switch opts.Format {
	case "pretty", "progress", "junit", "cucumber":
	default:
		return st, fmt.Errorf("unknown format %q (want pretty, progress, junit or cucumber)", opts.Format)
	}
	if opts.Concurrency <= 0 {
		opts.Concurrency = 4
	}
	if opts.Repeat <= 0 {
		opts.Repeat = 1
	}
	if opts.Random < -1 {
		return st, fmt.Errorf("random seed %d: want a positive seed, or -1 to pick one", opts.Random)
	}
	if len(opts.Paths) == 0 {
		dir, err := FeaturesDir()
		if err != nil {
			return st, err
		}
		opts.Paths = []string{dir}
	}
	for i, p := range opts.Paths {
		opts.Paths[i] = findPath(p)
	}
	return st, nil
}

// hasTag says whether a feature file under paths carries one of tags (a
// whole word on a line of tags); an unreadable path counts as carrying them,
// so a dependency is never let off by a read error.
func hasTag(paths []string, tags ...string) bool {
	found := false
	for _, root := range paths {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || found {
				return err
			}
			if d.IsDir() || !strings.HasSuffix(path, ".feature") {
				return nil
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, line := range strings.Split(string(b), "\n") {
				line = strings.TrimSpace(line)
				if !strings.HasPrefix(line, "@") {
					continue
				}
				for _, w := range strings.Fields(line) {
					if slices.Contains(tags, w) {
						found = true
						return filepath.SkipAll
					}
				}
			}
			return nil
		})
		if err != nil {
			return true
		}
	}
	return found
}

// findPath resolves a relative feature path that doesn't exist from the
// working directory against the module root, so "features/x.feature" works
// from any directory of the module (go test runs in the package's).
func findPath(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	file, _, _ := strings.Cut(p, ":") // godog allows file.feature:LINE
	if _, err := os.Stat(file); err == nil {
		return p
	}
	if root, err := ModuleRoot(); err == nil {
		if _, err := os.Stat(filepath.Join(root, file)); err == nil {
			return filepath.Join(root, p)
		}
	}
	return p
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// andTags is the expression a scenario matches when it matches both a and b.
// godog's expressions (Behat's) have no parentheses: "," joins alternatives,
// each of them tags joined by "&&". So both hold when some alternative of a
// and some alternative of b do: the alternatives of the result are every
// such pair. (Appending " && b" held only for an a without ",": "@mcp,@routing
// && ~@fake-only" let a @fake-only scenario tagged @mcp through.)
func andTags(a, b string) string {
	if strings.TrimSpace(a) == "" {
		return b
	}
	if strings.TrimSpace(b) == "" {
		return a
	}
	var both []string
	for _, x := range strings.Split(a, ",") {
		for _, y := range strings.Split(b, ",") {
			both = append(both, strings.TrimSpace(x)+" && "+strings.TrimSpace(y))
		}
	}
	return strings.Join(both, ",")
}

// FeaturesDir finds the module's features directory from the working
// directory, walking up to the go.mod of this module.
func FeaturesDir() (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	return filepath.Join(root, "features"), nil
}

// ModuleRoot walks up from the working directory to the directory whose
// go.mod declares this module.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/zooid-dev/zooid\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the zooid module: no go.mod of github.com/zooid-dev/zooid above the working directory; pass feature paths explicitly")
		}
		dir = parent
	}
}

// initScenario gives each scenario its own world and closes it afterwards,
// whether the scenario passed or not.
func (r *runner) initScenario(sc *godog.ScenarioContext) {
	w := newWorld(r)
	register(sc, w)
	if r.testSteps != nil {
		r.testSteps(sc)
	}
	pass := r.pass
	sc.Before(func(ctx context.Context, s *godog.Scenario) (context.Context, error) {
		if r.interrupted() {
			return ctx, errInterrupted
		}
		if runsRealAgents(s) {
			select {
			case r.realAgents <- struct{}{}:
				// Given back when the world closes, whatever the outcome.
				w.closers = append(w.closers, func() error { <-r.realAgents; return nil })
			case <-ctx.Done():
				return ctx, ctx.Err()
			}
		}
		return ctx, nil
	})
	if r.timings != nil {
		sc.Before(func(ctx context.Context, s *godog.Scenario) (context.Context, error) {
			w.timing = r.timings.begin(s)
			return ctx, nil
		})
	}
	sc.After(func(ctx context.Context, s *godog.Scenario, err error) (context.Context, error) {
		if w.timing != nil {
			defer func(begin time.Time, err error) {
				w.timing.add(phaseTeardown, begin)
				w.timing.finish(err != nil)
			}(time.Now(), err)
		}
		if err == nil {
			// A scenario written to survive a fault proves nothing if the
			// fault never fired.
			if ferr := w.faultsUsed(); ferr != nil {
				if r.reports != nil {
					r.reports.add(w.reportRun(ctx, s, ferr))
				}
				_ = w.close()
				r.outcomes.record(pass, s, ferr)
				return ctx, ferr
			}
		}
		if r.reports != nil {
			r.reports.add(w.reportRun(ctx, s, err))
		}
		if err != nil && r.out != nil && !errors.Is(err, errInterrupted) {
			w.logs.report(ctx, r.underTest, r.out, s.Name, err, w.childLogTail())
		}
		cerr := w.close()
		if cerr != nil && err == nil {
			cerr = fmt.Errorf("closing the scenario: %w", cerr)
			r.outcomes.record(pass, s, cerr)
			return ctx, cerr
		}
		r.outcomes.record(pass, s, err)
		return ctx, nil
	})
}
