package bridge

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// A page of tool results longer than a pipe's default 64 KiB still reaches
// the agent in one piece: the bridge raises its stdout pipe to 1 MiB.
func TestStdoutPipeIsRaisedTo1MiB(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	before, err := unix.FcntlInt(r.Fd(), unix.F_GETPIPE_SZ, 0)
	if err != nil {
		t.Fatal(err)
	}
	if before >= pipeSize {
		t.Fatalf("a new pipe already holds %d bytes: the test shows nothing", before)
	}
	growPipe(w)
	if got, err := unix.FcntlInt(r.Fd(), unix.F_GETPIPE_SZ, 0); err != nil || got != pipeSize {
		t.Fatalf("pipe capacity %d (%v), want %d", got, err, pipeSize)
	}

	// Not a pipe: left alone, no error.
	f, err := os.CreateTemp(t.TempDir(), "out")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	growPipe(f)
}
