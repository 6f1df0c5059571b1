package standin

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestMain removes the stand-in the tests built, as sim/testbin.Main does
// for the harness's test binaries (which import this package).
func TestMain(m *testing.M) {
	code := m.Run()
	Remove()
	os.Exit(code)
}

// TestChildrenRunAsTheSmallStandIn: in a test binary the program the
// daemon's children run as is cmd/zooid-child, not this binary; it serves
// the bridge's command (a flag it does not know is the bridge's usage error,
// exit 2) and is built without the race detector, whatever this binary's
// build.
func TestChildrenRunAsTheSmallStandIn(t *testing.T) {
	exe, err := Path()
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if exe == self {
		t.Fatalf("children run as the test binary itself (%s)", exe)
	}
	out, err := exec.Command(exe, "mcp", "--no-such-flag").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), "flag provided but not defined: -no-such-flag") {
		t.Fatalf("%s mcp --no-such-flag: %v, %q; want exit 2 and the flag error", exe, err, out)
	}
	info, err := exec.Command("go", "version", "-m", exe).Output()
	if err != nil {
		t.Fatalf("go version -m %s: %v", exe, err)
	}
	if !strings.Contains(string(info), "path\t"+Package) {
		t.Fatalf("%s is not %s:\n%s", exe, Package, info)
	}
	if strings.Contains(string(info), "-race=true") {
		t.Fatalf("stand-in built with -race (the package comment says why not):\n%s", info)
	}
}
