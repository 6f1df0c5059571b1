//go:build linux

package netjail

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zooid-dev/zooid/internal/testdeps"
)

// TestMain lets the test binary stand in for the netjail command.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "netjail" {
		os.Exit(Main(os.Args[2:], os.Stderr))
	}
	os.Exit(m.Run())
}

// listen serves one loopback port that answers each connection with its name.
func listen(t *testing.T, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			fmt.Fprintln(c, name)
			c.Close()
		}
	}()
	return ln.Addr().String()
}

// TestOnlyTheForwardedPortIsReachable: from inside the jail the forwarded
// port answers, and a port the host's loopback serves but the jail does not
// forward is out of reach; so is any address beyond the loopback.
func TestOnlyTheForwardedPortIsReachable(t *testing.T) {
	testdeps.Require(t, testdeps.Root) // a network namespace needs root
	model, other := listen(t, "model"), listen(t, "other")
	mp, op := model[strings.LastIndex(model, ":")+1:], other[strings.LastIndex(other, ":")+1:]
	probe := fmt.Sprintf(`cat </dev/tcp/127.0.0.1/%s; if cat </dev/tcp/127.0.0.1/%s; then echo REACHED-OTHER; fi; `+
		`if (exec 3<>/dev/tcp/192.0.2.1/80) 2>/dev/null; then echo REACHED-OUTSIDE; fi; echo exit-ok`, mp, op)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	c := exec.Command(exe, "netjail", "--forward", model, "--", "bash", "-c", probe)
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		t.Fatalf("jailed probe: %v\n%s", err, errb.String())
	}
	if got, want := out.String(), "model\nexit-ok\n"; got != want {
		t.Fatalf("the jailed probe printed %q, want %q (stderr: %s)", got, want, errb.String())
	}
	// The same probe outside the jail reaches the other port: the jail, not
	// the probe, is what kept it out.
	out.Reset()
	c = exec.Command("bash", "-c", fmt.Sprintf("cat </dev/tcp/127.0.0.1/%s", op))
	c.Stdout = &out
	if err := c.Run(); err != nil || out.String() != "other\n" {
		t.Fatalf("outside the jail the other port answered %q (%v)", out.String(), err)
	}
}

// TestExitStatusPassesThrough: the jail exits with its command's status.
func TestExitStatusPassesThrough(t *testing.T) {
	testdeps.Require(t, testdeps.Root) // a network namespace needs root
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	err = exec.Command(exe, "netjail", "--", "sh", "-c", "exit 7").Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 7 {
		t.Fatalf("exit %v, want status 7", err)
	}
	if code := Main([]string{"--forward", "10.0.0.1:80", "--", "true"}, &bytes.Buffer{}); code != 2 {
		t.Fatalf("a forward beyond the loopback was taken (exit %d)", code)
	}
}

// TestNothingOutlivesTheJail: a grandchild of the jailed command that its
// parent left behind (reparented, ignoring the end of its stdin and
// SIGTERM) dies when the jail is killed.
func TestNothingOutlivesTheJail(t *testing.T) {
	testdeps.Require(t, testdeps.Root) // a network namespace needs root
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The orphan is found by its name, as the host sees it: its pid inside
	// the jail is the namespace's. The script spells the name in two parts,
	// so that only the orphan's command line holds it whole.
	n := strconv.Itoa(os.Getpid())
	marker := "zooid-netjail-orphan-" + n
	script := fmt.Sprintf(`(trap '' TERM; exec -a "zooid-netjail-""orphan-%s" sleep 300) </dev/null >/dev/null 2>&1 & exec sleep 300`, n)
	c := exec.Command(exe, "netjail", "--", "bash", "-c", script)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	orphans := func() []string {
		out, _ := exec.Command("pgrep", "-f", marker).Output()
		return strings.Fields(string(out))
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(orphans()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the jailed command's background child never started")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := c.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = c.Wait()
	deadline = time.Now().Add(10 * time.Second)
	for left := orphans(); len(left) > 0; left = orphans() {
		if time.Now().After(deadline) {
			for _, p := range left {
				if pid, err := strconv.Atoi(p); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
			t.Fatalf("processes %v outlived the killed jail", left)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
