package mcpserver

import (
	"net"
	"strings"
	"testing"
)

// oneWrites is a connection that keeps each Write it is given.
type oneWrites struct {
	net.Conn // nil: only Write is called
	got      []string
}

func (c *oneWrites) Write(p []byte) (int, error) {
	c.got = append(c.got, string(p))
	return len(p), nil
}

// A message larger than any buffer on the way (a tools/list answer is about
// 10 KiB) leaves with its newline in the same write: a newline sent on its
// own is what let codex's client lose a tools/list answer (writeLine).
func TestAMessageAndItsNewlineLeaveInOneWrite(t *testing.T) {
	nc := &oneWrites{}
	c := &conn{nc: nc}
	text := strings.Repeat("x", 64<<10)
	if err := c.writeLine(map[string]string{"text": text}); err != nil {
		t.Fatal(err)
	}
	want := `{"text":"` + text + `"}` + "\n"
	if len(nc.got) != 1 || nc.got[0] != want {
		t.Fatalf("%d writes (sizes %v), want one of %d bytes ending in a newline", len(nc.got), sizes(nc.got), len(want))
	}
}

func sizes(writes []string) []int {
	out := make([]int, len(writes))
	for i, w := range writes {
		out[i] = len(w)
	}
	return out
}
