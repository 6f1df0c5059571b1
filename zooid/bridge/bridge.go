// Package bridge is `zooid mcp`: the stdio MCP server an agent starts. It connects
// to the agent's private unix socket, says which session binding it belongs to
// (from $ZOOID_BINDING, never argv), and
// then only pipes line-delimited JSON-RPC between stdio and the socket. It holds no
// token and knows nothing of Matrix.
package bridge

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/zooid-dev/zooid/zooid/handshake"
)

// ErrRefused is returned by Dial when the daemon refuses the binding.
var ErrRefused = errors.New("zooid refused the connection")

// Dial connects to socket and performs the binding handshake. On success the
// returned reader holds any bytes already buffered after the handshake.
func Dial(ctx context.Context, socket, binding string) (net.Conn, *bufio.Reader, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socket)
	if err != nil {
		return nil, nil, fmt.Errorf("connecting to %s: %w", socket, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	} else {
		_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	}
	hello, _ := json.Marshal(handshake.Hello{Binding: binding})
	if _, err := conn.Write(append(hello, '\n')); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("sending handshake: %w", err)
	}
	r := bufio.NewReaderSize(conn, 64<<10)
	line, err := r.ReadBytes('\n')
	if err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("reading handshake answer: %w", err)
	}
	var w handshake.Welcome
	if err := json.Unmarshal(line, &w); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("reading handshake answer: %w", err)
	}
	if !w.OK {
		conn.Close()
		msg := w.Error
		if msg == "" {
			msg = "no reason given"
		}
		return nil, nil, fmt.Errorf("%w: %s", ErrRefused, msg)
	}
	_ = conn.SetDeadline(time.Time{})
	return conn, r, nil
}

// Pipe copies stdin to conn and conn's lines to stdout until either side
// closes; it then closes conn and returns. Closing stdin half-closes the socket so
// answers to requests already sent still arrive. Each line goes to stdout in
// one write (copyLines).
func Pipe(conn net.Conn, fromConn *bufio.Reader, stdin io.Reader, stdout io.Writer) error {
	var (
		wg       sync.WaitGroup
		outErr   error
		doneConn = make(chan struct{})
	)
	wg.Add(1)
	go func() { // owner: Pipe; ends when the socket closes or stdout fails
		defer wg.Done()
		defer close(doneConn)
		outErr = copyLines(stdout, fromConn)
	}()
	inErr := make(chan error, 1)
	go func() { // owner: Pipe; a blocked stdin read ends with the process
		_, err := io.Copy(conn, stdin)
		if uc, ok := conn.(*net.UnixConn); ok {
			_ = uc.CloseWrite()
		}
		inErr <- err
	}()
	var err error
	select {
	case <-doneConn:
	case err = <-inErr:
		if err != nil {
			conn.Close()
		}
		<-doneConn
	}
	conn.Close()
	wg.Wait()
	if err != nil {
		return fmt.Errorf("copying stdin to the socket: %w", err)
	}
	if outErr != nil && !errors.Is(outErr, net.ErrClosed) {
		return fmt.Errorf("copying the socket to stdout: %w", outErr)
	}
	return nil
}

// copyLines copies r to w until r ends, each line with its newline in one
// Write, however the socket delivered it. An agent's MCP client then reads a
// message whole from its pipe (whole up to the pipe's capacity, which Main
// raises): codex's (rmcp 1.7) loses a message whose line arrives in two reads
// if its reader is dropped between them (rmcp's AsyncRwTransport::receive is
// not cancel-safe, modelcontextprotocol/rust-sdk#941). A last line without a
// newline is written as it is.
func copyLines(w io.Writer, r *bufio.Reader) error {
	for {
		line, err := r.ReadBytes('\n') // a line longer than r's buffer too
		if len(line) > 0 {
			if _, werr := w.Write(line); werr != nil {
				return werr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// Main is `zooid mcp --socket PATH` with the binding id in $ZOOID_BINDING; it
// returns the exit code.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("zooid mcp", flag.ContinueOnError)
	fs.SetOutput(stderr)
	socket := fs.String("socket", "", "the agent's zooid socket")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	binding := os.Getenv(handshake.BindingEnv)
	if *socket == "" || strings.TrimSpace(binding) == "" || fs.NArg() != 0 {
		fmt.Fprintln(stderr, "zooid mcp: usage: "+handshake.BindingEnv+"=ID zooid mcp --socket PATH (started by the zooid daemon, not by hand)")
		return 2
	}
	conn, r, err := Dial(context.Background(), *socket, binding)
	if err != nil {
		fmt.Fprintf(stderr, "zooid mcp: %v\n", err)
		return 1
	}
	if f, ok := stdout.(*os.File); ok {
		growPipe(f)
	}
	if err := Pipe(conn, r, stdin, stdout); err != nil {
		fmt.Fprintf(stderr, "zooid mcp: %v\n", err)
		return 1
	}
	return 0
}
