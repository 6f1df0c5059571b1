package replay_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zooid-dev/zooid/sim/replay"
	"github.com/zooid-dev/zooid/sim/steps"
	"github.com/zooid-dev/zooid/zooid/recording"
)

// TestGeneratedFeaturesPass: a feature `zooid replay --feature` writes from a
// recording passes, several times over, on the code that made the
// recording — every traced recording in scenarios/, among them one killed
// while an agent was mid-turn, where the kill must wait for the turn to
// start as the recorded one did.
func TestGeneratedFeaturesPass(t *testing.T) {
	if testing.Short() {
		t.Skip("plays every traced recording through the steps runner")
	}
	recs, err := filepath.Glob("../../scenarios/*-traced.json")
	if err != nil || len(recs) == 0 {
		t.Fatalf("no traced recordings in scenarios/: %v", err)
	}
	dir := t.TempDir()
	var paths []string
	for _, path := range recs {
		rec, err := recording.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := replay.Feature(rec, replay.FeatureRef(path))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if strings.Contains(f, `played up to "`) && !strings.Contains(f, "has no label") {
			for _, line := range strings.Split(f, "\n") {
				if i := strings.Index(line, `played up to "`); i >= 0 && line[i+len(`played up to "`)] >= '0' && line[i+len(`played up to "`)] <= '9' {
					t.Errorf("%s: plays up to an index without saying the event has no label: %s", path, line)
				}
			}
		}
		out := filepath.Join(dir, strings.TrimSuffix(filepath.Base(path), ".json")+".feature")
		if err := os.WriteFile(out, []byte(f), 0o600); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, out)
	}
	var log bytes.Buffer
	if status := steps.Run(steps.Options{Paths: paths, Repeat: 3, Output: &log, TestingT: t}); status != 0 {
		t.Fatalf("generated features failed (status %d):\n%s", status, log.String())
	}
}

// A shrunk recording often ends with the event its restart follows: its
// feature must not end with a step playing the rest, for there is none, and
// the step fails ("the recording is already played past event 0").
func TestGeneratedFeatureEndsWithTheRecording(t *testing.T) {
	rec, err := recording.Load("../../scenarios/ops-midturn-traced.json")
	if err != nil {
		t.Fatal(err)
	}
	rec.Events = rec.Events[:1]
	f, err := replay.Feature(rec, "ends-at-restart.json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f, "the daemon is killed and started again") || strings.Contains(f, "is played\n") {
		t.Fatalf("want the kill as the last play step, and no play after it:\n%s", f)
	}
}
