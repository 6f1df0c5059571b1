package childproc

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"testing"
)

// A child is listed with this process as its parent (Children and
// LiveChildren find it),
// with its arguments and this process's user; killed, it is a zombie until it
// is waited for, and then it is gone. (The idle-session benchmark once read
// the process group instead, which finds no child of a test binary, and
// measured agents still running.)
func TestProcessesFollowAChildToItsEnd(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = SysProcAttr()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	waited := false
	t.Cleanup(func() {
		if !waited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	find := func() (Process, bool) {
		t.Helper()
		ps, err := Children(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(ps, func(p Process) bool { return p.PID == pid })
		if i < 0 {
			return Process{}, false
		}
		return ps[i], true
	}
	p, ok := find()
	if !ok || p.PPID != os.Getpid() || p.Ended() {
		t.Fatalf("the child %d: %+v (listed %v), want a live process whose parent is %d", pid, p, ok, os.Getpid())
	}
	if q, err := Lookup(pid); err != nil || q != p {
		t.Errorf("Lookup(%d) = %+v, %v; want %+v", pid, q, err, p)
	}
	if !slices.Contains(LiveChildren(os.Getpid()), pid) {
		t.Errorf("LiveChildren leaves out the running child %d", pid)
	}
	if got := Cmdline(pid); got != "sleep 60" {
		t.Errorf("Cmdline = %q, want %q", got, "sleep 60")
	}
	uid, euid, err := Owner(pid)
	if err != nil || uid != uint32(os.Getuid()) || euid != uint32(os.Geteuid()) {
		t.Errorf("Owner = %d, %d, %v; want %d, %d", uid, euid, err, os.Getuid(), os.Geteuid())
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Not waited for, the killed child stays a zombie: the barrier is its state.
	for {
		p, ok = find()
		if !ok {
			t.Fatalf("the killed child %d left /proc before it was waited for", pid)
		}
		if p.Ended() {
			break
		}
		runtime.Gosched()
	}
	if got := Cmdline(pid); got != "" {
		t.Errorf("a zombie's Cmdline = %q, want none", got)
	}
	if slices.Contains(LiveChildren(os.Getpid()), pid) {
		t.Errorf("LiveChildren lists the zombie %d", pid)
	}
	_ = cmd.Wait()
	waited = true
	if p, ok := find(); ok {
		t.Errorf("the child %d is still listed once waited for: %+v", pid, p)
	}
	if q, err := Lookup(pid); err == nil {
		t.Errorf("Lookup(%d) after the wait = %+v, want an error", pid, q)
	}
}
