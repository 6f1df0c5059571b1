//go:build linux

package sandbox_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zooid-dev/zooid/fakeagent"
	"github.com/zooid-dev/zooid/internal/childproc"
	"github.com/zooid-dev/zooid/internal/testdeps"
	"github.com/zooid-dev/zooid/zooid/sandbox"
)

// TestMain makes the test binary the wrapper (`<test> sandbox -- …`, as
// the daemon runs `zooid sandbox`) and a prober (`<test> probe TARGET…`:
// fakeagent.Try on each, the results as JSON on stdout; `<test> tcp-probe
// ADDR…`: a TCP connect to each).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "sandbox":
			os.Exit(sandbox.Main(os.Args[2:], os.Stderr))
		case "tcp-probe":
			// Dial each address: "N ok", or "N refused" (EACCES).
			for i, a := range os.Args[2:] {
				c, err := net.DialTimeout("tcp", a, 5*time.Second)
				switch {
				case err == nil:
					c.Close()
					fmt.Printf("%d ok\n", i)
				case errors.Is(err, syscall.EACCES):
					fmt.Printf("%d refused\n", i)
				default:
					fmt.Printf("%d %v\n", i, err)
				}
			}
			os.Exit(0)
		case "probe":
			var out []fakeagent.ReachResult
			for _, target := range os.Args[2:] {
				out = append(out, fakeagent.Try(target))
			}
			_ = json.NewEncoder(os.Stdout).Encode(out)
			os.Exit(0)
		}
	}
	os.Exit(m.Run())
}

// sandboxed is the command that runs argv under p through this binary's
// wrapper; p nil runs argv as it is.
func sandboxed(t *testing.T, p *sandbox.Policy, argv ...string) *exec.Cmd {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if p == nil {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.SysProcAttr = childproc.SysProcAttr()
		return cmd
	}
	env, err := sandbox.EnvOf(*p)
	if err != nil {
		t.Fatal(err)
	}
	full := sandbox.Command([]string{self, "sandbox"}, argv[0], argv[1:])
	cmd := exec.Command(full[0], full[1:]...)
	cmd.Env = append(os.Environ(), env)
	cmd.SysProcAttr = childproc.SysProcAttr()
	return cmd
}

// TestTheSandboxHoldsTheAgentAndWhatItStarts: a process started through
// the wrapper reads the system and its own files, writes its own
// directory, and runs a shell that writes there too; it can't read a
// protected file inside its own HOME, another directory, or write what it
// may only read; it can't ptrace (nor open the memory of) the process that
// started it or another sandboxed process, nor (ABI 6) signal them or
// connect to an abstract unix socket the test listens on. The same probes without the
// sandbox all succeed, so the test can fail.
func TestTheSandboxHoldsTheAgentAndWhatItStarts(t *testing.T) {
	testdeps.Require(t, testdeps.Landlock)
	abi := sandbox.ABI()
	root := tree(t, "own/mine", "home/notes", "home/zooid.yaml", "other/theirs", "ro/readme")
	at := func(p string) string { return filepath.Join(root, p) }
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	policy := func() *sandbox.Policy {
		p, _ := sandbox.Plan(sandbox.Request{
			Write:   []string{at("own"), at("home")},
			Read:    []string{self, at("ro")},
			Protect: []string{at("home/zooid.yaml"), at("other")},
		})
		return &p
	}

	// Another sandboxed process (another agent), alive while the probes run.
	other := sandboxed(t, policy(), "/bin/sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Process.Kill(); _ = other.Wait() })

	// An abstract unix socket this process (outside any sandbox) listens on.
	abstract := fmt.Sprintf("zooid-sandbox-test-%d", os.Getpid())
	ln, err := net.Listen("unix", "@"+abstract)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() { // owner: the test; ends when ln closes at cleanup
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()

	targets := map[string]bool{ // target: reachable from inside the sandbox
		at("own/mine"): true, "write:" + at("own/new"): true, at("home/notes"): true,
		at("ro/readme"): true, "/etc/passwd": true, "/proc/self/status": true,
		at("home/zooid.yaml"): false, at("other/theirs"): false, at("other"): false,
		"write:" + at("ro/readme"): false, "write:" + at("home/new"): false,
		fmt.Sprintf("ptrace:%d", os.Getpid()): false, fmt.Sprintf("ptrace:%d", other.Process.Pid): false,
		fmt.Sprintf("/proc/%d/mem", os.Getpid()): false, fmt.Sprintf("/proc/%d/mem", other.Process.Pid): false,
		fmt.Sprintf("signal:%d", os.Getpid()): abi < 6, fmt.Sprintf("signal:%d", other.Process.Pid): abi < 6,
		"abstract:" + abstract: abi < 6,
	}
	argv := []string{self, "probe"}
	for target := range targets {
		argv = append(argv, target)
	}
	probe := func(p *sandbox.Policy) map[string]fakeagent.ReachResult {
		var out, stderr bytes.Buffer
		cmd := sandboxed(t, p, argv...)
		cmd.Stdout, cmd.Stderr = &out, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("probe: %v\n%s", err, stderr.String())
		}
		var results []fakeagent.ReachResult
		if err := json.Unmarshal(out.Bytes(), &results); err != nil {
			t.Fatalf("probe output %q: %v", out.String(), err)
		}
		byTarget := map[string]fakeagent.ReachResult{}
		for _, r := range results {
			byTarget[r.Path] = r
		}
		return byTarget
	}

	for target, r := range probe(policy()) {
		switch want := targets[target]; {
		case want && r.Err != "":
			t.Errorf("sandboxed, %s failed: %s", target, r.Err)
		case !want && !r.Refused():
			t.Errorf("sandboxed, %s: got err %q, want it refused (EACCES or EPERM)", target, r.Err)
		}
	}
	for target, r := range probe(nil) {
		if r.Err != "" && !strings.HasPrefix(target, "write:"+at("ro")) {
			t.Errorf("without the sandbox, %s failed: %s (the test could not tell the sandbox apart)", target, r.Err)
		}
	}

	// A tool the agent starts: a shell from the system, writing its own
	// directory and reading the system's files.
	var out bytes.Buffer
	sh := sandboxed(t, policy(), "/bin/sh", "-c", "cat /etc/hostname > "+at("own/tool.out")+" && echo ran && cat "+at("home/zooid.yaml"))
	sh.Stdout, sh.Stderr = &out, &out
	err = sh.Run()
	if _, serr := os.Stat(at("own/tool.out")); serr != nil || !strings.Contains(out.String(), "ran") {
		t.Errorf("the sandboxed shell did not run its tool: %v, %v: %s", serr, err, out.String())
	}
	if err == nil || !strings.Contains(out.String(), "Permission denied") {
		t.Errorf("the sandboxed shell read the protected file: err %v, output %q", err, out.String())
	}
}

// TestTheWrapperRefusesToRunWithoutItsPolicy: `zooid sandbox` never runs
// an agent unsandboxed because it was started wrong.
func TestTheWrapperRefusesToRunWithoutItsPolicy(t *testing.T) {
	var stderr bytes.Buffer
	if code := sandbox.Main([]string{"--", "/bin/true"}, &stderr); code != 2 || !strings.Contains(stderr.String(), sandbox.Env) {
		t.Errorf("without $%s: exit %d, %q; want 2 naming the variable", sandbox.Env, code, stderr.String())
	}
	stderr.Reset()
	t.Setenv(sandbox.Env, "{}")
	if code := sandbox.Main([]string{"--", "no-such-agent-anywhere"}, &stderr); code != 127 || !strings.Contains(stderr.String(), "no-such-agent-anywhere") {
		t.Errorf("a command found nowhere: exit %d, %q; want 127 naming it", code, stderr.String())
	}
}

// TestNetworkRulesLimitTCP: with connect limited to one port, connecting
// to another is refused (ABI 4), the listed one is not.
func TestNetworkRulesLimitTCP(t *testing.T) {
	testdeps.Require(t, testdeps.Landlock)
	if sandbox.ABI() < 4 {
		t.Logf("Landlock ABI %d has no network rules; the sandbox leaves TCP open here (zooid check says so)", sandbox.ABI())
		return
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// Two listeners this test holds: the probe may connect to the first.
	var addrs []string
	for range 2 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		addrs = append(addrs, l.Addr().String())
	}
	port := func(addr string) uint16 {
		var p uint16
		_, _ = fmt.Sscanf(addr[strings.LastIndex(addr, ":")+1:], "%d", &p)
		return p
	}
	p, _ := sandbox.Plan(sandbox.Request{Read: []string{self}, Connect: sandbox.Ports{port(addrs[0])}})
	var out bytes.Buffer
	cmd := sandboxed(t, &p, self, "tcp-probe", addrs[0], addrs[1])
	cmd.Stdout, cmd.Stderr = &out, &out
	_ = cmd.Run()
	want := "0 ok\n1 refused\n"
	if out.String() != want {
		t.Errorf("connecting from the sandbox: got %q, want %q", out.String(), want)
	}
}
