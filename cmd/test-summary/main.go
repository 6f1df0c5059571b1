// Command test-summary reads `go test -json` on standard input and prints
// each package's result, every failed test's output and, at the end, the
// skipped tests with their reasons or a line saying none was skipped
// (internal/testsummary). It exits 1 when a test or package failed, and with
// -fail-on-skip also when one was skipped: scripts/test.sh passes it under
// CI=true, where every dependency is installed.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/zooid-dev/zooid/internal/testsummary"
)

func main() {
	failOnSkip := flag.Bool("fail-on-skip", false, "exit 1 when any test was skipped")
	flag.Parse()
	s, err := testsummary.Read(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintf(os.Stderr, "test-summary: %v\n", err)
		os.Exit(2)
	}
	s.Print(os.Stdout)
	switch {
	case !s.OK():
		os.Exit(1)
	case *failOnSkip && len(s.Skipped) > 0:
		fmt.Println("a skipped test is a dependency this run should have had: failing")
		os.Exit(1)
	}
}
