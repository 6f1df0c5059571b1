package bench

import (
	"fmt"
	"strings"
	"testing"

	"github.com/zooid-dev/zooid/fakehs"
	"github.com/zooid-dev/zooid/sim/steps"
	"github.com/zooid-dev/zooid/sim/testbin"
)

// TestMain lets the test binary stand in for zooid-sim where a benchmark
// starts it (`<this binary> echo …`); the steps benchmarks' agents and
// bridges run as the stand-in sim/standin builds, removed at the end.
func TestMain(m *testing.M) { testbin.Main(m) }

func BenchmarkCPU(b *testing.B)                { BenchCPU(b) }
func BenchmarkEchoUnixSocket(b *testing.B)     { BenchEchoUnixSocket(b) }
func BenchmarkEchoViaBridge(b *testing.B)      { BenchEchoViaBridge(b) }
func BenchmarkEchoCrossProcess(b *testing.B)   { BenchEchoCrossProcess(b) }
func BenchmarkToolCall(b *testing.B)           { steps.BenchToolCall(b) }
func BenchmarkToolCallFromBridge(b *testing.B) { steps.BenchToolCallFromBridge(b) }

func BenchmarkToolCallCanned(b *testing.B)       { BenchToolCallCanned(b) }
func BenchmarkToolCallNoHomeserver(b *testing.B) { BenchToolCallNoHomeserver(b) }

func BenchmarkRoomInfoDirect(b *testing.B) {
	r, err := SeedRoom(100, fakehs.Profile{})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	BenchRoomInfoDirect(b, r)
}

// BenchmarkPages: the second page of each history tool in rooms of 1k, 10k
// and 100k events; ns/op must stay flat and requests/op constant.
func BenchmarkPages(b *testing.B) {
	for _, size := range []int{1_000, 10_000, 100_000} {
		r, err := SeedRoom(size, fakehs.Profile{})
		if err != nil {
			b.Fatal(err)
		}
		for _, tool := range Tools {
			b.Run(fmt.Sprintf("%s/events=%d", tool.Name, size), func(b *testing.B) { BenchPage(b, r, tool) })
		}
		r.Close()
	}
}

func BenchmarkScenarioSetup(b *testing.B) { steps.BenchScenarioSetup(b, 0) }

func TestRegressions(t *testing.T) {
	tab := Table{Rows: []Row{
		{Key: "a", Value: 10, Check: true},
		{Key: "b", Value: 4.1, Check: true},
		{Key: "c", Value: 100}, // not checked
		{Key: "d", Value: 1, Check: true},
	}}
	base := Baseline{"a": 5, "b": 2, "e": 3}
	got := strings.Join(tab.Regressions(base, 2), "\n")
	want := "b: 4.10, baseline 2 (more than 2×)\nd: checked but not in the baseline (add it: --write-baseline, or by hand)\ne: in the baseline but not measured"
	if got != want {
		t.Fatalf("regressions:\n%s\nwant:\n%s", got, want)
	}
	if b := tab.Baseline(); len(b) != 3 || b["c"] != 0 || b["d"] != 1 {
		t.Fatalf("baseline of the checked rows: %v", b)
	}
}

func TestEndpointNamesWhatARoomIsAskedFor(t *testing.T) {
	for path, want := range map[string]string{
		"/_matrix/client/v3/rooms/!r:x/messages":                 "messages",
		"/_matrix/client/v3/rooms/!r:x/state/m.room.member/@a:x": "state",
		"/_matrix/client/v1/rooms/!r:x/relations/$e/m.thread":    "relations",
		"/_matrix/client/v1/rooms/!r:x/threads":                  "threads",
		"/_matrix/client/v3/joined_rooms":                        "joined_rooms",
	} {
		if got := endpoint(path); got != want {
			t.Errorf("endpoint(%q) = %q, want %q", path, got, want)
		}
	}
}

func TestEndpointRowNamesTheEndpointThatGrew(t *testing.T) {
	extra := map[int]map[string]float64{
		1000:  {"ns/op:messages": 40e6, "ns/op:state": 2e6, "requests/op": 3},
		10000: {"ns/op:messages": 380e6, "ns/op:state": 2e6, "requests/op": 3},
	}
	r := endpointRow("synapse/", "Synapse: ", "zooid_get_history", []int{1000, 10000}, extra)
	if r == nil || r.Key != "synapse/endpoints/zooid_get_history" || r.Value != 9.5 ||
		!strings.HasSuffix(r.What, "the one that grew most: messages") || r.From != "messages 40.00 ms → 380.00 ms; state 2.00 ms → 2.00 ms" {
		t.Fatalf("row: %+v", r)
	}
	if endpointRow("", "", "zooid_get_history", []int{1000, 10000}, map[int]map[string]float64{10000: {"requests/op": 3}}) != nil {
		t.Fatal("a row without timed endpoints")
	}
}
