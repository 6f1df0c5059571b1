package steps

import (
	"bytes"
	"testing"
)

// TestRunTimesListsEveryScenario: Options.Times, what `zooid bench` reads
// item 1 from, names every scenario of the run with its feature file and a
// wall time within the run's.
func TestRunTimesListsEveryScenario(t *testing.T) {
	var out bytes.Buffer
	var rt RunTimes
	if st := Run(Options{Homeserver: "fake", Paths: []string{"features/mcp_identity.feature"}, Output: &out, Times: &rt}); st != 0 {
		t.Fatalf("status %d:\n%s", st, out.String())
	}
	if len(rt.Scenarios) != 5 {
		t.Fatalf("%d scenarios timed, want the feature's 5: %+v", len(rt.Scenarios), rt.Scenarios)
	}
	names := map[string]bool{}
	for _, sc := range rt.Scenarios {
		if sc.Feature != "features/mcp_identity.feature" || sc.Name == "" || sc.Failed {
			t.Errorf("scenario %+v: want a named, passed scenario of features/mcp_identity.feature", sc)
		}
		if sc.Wall <= 0 || sc.Wall > rt.Total || sc.Lease < 0 || sc.Lease > sc.Wall {
			t.Errorf("scenario %q: wall %v, lease %v in a run of %v", sc.Name, sc.Wall, sc.Lease, rt.Total)
		}
		names[sc.Name] = true
	}
	if len(names) != 5 {
		t.Errorf("%d distinct names, want 5", len(names))
	}
}
