package steps

import (
	"cmp"
	"flag"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
)

var (
	tagsFlag    = flag.String("godog.tags", "", "run only scenarios matching this tag expression")
	formatFlag  = flag.String("godog.format", "progress", "godog formatter: pretty, progress, junit or cucumber")
	concFlag    = flag.Int("godog.concurrency", 4, "scenarios run at once")
	pathsFlag   = flag.String("godog.paths", "", "comma-separated feature files or directories (default: features/)")
	timingsFlag = flag.String("godog.timings", "", "write where the run's time went (per feature and for the slowest scenarios, split into phases) to this file, or - for stdout (shown with -v)")
)

// TestFeatures runs every feature; each scenario is a subtest, so
// `go test ./sim/steps -run 'TestFeatures/Routing'` picks scenarios by name.
func TestFeatures(t *testing.T) { runFeatures(t, "") }

// TestFeaturesDegraded runs every feature on fakehs with the degraded
// profile (fakehs.Degraded), whatever $ZOOID_TEST_HOMESERVER says: the tools
// must read right on a homeserver that does less.
func TestFeaturesDegraded(t *testing.T) { runFeatures(t, "fake-degraded") }

func runFeatures(t *testing.T, homeserver string) {
	opts := Options{
		Homeserver: homeserver,
		Tags:       *tagsFlag, Format: *formatFlag, Concurrency: *concFlag,
		TestingT: t, Output: os.Stdout,
	}
	if path := cmp.Or(*timingsFlag, os.Getenv("ZOOID_TEST_TIMINGS")); path != "" {
		opts.Timings = os.Stdout
		if path != "-" {
			// go test shows a passing package's output only with -v; a file
			// keeps the report either way.
			f, err := os.Create(path)
			if err != nil {
				t.Fatalf("timings file: %v", err)
			}
			defer f.Close()
			opts.Timings = io.MultiWriter(f, os.Stdout)
		}
	}
	if *pathsFlag != "" {
		opts.Paths = strings.Split(*pathsFlag, ",")
	}
	if os.Getenv("ZOOID_TEST_LOG") != "" {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if status := Run(opts); status != 0 {
		t.Fatalf("features failed (godog status %d)", status)
	}
}
