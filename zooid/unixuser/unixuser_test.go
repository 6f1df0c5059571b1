package unixuser

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/zooid-dev/zooid/internal/testdeps"
)

func TestResolve(t *testing.T) {
	u, err := Resolve("4000000:4000001")
	if err != nil {
		t.Fatal(err)
	}
	if u.UID != 4000000 || u.GID != 4000001 || u.Name != "" || len(u.Groups) != 0 || u.String() != "uid 4000000" {
		t.Fatalf("Resolve(4000000:4000001) = %+v", u)
	}
	if _, err := Resolve("4000000"); err == nil || !strings.Contains(err.Error(), "give its group too, as 4000000:GID") {
		t.Fatalf("a uid without passwd entry or group: err = %v", err)
	}
	root, err := Resolve("root")
	if err != nil || root.UID != 0 || root.Name != "root" || root.String() != "root (uid 0)" {
		t.Fatalf("Resolve(root) = %+v, %v", root, err)
	}
	if r, err := Resolve("0:4000002"); err != nil || r.UID != 0 || r.GID != 4000002 || r.Name != "root" || len(r.Groups) != 0 {
		t.Fatalf("Resolve(0:4000002) = %+v, %v; want root's uid with exactly gid 4000002 and no groups", r, err)
	}
	if _, err := Resolve("zooid-no-such-user"); err == nil || !strings.Contains(err.Error(), `no user named "zooid-no-such-user"`) {
		t.Fatalf("unknown user: err = %v", err)
	}
}

func TestMissingCapabilitiesAreNamed(t *testing.T) {
	all := uint64(1)<<0 | 1<<5 | 1<<6 | 1<<7 // CHOWN, KILL, SETGID, SETUID
	if err := missing(all, 1000); err != nil {
		t.Fatalf("all four capabilities: %v", err)
	}
	err := missing(1<<0|1<<5, 1000)
	want := "the daemon (uid 1000) lacks CAP_SETUID, CAP_SETGID, so it can't start an agent as another user: run zooid as root, or grant it those capabilities (systemd: AmbientCapabilities=CAP_SETUID CAP_SETGID)"
	if err == nil || err.Error() != want {
		t.Fatalf("missing = %v, want %s", err, want)
	}
}

// TestProbesJudgeAsTheUserAndLeaveTheDaemonAlone: a probe as another uid is
// refused a 0600 file of root's and may read a 0644 one; meanwhile and after,
// every other goroutine of the process still reads the 0600 file, so no
// thread was left with the probe's identity. Needs root (CAP_SETUID), by
// internal/testdeps' rule.
func TestProbesJudgeAsTheUserAndLeaveTheDaemonAlone(t *testing.T) {
	testdeps.Require(t, testdeps.Root)
	// Not t.TempDir: its parent is private to root, and the probe must reach the files.
	dir, err := os.MkdirTemp("/tmp", "zprobe")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	private, public := filepath.Join(dir, "private"), filepath.Join(dir, "public")
	if err := os.WriteFile(private, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(public, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(public, 0o644); err != nil {
		t.Fatal(err)
	}
	u := User{UID: 4000000, GID: 4000000}
	var wg sync.WaitGroup
	failures := make(chan string, 1000)
	for range 8 {
		wg.Go(func() {
			for range 50 {
				if ok, err := CanOpen(u, private); err != nil || ok {
					failures <- "the probe opened root's 0600 file, or failed: " + errString(err)
				}
				if ok, err := CanOpen(u, public); err != nil || !ok {
					failures <- "the probe could not open a 0644 file: " + errString(err)
				}
				if f, err := os.Open(private); err != nil {
					failures <- "the daemon itself, between probes, could not open its own file: " + err.Error()
				} else {
					f.Close()
				}
				runtime.Gosched()
			}
		})
	}
	wg.Wait()
	close(failures)
	for f := range failures {
		t.Fatal(f)
	}
}

func errString(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}
