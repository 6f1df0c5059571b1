package tasks

import (
	"slices"
	"testing"
)

// On a daemon with a workstation, a task's agent may be named
// workstation.name: this workstation's name is its agent (journaled by its
// bare name), another workstation's is no agent of this daemon, and the self
// rule sees through the prefix.
func TestAdmissionReadsWorkstationNames(t *testing.T) {
	e := &env{t: t, dir: t.TempDir(), hs: newFakeHS(), workstation: "laptop"}
	e.open()
	res := e.start(caller("alice", roomA, "$home"), "", "laptop.bob", "ci.bob", "laptop.alice", "carol")
	want := []string{"started:", "refused:unknown_agent", "refused:self", "started:"}
	if got := statuses(res); !slices.Equal(got, want) {
		t.Fatalf("statuses = %v, want %v", got, want)
	}
	if res.Results[0].Agent != "bob" {
		t.Errorf("results[0].agent = %q, want bob, its zooid.yaml name", res.Results[0].Agent)
	}
	task, ok := e.m.TaskByThread(roomA, res.Results[0].ThreadID)
	if !ok || task.Agent != "bob" || task.AgentUser != "@bob:hs" {
		t.Fatalf("task of laptop.bob = %+v, %v; want agent bob, user @bob:hs", task, ok)
	}
}
