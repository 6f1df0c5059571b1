//go:build linux

package mcpserver

import (
	"os"
	"testing"
)

// TestDescendsComparesStartTimeAndUid: a reused pid (same pid, another start
// time) is not the agent, nor is another uid, nor the agent's parent.
func TestDescendsComparesStartTimeAndUid(t *testing.T) {
	me, err := ProcessOf(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !descends(os.Getpid(), me.uid, me) {
		t.Fatal("the agent process itself is not served")
	}
	reused := me
	reused.start++
	if descends(os.Getpid(), me.uid, reused) {
		t.Fatal("a process with the agent's pid but another start time is served")
	}
	if descends(os.Getpid(), me.uid+1, me) {
		t.Fatal("a peer of another uid is served")
	}
	if descends(os.Getppid(), me.uid, me) {
		t.Fatal("the agent's parent is served")
	}
}
