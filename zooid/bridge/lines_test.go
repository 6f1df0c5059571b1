package bridge

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"testing/iotest"
)

// writes keeps each Write it is given, as the agent's pipe would see them.
type writes struct{ got []string }

func (w *writes) Write(p []byte) (int, error) {
	w.got = append(w.got, string(p))
	return len(p), nil
}

// The socket may hand the bridge a line in any number of pieces (here a byte
// at a time, through a buffer smaller than the long line); the agent is given
// each line in one write, so its client never reads half a message.
func TestEachLineReachesStdoutInOneWrite(t *testing.T) {
	long := `{"jsonrpc":"2.0","id":1,"result":{"tools":[` + strings.Repeat(`{"name":"t"},`, 20) + `{}]}}`
	in := `{"jsonrpc":"2.0","id":0,"result":{}}` + "\n" + long + "\n" + `{"partial":`
	fromConn := bufio.NewReaderSize(iotest.OneByteReader(strings.NewReader(in)), 16)
	conn, peer := net.Pipe()
	t.Cleanup(func() { peer.Close() })

	var out writes
	if err := Pipe(conn, fromConn, strings.NewReader(""), &out); err != nil {
		t.Fatalf("Pipe: %v", err)
	}
	want := []string{`{"jsonrpc":"2.0","id":0,"result":{}}` + "\n", long + "\n", `{"partial":`}
	if len(out.got) != len(want) {
		t.Fatalf("%d writes to stdout, want %d (one a line): %q", len(out.got), len(want), out.got)
	}
	for i := range want {
		if out.got[i] != want[i] {
			t.Fatalf("write %d = %q, want %q", i, out.got[i], want[i])
		}
	}
}
