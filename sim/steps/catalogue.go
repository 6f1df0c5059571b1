package steps

import (
	"fmt"
	"io"
	"strings"

	"github.com/cucumber/godog"
)

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
	all = append(all, taskSteps(w)...)
	all = append(all, scenarioSteps(w)...)
	all = append(all, processSteps(w)...)
	all = append(all, limitSteps(w)...)
	all = append(all, httpSteps(w)...)
	all = append(all, traceSteps(w)...)
	all = append(all, replaySteps(w)...)
	all = append(all, longSteps(w)...)
	all = append(all, faultSteps(w)...)
	all = append(all, restartSteps(w)...)
	all = append(all, modelSteps(w)...)
	all = append(all, realSteps(w)...)
	return all
}

// register binds the vocabulary to a scenario.
func register(sc *godog.ScenarioContext, w *world) {
	for _, d := range definitions(w) {
		sc.Step(d.pattern, d.fn)
	}
}

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
	b.WriteString("<!-- Generated from sim/steps/*.go by `go run ./sim/steps/catalogue`; do not edit. -->\n")
	b.WriteString("# Step catalogue\n\n")
	b.WriteString("The vocabulary of the features in this directory. Steps speak in names (\"ori\", \"agent-a\",\n")
	b.WriteString("\"#ops\"), never raw ids; the harness maps names to ids on whichever homeserver runs.\n\n")
	b.WriteString("Run: `go test ./sim/steps` (fakehs, then fakehs with the degraded profile: TestFeaturesDegraded),\n")
	b.WriteString("`ZOOID_TEST_HOMESERVER=synapse go test ./sim/steps -run 'TestFeatures$'`, or\n")
	b.WriteString("`zooid sim [paths] [--homeserver fake|fake-degraded|synapse|URL] [--tags EXPR] [--format pretty|progress|junit|cucumber] [--concurrency N]`.\n")
	b.WriteString("`fake-degraded` is fakehs.Degraded: no /threads, no bundled aggregations, no relation filters, filters applied\n")
	b.WriteString("after the page limit, history served to non-members, new events visible 200 ms after their send.\n")
	b.WriteString("A homeserver given by URL (`ZOOID_TEST_HOMESERVER=http://127.0.0.1:8008`) must allow open registration\n")
	b.WriteString("(m.login.dummy, for the humans) and have an appservice registration installed, described by the variables\n")
	b.WriteString("the conformance suite reads: `ZOOID_TEST_AS_TOKEN`, `ZOOID_TEST_HS_TOKEN`, `ZOOID_TEST_AS_PUSH_ADDR`\n")
	b.WriteString("(host:port of its url; the run listens there) and `ZOOID_TEST_AS_USER_PREFIX` (its exclusive user namespace\n")
	b.WriteString("`@PREFIX.*:server`), optionally `ZOOID_TEST_AS_SENDER_LOCALPART` (default zooidbot), `ZOOID_TEST_SERVER_NAME`\n")
	b.WriteString("(default: asked of the server) and `ZOOID_TEST_AS_ID` (the registration's id, default zooid: each daemon checks it with the appservice ping at start, so it must be right).\n")
	b.WriteString("For several registrations give each variable a comma-separated list, one item per registration;\n")
	b.WriteString("a run holds as many scenarios at once as there are registrations (one registration: one at a time).\n")
	b.WriteString("On Synapse every scenario has an appservice registration of its own in one container (4 by default,\n")
	b.WriteString("`--concurrency`), so scenarios run side by side.\n")
	b.WriteString("On a shared server (Synapse or a URL) each scenario's agents are users of their own inside the registration's\n")
	b.WriteString("namespace (`@PREFIX<run>-<n>-agent-a`): none is in an earlier scenario's rooms, so none leaves rooms at teardown,\n")
	b.WriteString("and a URL homeserver keeps a few agent users per scenario run.\n\n")
	b.WriteString("Seeded rooms on Synapse: a busy room (`\"#ops\" has 2000 messages in 40 threads from …`) is sent to Synapse\n")
	b.WriteString("one event at a time, 2000 requests per scenario. The rooms listed in `poolRecipes` (sim/steps/snapshot.go) come\n")
	b.WriteString("ready-seeded instead: the run starts Synapse from a snapshot image (`zooid-synapse-snapshot:KEY`) holding a\n")
	b.WriteString("pool of identical copies, and each scenario whose busy room, humans and agent senders match a recipe\n")
	b.WriteString("claims a copy of its own (its registration, humans and alias), so writes stay isolated; a copy whose room\n")
	b.WriteString("still ends with its last generated message goes back into the pool, one a scenario wrote to is spent. The key hashes the\n")
	b.WriteString("Synapse image's id, the recipes and the builder's version; the first run after a change builds the snapshot\n")
	b.WriteString("(the same sends, once), later runs reuse it. To give a new scenario a seeded room, use a recipe's exact\n")
	b.WriteString("step and humans, or add a recipe (Pool = how many scenarios claim it in one pass; unmatched or extra\n")
	b.WriteString("scenarios seed by sending). Only recipes some selected feature declares are built; a run of\n")
	b.WriteString("other features starts a plain Synapse. `ZOOID_TEST_SNAPSHOTS=off` seeds everything by sending.\n")
	b.WriteString("Where a run's time goes: `-godog.timings FILE` (go test) or `zooid sim --timings` prints per feature and\n")
	b.WriteString("for the slowest scenarios the wall time split into lease, humans, rooms, seed, handover, daemon, steps, teardown.\n")
	b.WriteString("Scenarios tagged `@fake-only` need the fake homeserver's fault injection and are skipped elsewhere.\n")
	b.WriteString("Ctrl-C (SIGINT or SIGTERM) stops `zooid sim` and `zooid bench` cleanly: the waits of the running scenarios\n")
	b.WriteString("end as \"the run was interrupted\", scenarios not started fail the same way without starting, every world is\n")
	b.WriteString("torn down (agent processes, the daemon) and the Synapse container is removed (by the close every run ends\n")
	b.WriteString("with, given a context the interrupt does not end); a second Ctrl-C quits at once\n")
	b.WriteString("(the next run's sweep then removes the container). `steps.Options.Context` does the same for a program\n")
	b.WriteString("(`TestRunStopsWhenItsContextEnds`, `TestInterruptibleEndsOnTheFirstSignal`).\n\n")
	b.WriteString("Hunting flaky scenarios: `zooid sim --repeat N` runs every selected scenario N times, in N passes;\n")
	b.WriteString("`--random SEED` shuffles the order (pass k uses SEED+k-1; `--random -1` picks a seed) and prints each\n")
	b.WriteString("pass's seed, so `--random S` replays an order that failed. A scenario that fails in one pass and passes\n")
	b.WriteString("in another is reported as FLAKY, with each failure, and fails the run: a flaky scenario is never green.\n")
	b.WriteString("Scenarios that failed in every pass are listed apart. Try a new or changed scenario with\n")
	b.WriteString("`zooid sim features/x.feature --repeat 20 --concurrency 8 --random -1` before landing it; CI does the same\n")
	b.WriteString("for the whole fake suite with a CPU hog beside it (`.ci/run`, `scripts/flake-hunt.sh`). On Synapse a pass\n")
	b.WriteString("spends the snapshot's seeded rooms its scenarios write to, so each later pass starts Synapse again from the\n")
	b.WriteString("snapshot (seconds) rather than seed those rooms by sending (minutes a room), and says so\n")
	b.WriteString("(`TestRepeatStartsTheHomeserverAgainWhenAPassSpentSeededRooms`).\n\n")
	b.WriteString("In tool arguments and expected JSON, strings are placeholders when they start with a sign:\n")
	b.WriteString("`\"#ops\"` is the room's id, `\"#ops:alias\"` its full alias, `\"#ops:short\"` its alias without the server (as zooid.yaml may\n")
	b.WriteString("write it), `\"#ops/thread-3\"` the root of the third generated thread of `#ops`,\n")
	b.WriteString("`\"@ori\"` a user id, `\"$thread\"` the root of the current thread, `\"$task:audit svc-a\"` that task's thread, `\"$next_before\"` the agent's\n")
	b.WriteString("last cursor and `\"$tampered_next_before\"` that cursor with one character changed.\n")
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
