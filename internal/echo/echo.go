// Package echo is the far end of `zooid bench`'s cross-process floor: a
// process that connects to a unix socket and writes every line it reads
// there back, unchanged, until the other end closes. It is the harness's
// `zooid-sim echo` (internal; not a daemon command).
package echo

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
)

// Main runs `echo --socket PATH` and returns the exit code: 0 once the
// other end closed the connection.
func Main(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("echo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sock := fs.String("socket", "", "unix socket to connect to")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *sock == "" {
		fmt.Fprintln(stderr, "echo: --socket is required")
		return 2
	}
	if err := Serve(*sock); err != nil {
		fmt.Fprintf(stderr, "echo: %v\n", err)
		return 1
	}
	return 0
}

// Serve connects to the unix socket at path and echoes each line read there
// until the connection ends.
func Serve(path string) error {
	c, err := net.Dial("unix", path)
	if err != nil {
		return fmt.Errorf("connecting to %s: %w", path, err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading: %w", err)
		}
		if _, err := c.Write(line); err != nil {
			return fmt.Errorf("writing: %w", err)
		}
	}
}
