package childproc

import (
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A child's child started with SysProcAttr dies with its parent, and sits in
// its own process group.
func TestChildDiesWithItsParent(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the parent-death signal is Linux only")
	}
	if os.Getenv("CHILDPROC_PARENT") == "1" {
		// The middle process: start a sleeper, print its pid, wait to be killed.
		cmd := exec.Command("sleep", "60")
		cmd.SysProcAttr = SysProcAttr()
		if err := cmd.Start(); err != nil {
			os.Exit(2)
		}
		os.Stdout.WriteString(strconv.Itoa(cmd.Process.Pid) + "\n")
		select {}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	parent := exec.Command(self, "-test.run", "^TestChildDiesWithItsParent$")
	parent.Env = append(os.Environ(), "CHILDPROC_PARENT=1")
	out, err := parent.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 32)
	n, err := out.Read(buf)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(buf[:n])))
	if err != nil {
		t.Fatalf("child pid %q: %v", buf[:n], err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if pgid, err := syscall.Getpgid(pid); err != nil || pgid != pid {
		t.Fatalf("the child's process group is %d (%v), want its own, %d", pgid, err, pid)
	}
	_ = parent.Process.Kill()
	_ = parent.Wait()
	// The sleeper is reparented and reaped by init once killed; poll until
	// its pid is gone (bounded), as the kernel delivers the signal at once.
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err == nil && strings.Contains(string(stat), ") Z ") {
			return // killed, awaiting its reaper
		}
		if time.Now().After(deadline) {
			t.Fatalf("the child %d outlived its killed parent by 10s", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
