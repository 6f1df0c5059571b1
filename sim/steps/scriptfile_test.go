package steps

import (
	"strings"
	"testing"

	"github.com/zooid-dev/zooid/fakeagent"
)

// TestScriptFilesSpeakTheSteps: a script file for a fake-agent run by hand
// (fakeagent.ParseScript) takes every example of the catalogue's steps that
// queue a scripted agent's turn, so a maintainer can copy a feature's lines
// into one. The steps a file does not take are named here with the reason.
func TestScriptFilesSpeakTheSteps(t *testing.T) {
	notInFiles := map[string]string{
		`planner's turn is released`:                                "a barrier a feature's step lifts; nothing lifts it by hand",
		`agent-a will reply with 150000 bytes of prose`:             "the features' generated prose, checked by later steps",
		`agent-a will flood the thread with 2000000 bytes of prose`: "the features' generated prose, checked by later steps",
	}
	n := 0
	for _, d := range scriptSteps(&world{}) {
		if strings.Contains(d.pattern, "'s model ") {
			continue // a real agent's model double, not the scripted agent
		}
		if why, ok := notInFiles[d.example]; ok {
			t.Logf("not in script files: %s (%s)", d.example, why)
			continue
		}
		line := d.example
		if strings.HasSuffix(line, "that:") {
			line += "\n  | says | hello |"
		}
		turns, err := fakeagent.ParseScript(strings.NewReader(line), "catalogue")
		if err != nil {
			t.Errorf("a script file refuses the step %q: %v", d.example, err)
			continue
		}
		if len(turns) != 1 {
			t.Errorf("the step %q gave turns for %d agents, want 1", d.example, len(turns))
		}
		n++
	}
	if n < 6 {
		t.Fatalf("only %d of the catalogue's script steps were checked: the filter above is wrong", n)
	}
}
