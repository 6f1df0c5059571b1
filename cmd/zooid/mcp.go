package main

import (
	"io"
	"os"

	"github.com/zooid-dev/zooid/zooid/bridge"
)

// cmdMCP is the stdio MCP bridge an agent starts: zooid mcp --socket PATH, with the binding id in
// $ZOOID_BINDING (never argv, which any same-uid process can read).
func cmdMCP(args []string, stdout, stderr io.Writer) int {
	return bridge.Main(args, os.Stdin, stdout, stderr)
}
