package bridge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zooid-dev/zooid/zooid/handshake"
)

func TestMainUsageAndUnreachableSocket(t *testing.T) {
	t.Setenv(handshake.BindingEnv, "")
	var out, errOut strings.Builder
	if code := Main([]string{"--socket", "/x"}, strings.NewReader(""), &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "usage") {
		t.Fatalf("missing binding: %d %q", code, errOut.String())
	}
	// The binding is taken from the environment only: an argv flag for it is
	// refused, so nothing puts it into /proc/<pid>/cmdline.
	errOut.Reset()
	if code := Main([]string{"--socket", "/x", "--binding", "b"}, strings.NewReader(""), &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "-binding") {
		t.Fatalf("binding on argv: %d %q", code, errOut.String())
	}
	errOut.Reset()
	t.Setenv(handshake.BindingEnv, "b")
	dir := t.TempDir()
	missing := filepath.Join(dir, "none.sock")
	if code := Main([]string{"--socket", missing}, strings.NewReader(""), &out, &errOut); code != 1 || !strings.Contains(errOut.String(), missing) {
		t.Fatalf("missing socket: %d %q", code, errOut.String())
	}
	if out.Len() != 0 {
		t.Fatalf("stdout written: %q", out.String())
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatal("bridge created the socket path")
	}
}
