package main

import (
	"fmt"
	"io"
)

func cmdRun(args []string, stdout, stderr io.Writer) int {
	fmt.Fprintln(stderr, "zooid: not built yet")
	return 1
}
