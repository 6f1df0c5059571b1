package main

import (
	"io"
	"os"

	"github.com/zooid-dev/zooid/zooid/demoagent"
)

// cmdDemoAgent runs the demo agent on stdin and stdout, as the daemon starts it
// for an agent on the demo preset.
func cmdDemoAgent(args []string, stdout, stderr io.Writer) int {
	return demoagent.Main(args, os.Stdin, stdout, stderr)
}
