package cli

import (
	"io"
	"os"

	"github.com/zooid-dev/zooid/fakeagent"
)

// cmdFakeAgent runs the scripted ACP agent over this process's stdio; the
// test controller at --control decides what it does.
func cmdFakeAgent(args []string, stdout, stderr io.Writer) int {
	return fakeagent.Main(args, os.Stdin, stdout, stderr)
}
