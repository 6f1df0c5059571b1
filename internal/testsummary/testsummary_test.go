package testsummary

import (
	"strings"
	"testing"
)

// run is a shortened `go test -json` of two packages: one passes with a
// skipped test and a skipped subtest, one fails a subtest; a third fails to build.
const run = `{"Action":"start","Package":"example/a"}
{"Action":"run","Package":"example/a","Test":"TestOK"}
{"Action":"output","Package":"example/a","Test":"TestOK","Output":"=== RUN   TestOK\n"}
{"Action":"pass","Package":"example/a","Test":"TestOK","Elapsed":0}
{"Action":"run","Package":"example/a","Test":"TestNeedsRoot"}
{"Action":"output","Package":"example/a","Test":"TestNeedsRoot","Output":"=== RUN   TestNeedsRoot\n"}
{"Action":"output","Package":"example/a","Test":"TestNeedsRoot","Output":"    users_test.go:41: left out: needs root, which is missing here\n"}
{"Action":"output","Package":"example/a","Test":"TestNeedsRoot","Output":"--- SKIP: TestNeedsRoot (0.00s)\n"}
{"Action":"skip","Package":"example/a","Test":"TestNeedsRoot","Elapsed":0}
{"Action":"output","Package":"example/a","Test":"TestFeatures/real_agents","Output":"    run.go:9: left out: needs node\n"}
{"Action":"skip","Package":"example/a","Test":"TestFeatures/real_agents","Elapsed":0}
{"Action":"output","Package":"example/a","Output":"PASS\n"}
{"Action":"output","Package":"example/a","Output":"ok  \texample/a\t0.1s\n"}
{"Action":"pass","Package":"example/a","Elapsed":0.1}
{"Action":"output","Package":"example/b","Test":"TestX/sub","Output":"    x_test.go:7: want 2, got 3\n"}
{"Action":"output","Package":"example/b","Test":"TestX/sub","Output":"--- FAIL: TestX/sub (0.00s)\n"}
{"Action":"fail","Package":"example/b","Test":"TestX/sub","Elapsed":0}
{"Action":"output","Package":"example/b","Test":"TestX","Output":"--- FAIL: TestX (0.00s)\n"}
{"Action":"fail","Package":"example/b","Test":"TestX","Elapsed":0}
{"Action":"output","Package":"example/b","Output":"FAIL\texample/b\t0.2s\n"}
{"Action":"fail","Package":"example/b","Elapsed":0.2}
{"ImportPath":"example/c","Action":"build-output","Output":"c.go:3:1: syntax error\n"}
{"ImportPath":"example/c","Action":"build-fail"}
go: a line that is not JSON
`

func TestReadAndPrint(t *testing.T) {
	var out strings.Builder
	s, err := Read(strings.NewReader(run), &out)
	if err != nil {
		t.Fatal(err)
	}
	if s.Passed != 1 || s.Failed != 2 || len(s.Skipped) != 2 || s.PackagesFailed != 2 || s.OK() {
		t.Fatalf("summary %+v: want 1 passed, 2 failed, 2 skipped, 2 packages failed", s)
	}
	want := "ok  \texample/a\t0.1s\n" +
		"    x_test.go:7: want 2, got 3\n--- FAIL: TestX/sub (0.00s)\n" +
		"--- FAIL: TestX (0.00s)\n" +
		"FAIL\texample/b\t0.2s\n" +
		"c.go:3:1: syntax error\n" +
		"go: a line that is not JSON\n"
	if out.String() != want {
		t.Fatalf("printed:\n%s\nwant:\n%s", out.String(), want)
	}
	out.Reset()
	s.Print(&out)
	wantEnd := "\ntests: 1 passed, 2 failed, 2 skipped; 2 packages failed\n" +
		"skipped, each for a dependency this machine lacks (internal/testdeps):\n" +
		"  example/a TestNeedsRoot: left out: needs root, which is missing here\n" +
		"  example/a TestFeatures/real_agents: left out: needs node\n"
	if out.String() != wantEnd {
		t.Fatalf("end:\n%s\nwant:\n%s", out.String(), wantEnd)
	}
}

func TestNothingSkipped(t *testing.T) {
	var out strings.Builder
	s, err := Read(strings.NewReader(`{"Action":"pass","Package":"p","Test":"TestA"}`+"\n"), &out)
	if err != nil {
		t.Fatal(err)
	}
	out.Reset()
	s.Print(&out)
	if want := "\ntests: 1 passed, 0 failed, 0 skipped\nno test was skipped\n"; out.String() != want || !s.OK() {
		t.Fatalf("end %q (ok %v), want %q", out.String(), s.OK(), want)
	}
}

// A test binary that dies mid-test leaves output no pass or fail claimed:
// it is printed, since it explains the package's failure.
func TestUnfinishedTestOutputIsShown(t *testing.T) {
	in := `{"Action":"output","Package":"p","Test":"TestHang","Output":"panic: test timed out after 20m0s\n"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t1200.0s\n"}
{"Action":"fail","Package":"p","Elapsed":1200}
`
	var out strings.Builder
	s, err := Read(strings.NewReader(in), &out)
	if err != nil {
		t.Fatal(err)
	}
	if s.OK() || !strings.Contains(out.String(), "--- output of p TestHang, which did not finish:\npanic: test timed out after 20m0s\n") {
		t.Fatalf("ok %v, printed:\n%s", s.OK(), out.String())
	}
}
