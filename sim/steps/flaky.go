package steps

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/cucumber/godog"
)

// outcomes records how each scenario ended in every pass of a run, so a
// scenario that failed in one pass and passed in another is reported as
// flaky rather than disappearing into a green summary.
type outcomes struct {
	mu    sync.Mutex
	order []string
	by    map[string]*scenarioOutcomes
}

// scenarioOutcomes is one scenario's results across the passes.
type scenarioOutcomes struct {
	where  string // feature file and scenario name, as a person finds it
	passed int
	fails  []string // the error of each failed pass, with the pass number
}

func newOutcomes() *outcomes { return &outcomes{by: map[string]*scenarioOutcomes{}} }

// record notes one scenario's end in pass (1-based).
func (o *outcomes) record(pass int, sc *godog.Scenario, err error) {
	// An outline's examples share a name; their pickle ids of the AST tell
	// them apart and are stable from pass to pass.
	key := sc.Uri + "\x00" + sc.Name + "\x00" + strings.Join(sc.AstNodeIds, ",")
	o.mu.Lock()
	defer o.mu.Unlock()
	s, ok := o.by[key]
	if !ok {
		s = &scenarioOutcomes{where: fmt.Sprintf("%s: %s", relPath(sc.Uri), sc.Name)}
		o.by[key] = s
		o.order = append(o.order, key)
	}
	if err == nil {
		s.passed++
		return
	}
	msg := err.Error()
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	s.fails = append(s.fails, fmt.Sprintf("pass %d: %s", pass, msg))
}

// summary writes the flaky and the always-failing scenarios of a run of
// passes and reports how many of each there were.
func (o *outcomes) summary(out io.Writer, passes int) (flaky, failed int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	keys := append([]string(nil), o.order...)
	sort.Slice(keys, func(i, j int) bool { return o.by[keys[i]].where < o.by[keys[j]].where })
	var fl, fa []*scenarioOutcomes
	for _, k := range keys {
		s := o.by[k]
		switch {
		case len(s.fails) > 0 && s.passed > 0:
			fl = append(fl, s)
		case len(s.fails) > 0:
			fa = append(fa, s)
		}
	}
	if len(fl) > 0 {
		fmt.Fprintf(out, "\nzooid sim: FLAKY: %d scenario(s) failed in some passes and passed in others (that is a failure, not a pass):\n", len(fl))
		for _, s := range fl {
			fmt.Fprintf(out, "  %s — passed %d, failed %d of %d\n", s.where, s.passed, len(s.fails), passes)
			for _, f := range s.fails {
				fmt.Fprintf(out, "      %s\n", f)
			}
		}
	}
	if len(fa) > 0 && passes > 1 {
		fmt.Fprintf(out, "\nzooid sim: %d scenario(s) failed in every pass:\n", len(fa))
		for _, s := range fa {
			fmt.Fprintf(out, "  %s — failed %d of %d\n", s.where, len(s.fails), passes)
			fmt.Fprintf(out, "      %s\n", s.fails[0])
		}
	}
	if len(fl) == 0 && len(fa) == 0 && passes > 1 {
		fmt.Fprintf(out, "\nzooid sim: %d scenario(s) passed in all %d passes; none flaky\n", len(keys), passes)
	}
	return len(fl), len(fa)
}

// relPath shortens a feature path to start at features/ where it can.
func relPath(uri string) string {
	if i := strings.LastIndex(uri, "/features/"); i >= 0 {
		return uri[i+1:]
	}
	return uri
}
