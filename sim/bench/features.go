package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/zooid-dev/zooid/sim/steps"
)

// featureRatios is item 1: each feature file's time on fakehs against its
// time on Synapse. Both are read from whole passes of the suite, one per
// homeserver, interleaved o.Runs times (default 3): a file's time in a pass
// is its scenario-seconds (each scenario's wall time, less any wait for a
// homeserver slot, added up) over the scenarios that ran on both, which is
// what that file costs the pass CI runs. The medians over the passes are
// divided. Running each file in a pass of its own would start a Synapse
// container (and check its snapshot) per file and run, and count that start
// against files of one or two scenarios; CI pays it once.
func featureRatios(ctx context.Context, o Options, logf func(string, ...any)) ([]Row, error) {
	runs := max(o.Runs, 1)
	if o.Runs == 0 {
		runs = 3
	}
	hss := []string{"fake", "synapse"}
	passes := map[string][]steps.RunTimes{}
	failed := map[string]int{}
	for i := range runs {
		for _, hs := range hss {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			logf("the feature suite on %s, pass %d of %d", hs, i+1, runs)
			var out bytes.Buffer
			var rt steps.RunTimes
			st := steps.Run(steps.Options{Context: ctx, Homeserver: hs, Output: &out, Times: &rt})
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if st != 0 {
				// A pass with a failed scenario has that scenario's time at a
				// wait bound: it is left out, and the rows say how many were.
				failed[hs]++
				logf("the pass on %s failed (status %d); it is left out:\n%s", hs, st, tail(out.String(), 4000))
				continue
			}
			logf("  %s pass: %.1f s (homeserver start %.1f s)", hs, rt.Total.Seconds(), rt.Backend.Seconds())
			passes[hs] = append(passes[hs], rt)
		}
	}
	for _, hs := range hss {
		if len(passes[hs]) == 0 {
			return nil, fmt.Errorf("no pass on %s passed of %d", hs, runs)
		}
	}
	used := func(hs string) string {
		if failed[hs] == 0 {
			return fmt.Sprint(len(passes[hs]))
		}
		return fmt.Sprintf("%d (%d failed, left out)", len(passes[hs]), failed[hs])
	}
	var rows []Row
	// A file's time is over the scenarios that ran on both homeservers:
	// @fake-only ones don't run on Synapse.
	onSynapse := map[string]bool{}
	for _, sc := range passes["synapse"][0].Scenarios {
		onSynapse[sc.Feature+"\x00"+sc.Name] = true
	}
	perFile := func(hs string, both bool) map[string][]float64 {
		m := map[string][]float64{}
		for _, rt := range passes[hs] {
			sum := map[string]float64{}
			for _, sc := range rt.Scenarios {
				if both != onSynapse[sc.Feature+"\x00"+sc.Name] {
					continue
				}
				sum[sc.Feature] += (sc.Wall - sc.Lease).Seconds()
			}
			for f, v := range sum {
				m[f] = append(m[f], v)
			}
		}
		return m
	}
	fake, syn, fakeOnly := perFile("fake", true), perFile("synapse", true), perFile("fake", false)
	var files []string
	for f := range fake {
		files = append(files, f)
	}
	slices.Sort(files)
	for _, f := range files {
		if len(syn[f]) == 0 {
			continue
		}
		fm, sm := median(fake[f]), median(syn[f])
		ratio := sm / fm
		rows = append(rows, Row{Item: 1, Key: "feature/" + filepath.Base(f),
			What:  filepath.Base(f) + ": scenario-seconds on Synapse ÷ on fakehs in whole passes, medians",
			Value: ratio, Unit: "×", From: fmt.Sprintf("%.1f s ÷ %.2f s", sm, fm),
			Goal: "the fake run ≥ 50× faster", Met: met(ratio >= 50)})
	}
	var only []string
	for f, v := range fakeOnly {
		if len(syn[f]) == 0 {
			only = append(only, fmt.Sprintf("%s %.2f s", filepath.Base(f), median(v)))
		}
	}
	slices.Sort(only)
	if len(only) > 0 {
		rows = append(rows, Row{Item: 1, Key: "feature/fake-only", What: "files whose every scenario is @fake-only (no Synapse time), scenario-seconds on fakehs",
			Value: float64(len(only)), Unit: "files", From: strings.Join(only, ", ")})
	}
	wall := func(hs string, backend bool) float64 {
		var v []float64
		for _, rt := range passes[hs] {
			d := rt.Total
			if !backend {
				d -= rt.Backend
			}
			v = append(v, d.Seconds())
		}
		return median(v)
	}
	synWall, fakeWall := wall("synapse", true), wall("fake", true)
	rows = append(rows,
		Row{Item: 1, Key: "pass/synapse", What: fmt.Sprintf("the whole Synapse pass, concurrency 4, the container's start (snapshot warm) included, median of %s", used("synapse")),
			Value: synWall, Unit: "s", From: fmt.Sprintf("container start %.1f s", synWall-wall("synapse", false)),
			Goal: "< 120 s", Met: met(synWall < 120)},
		Row{Item: 1, Key: "pass/fake", What: fmt.Sprintf("the whole fake pass (@fake-only scenarios too), concurrency 4, median of %s", used("fake")),
			Value: fakeWall, Unit: "s"},
		Row{Item: 1, Key: "pass/ratio", What: "the Synapse pass ÷ the fake pass (wall)", Value: synWall / fakeWall, Unit: "×",
			From: fmt.Sprintf("%.1f s ÷ %.1f s", synWall, fakeWall)})
	return rows, nil
}

func median(v []float64) float64 {
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v) == 0 {
		return 0
	}
	return v[len(v)/2]
}

func cpus() int { return runtime.NumCPU() }

func loadavg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "load unknown"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "load unknown"
	}
	return "load " + strings.Join(f[:3], " ")
}

func machine() string {
	model := "cpu unknown"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%s/%s, %d CPUs (%s), %s, before: %s", runtime.GOOS, runtime.GOARCH, cpus(), model, runtime.Version(), loadavg())
}
