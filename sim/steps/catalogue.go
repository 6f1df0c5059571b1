package steps

import (
	_ "embed"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"

	"github.com/cucumber/godog"
)

// catalogueIntro is the catalogue's prose before the steps: how to run the
// features and what the placeholders mean. It is a file of its own so it
// reads and edits as the Markdown it is.
//
//go:embed catalogue_intro.md
var catalogueIntro string

// stepDef is one step of the vocabulary. The catalogue in features/README.md
// is generated from these, so the documentation is the definition.
type stepDef struct {
	area    string // catalogue section
	pattern string // godog regular expression
	example string // how a feature writes it
	doc     string // one line: what the step does or checks
	fn      any
}

// areas orders the catalogue sections.
var areas = []struct{ key, title, intro string }{
	{"setup", "Setting the scene", "Given steps declare; the first step that acts creates rooms and starts the daemon, so setup costs one pass."},
	{"script", "Scripting agents", "Each `will` step queues one turn; every prompt consumes the next queued turn, and an agent with none queued replies \"ok\"."},
	{"humans", "Humans acting", "`@name` in a message becomes the user's Matrix id in the body and, unless told otherwise, an `m.mentions` entry."},
	{"prompts", "What agents received", "Negative and counting checks first send a barrier mention to the agent and wait for it, so they never rely on sleeping."},
	{"posts", "What was posted", "Read back through the client-server API as a human member of the room, so they hold on any homeserver."},
	{"tools", "Calling tools", "A call is driven through the real chain: a human mention in the agent's current thread wakes it, its turn calls the tool through the bridge."},
	{"results", "Tool results", "Checks on the most recent call (or paging walk) of any agent."},
	{"sandbox", "What agents can reach", "The scripted agent tries each target from its own process and reports what the kernel answered; local agents run in a Landlock sandbox unless the scenario says otherwise, and checks hold the kernel to the Landlock ABI it has."},
	{"daemons", "Several daemons", "A second daemon (a workstation) with its own appservice registration on the same homeserver, its agents in the scenario's rooms beside the daemon under test's; features with one carry `@several-daemons`."},
	{"trace", "The daemon's trace", "Read back from the trace directory (zooid/trace) of the scenario's daemon; each check waits until the record it names is written."},
}

// definitions lists every step bound to w; with a nil world it serves the
// catalogue only.
func definitions(w *world) []stepDef {
	var all []stepDef
	all = append(all, setupSteps(w)...)
	all = append(all, scriptSteps(w)...)
	all = append(all, humanSteps(w)...)
	all = append(all, promptSteps(w)...)
	all = append(all, postSteps(w)...)
	all = append(all, toolSteps(w)...)
	all = append(all, resultSteps(w)...)
	all = append(all, sandboxSteps(w)...)
	all = append(all, traceSteps(w)...)
	all = append(all, severalSteps(w)...)
	return all
}

// register binds the vocabulary to a scenario.
func register(sc *godog.ScenarioContext, w *world) {
	res := compiledSteps()
	for _, d := range definitions(w) {
		sc.Step(res[d.pattern], d.fn)
	}
}

// compiledSteps are the step patterns compiled once for every scenario:
// godog compiles a pattern given as a string each time it is bound, which
// was 3.5% of a fake feature pass's CPU under the race detector. The
// catalogue's definitions (nil world) list the same patterns as any world's.
var compiledSteps = sync.OnceValue(func() map[string]*regexp.Regexp {
	res := map[string]*regexp.Regexp{}
	for _, d := range definitions(nil) {
		res[d.pattern] = regexp.MustCompile(d.pattern)
	}
	return res
})

// checkAreas refuses a step filed under a section the catalogue does not
// have: it would silently drop out of the documentation.
func checkAreas(defs []stepDef) error {
	known := map[string]bool{}
	for _, a := range areas {
		known[a.key] = true
	}
	var bad []string
	for _, d := range defs {
		if !known[d.area] {
			bad = append(bad, fmt.Sprintf("%q (area %q)", d.example, d.area))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("steps in no catalogue section (add the area to areas in cmd/step-catalogue.go): %s", strings.Join(bad, ", "))
	}
	return nil
}

// WriteCatalogue renders the step catalogue (features/README.md).
func WriteCatalogue(out io.Writer) error {
	var b strings.Builder
	b.WriteString("<!-- Generated from sim/steps/*.go by `go generate ./sim/steps` (cmd/step-catalogue); do not edit. -->\n")
	b.WriteString(catalogueIntro)
	defs := definitions(nil)
	if err := checkAreas(defs); err != nil {
		return err
	}
	for _, a := range areas {
		fmt.Fprintf(&b, "\n## %s\n\n%s\n\n", a.title, a.intro)
		for _, d := range defs {
			if d.area != a.key {
				continue
			}
			fmt.Fprintf(&b, "- `%s`  \n  %s  \n  pattern: `%s`\n", d.example, d.doc, d.pattern)
		}
	}
	_, err := io.WriteString(out, b.String())
	if err != nil {
		return fmt.Errorf("writing catalogue: %w", err)
	}
	return nil
}
