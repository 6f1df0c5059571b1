// Package testsummary reads `go test -json` and prints what a person reading
// a test run needs: each package's result line as it finishes, the whole
// output of every failed test, and at the end a count and every skipped test
// with the reason it gave — or one line saying nothing was skipped. Under
// internal/testdeps' rule a skip is a dependency the machine lacks, so a run
// that should have had them all (CI) can fail on any skip.
package testsummary

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json), build events included.
type event struct {
	Action     string
	Package    string
	ImportPath string
	Test       string
	Output     string
	Elapsed    float64
}

// Skip is a test that was skipped, with the reason it logged.
type Skip struct {
	Package, Test, Reason string
}

// Summary counts a run's tests by result.
type Summary struct {
	Passed, Failed int
	Skipped        []Skip
	// PackagesFailed counts packages that failed, built or not.
	PackagesFailed int
}

// OK says whether the run failed nothing.
func (s Summary) OK() bool { return s.Failed == 0 && s.PackagesFailed == 0 }

type key struct{ pkg, test string }

// Read copies the run on in to out as described in the package comment and
// returns its summary. Lines that are not JSON (a toolchain message, a build
// error printed outside the stream) are copied as they are.
func Read(in io.Reader, out io.Writer) (Summary, error) {
	var s Summary
	buffered := map[key][]string{}
	sc := bufio.NewScanner(in)
	// A test's output line can be long (a dumped event, a stack).
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		var ev event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &ev) != nil {
			fmt.Fprintf(out, "%s\n", line)
			continue
		}
		switch ev.Action {
		case "build-output":
			fmt.Fprint(out, ev.Output)
			continue
		case "build-fail":
			s.PackagesFailed++
			continue
		}
		if ev.Test == "" {
			switch ev.Action {
			case "output":
				if ev.Output != "PASS\n" {
					fmt.Fprint(out, ev.Output)
				}
			case "fail":
				s.PackagesFailed++
			}
			continue
		}
		k := key{ev.Package, ev.Test}
		switch ev.Action {
		case "output":
			buffered[k] = append(buffered[k], ev.Output)
		case "pass":
			s.Passed++
			delete(buffered, k)
		case "fail":
			s.Failed++
			fmt.Fprint(out, strings.Join(buffered[k], ""))
			delete(buffered, k)
		case "skip":
			s.Skipped = append(s.Skipped, Skip{Package: ev.Package, Test: ev.Test, Reason: reason(buffered[k])})
			delete(buffered, k)
		}
	}
	if err := sc.Err(); err != nil {
		return s, fmt.Errorf("reading go test -json: %w", err)
	}
	// Output of a test that never ended (the binary died or timed out)
	// explains the failure the package line reports.
	var open []key
	for k := range buffered {
		open = append(open, k)
	}
	sort.Slice(open, func(i, j int) bool { return open[i].pkg+open[i].test < open[j].pkg+open[j].test })
	for _, k := range open {
		fmt.Fprintf(out, "--- output of %s %s, which did not finish:\n%s", k.pkg, k.test, strings.Join(buffered[k], ""))
	}
	return s, nil
}

// reason is the text a skipped test logged, without go test's own framing.
func reason(lines []string) string {
	var b []string
	for _, l := range lines {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "=== ") || strings.HasPrefix(t, "--- SKIP") {
			continue
		}
		// A logged line reads "file_test.go:12: text"; the text is the reason.
		if i := strings.Index(t, ".go:"); i > 0 && !strings.Contains(t[:i], " ") {
			if j := strings.Index(t[i+4:], ": "); j >= 0 {
				t = t[i+4+j+2:]
			}
		}
		b = append(b, t)
	}
	if len(b) == 0 {
		return "(no reason given)"
	}
	return strings.Join(b, " ")
}

// Print writes the end of the run: the counts, then each skip with its
// reason, or a line saying that no test was skipped.
func (s Summary) Print(w io.Writer) {
	fmt.Fprintf(w, "\ntests: %d passed, %d failed, %d skipped", s.Passed, s.Failed, len(s.Skipped))
	if s.PackagesFailed > 0 {
		fmt.Fprintf(w, "; %d packages failed", s.PackagesFailed)
	}
	fmt.Fprintln(w)
	if len(s.Skipped) == 0 {
		fmt.Fprintln(w, "no test was skipped")
		return
	}
	fmt.Fprintln(w, "skipped, each for a dependency this machine lacks (internal/testdeps):")
	for _, k := range s.Skipped {
		fmt.Fprintf(w, "  %s %s: %s\n", strings.TrimPrefix(k.Package, "github.com/zooid-dev/zooid/"), k.Test, k.Reason)
	}
}
