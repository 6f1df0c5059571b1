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
	"time"

	"github.com/zooid-dev/zooid/steps"
)

// featureRatios times each feature file on fakehs and on Synapse, o.Runs
// times each (default 3), and gives the ratio of the medians. It is item 1 of
// issue 15; the Synapse pass's own speed is synpar's part of that issue.
func featureRatios(ctx context.Context, o Options, logf func(string, ...any)) ([]Row, error) {
	dir, err := steps.FeaturesDir()
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.feature"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no feature files in %s: %v", dir, err)
	}
	runs := max(o.Runs, 1)
	if o.Runs == 0 {
		runs = 3
	}
	var rows []Row
	for _, f := range files {
		med := map[string]float64{}
		for _, hs := range []string{"fake", "synapse"} {
			var times []float64
			for i := range runs {
				if ctx.Err() != nil {
					return rows, ctx.Err()
				}
				logf("%s on %s, run %d of %d", filepath.Base(f), hs, i+1, runs)
				start := time.Now()
				var out bytes.Buffer
				if st := steps.Run(steps.Options{Paths: []string{f}, Homeserver: hs, Output: &out}); st != 0 {
					return rows, fmt.Errorf("%s failed on %s (status %d):\n%s", filepath.Base(f), hs, st, tail(out.String(), 4000))
				}
				times = append(times, time.Since(start).Seconds())
			}
			slices.Sort(times)
			med[hs] = times[len(times)/2]
		}
		ratio := med["synapse"] / med["fake"]
		rows = append(rows, Row{Item: 1, Key: "feature/" + filepath.Base(f), What: filepath.Base(f) + ": Synapse ÷ fakehs, medians of " + fmt.Sprint(runs),
			Value: ratio, Unit: "×", From: fmt.Sprintf("%.1f s ÷ %.2f s", med["synapse"], med["fake"]),
			Goal: "the fake run ≥ 50× faster", Met: met(ratio >= 50)})
	}
	return rows, nil
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
