package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/zooid-dev/zooid/internal/freeport"
	"github.com/zooid-dev/zooid/zooid/recording"
)

// walkthroughDoc holds the maintainer's walk-through this test runs.
const walkthroughDoc = "../../scenarios/README.md"

// walkStep is what one of the walk-through's blocks must do: its exit code
// (the last command's), and what it prints.
type walkStep struct {
	code   int
	stdout func(out string) error // nil: prints nothing
	stderr func(errOut string) error
}

// TestWalkThrough runs scenarios/README.md's walk-through as a maintainer
// would, block by block in one shell, with the zooid and zooid-sim binaries
// built from this tree on PATH: fakehs, the daemon with its trace and two
// agents scripted by `zooid fake-agent --script`, a room made with curl (a
// mention, a thread reply, a delegation and its result, a SIGKILL while coder
// is mid-turn, a restart), `zooid record --trace`, `zooid replay` (reproduced),
// the recording edited (one difference), shrunk (its output replays with that
// one difference), its feature written and run by `zooid sim` (passes), then
// failing twice: with its step edited as the doc says, and, on the unedited
// feature, with zooid-sim built from this tree with bare thread replies no
// longer routed to their addressee. The commands are the doc's own, so it
// cannot drift from what works.
func TestWalkThrough(t *testing.T) {
	if testing.Short() {
		t.Skip("builds zooid and zooid-sim and runs the walk-through's daemons, replays and shrink")
	}
	for _, tool := range []string{"bash", "curl", "jq", "sed"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the walk-through needs %s: %v", tool, err)
		}
	}
	blocks := walkthroughBlocks(t)
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	begin := time.Now()
	build := exec.Command("go", "build", "-tags", "goolm", "-o", bin+"/", ".", "../zooid-sim")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build zooid and zooid-sim: %v\n%s", err, out)
	}
	built := time.Since(begin)
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		t.Fatal(err)
	}
	hsPort, err := freeport.Port()
	if err != nil {
		t.Fatal(err)
	}
	pushPort, err := freeport.Port()
	if err != nil {
		t.Fatal(err)
	}
	sh := startShell(t, work, append(environWithout(execEnv),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		fmt.Sprintf("HS_PORT=%d", hsPort), fmt.Sprintf("PUSH_PORT=%d", pushPort)))

	empty := func(s string) error {
		if s != "" {
			return fmt.Errorf("want nothing, got %q", s)
		}
		return nil
	}
	routingLine := regexp.MustCompile(`^#ops:localhost, routing: event \$\S+ from @ori:localhost in thread \$\S+ "and its p99\?": want woke nobody \(nobody_addressed\); got woke coder \(addressee, thread \$\S+\)$`)
	diverged := func(events string) *regexp.Regexp {
		return regexp.MustCompile(`^diverged: 1 differences between the recorded trace and today's daemon \(` + events + ` events pushed, in \S+\)$`)
	}
	lines := func(s string, res ...*regexp.Regexp) error {
		ls := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
		if len(ls) != len(res) {
			return fmt.Errorf("want %d lines, got %d: %q", len(res), len(ls), s)
		}
		for i, re := range res {
			if !re.MatchString(ls[i]) {
				return fmt.Errorf("line %d is %q, want it to match %s", i+1, ls[i], re)
			}
		}
		return nil
	}
	var shrinkSummary string
	steps := []walkStep{
		{code: 0, stdout: empty, stderr: empty},                    // 1. fakehs, script, config
		{code: 0, stdout: empty, stderr: empty},                    // 2. the daemon, ori in #ops
		{code: 0, stdout: empty, stderr: empty},                    // 3. mention, thread reply, delegation
		{code: 0, stdout: empty, stderr: onlyJobNotices("Killed")}, // 4. SIGKILL mid-turn, restart
		{code: 0, stdout: empty, stderr: func(s string) error { // 5. record
			return lines(strings.Join(dropJobNotices(s), ""), regexp.MustCompile(`^zooid record: 13 events, 3 members \(2 agents\)$`))
		}},
		{code: 0, stdout: func(s string) error { // 6. replay
			return lines(s, regexp.MustCompile(`^reproduced: 4 events pushed \(0 as history\), 40 trace records compared, in \S+$`))
		}, stderr: empty},
		{code: 1, stdout: func(s string) error { return lines(s, diverged("4"), routingLine) }, stderr: empty}, // 7. edited
		{code: 1, stdout: func(s string) error { // 8. shrink, and its output replayed
			ls := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
			if len(ls) < 4 {
				return fmt.Errorf("want shrink's summary and difference, then the replay's two lines, got %q", s)
			}
			shrinkSummary = ls[0]
			summary := regexp.MustCompile(`^diverged: 1 differences; shrunk 13 events and 3 members to \d+ events and \d+ members `)
			if !summary.MatchString(ls[0]) || !slices.ContainsFunc(ls[1:len(ls)-2], routingLine.MatchString) {
				return fmt.Errorf("zooid replay --shrink printed %q, want its summary and the one routing difference", strings.Join(ls[:len(ls)-2], "\n"))
			}
			if err := lines(strings.Join(ls[len(ls)-2:], "\n"), diverged(`\d+`), routingLine); err != nil {
				return fmt.Errorf("zooid replay small.json: %w", err)
			}
			return nil
		}},
		{code: 0, stdout: func(s string) error { // 9. the feature, passing
			if !strings.Contains(s, "1 scenarios (1 passed)") {
				return fmt.Errorf("want 1 scenarios (1 passed), got %q", s)
			}
			return nil
		}, stderr: func(s string) error {
			if !strings.Contains(s, "zooid replay: wrote ops_walk.feature") {
				return fmt.Errorf("want zooid replay: wrote ops_walk.feature, got %q", s)
			}
			return nil
		}},
		{code: 1, stdout: func(s string) error { // 10. its step edited: failing
			if !strings.Contains(s, "1 scenarios (1 failed)") || !strings.Contains(s, `planner is prompted with "and its p99?"`) {
				return fmt.Errorf("want the scenario failed at the edited step, got %q", s)
			}
			return nil
		}},
	}
	if len(blocks) != len(steps) {
		t.Fatalf("%s's walk-through has %d blocks, this test checks %d: keep them together", walkthroughDoc, len(blocks), len(steps))
	}
	took := make([]time.Duration, len(blocks))
	for i, block := range blocks {
		if i == 9 {
			// Before the doc edits the feature: the unedited feature fails
			// on a daemon that no longer routes bare thread replies.
			changedFails(t, work, filepath.Join(work, "ops_walk.feature"))
		}
		begin := time.Now()
		limit := time.Minute
		if i+1 == 8 {
			// The shrink replays the recording many times, and a candidate
			// that stalls takes three times the input's replay plus 10 s:
			// 47 s to 1 m 38 s on 2 busy cores.
			limit = 8 * time.Minute
		}
		code, out, errOut := sh.run(t, i+1, block, limit)
		took[i] = time.Since(begin)
		st := steps[i]
		if code != st.code {
			t.Fatalf("walk-through block %d exited %d, want %d\nblock:\n%s\nstdout:\n%s\nstderr:\n%s", i+1, code, st.code, block, out, errOut)
		}
		for what, check := range map[string]func(string) error{"stdout": st.stdout, "stderr": st.stderr} {
			if check == nil {
				continue
			}
			if err := check(map[string]string{"stdout": out, "stderr": errOut}[what]); err != nil {
				t.Fatalf("walk-through block %d's %s: %v\nblock:\n%s\nstdout:\n%s\nstderr:\n%s", i+1, what, err, block, out, errOut)
			}
		}
		switch i + 1 {
		case 8:
			small, err := recording.Load(filepath.Join(work, "small.json"))
			if err != nil {
				t.Fatalf("the shrunk recording: %v", err)
			}
			if len(small.Events) >= 13 {
				t.Errorf("the shrunk recording kept %d of 13 events", len(small.Events))
			}
		case 9:
			f := mustRead(t, filepath.Join(work, "ops_walk.feature"))
			for _, want := range []string{`the trace of "#ops" records coder prompted for the recorded event "deploy-svc-a"`, "the daemon is killed and started again", `coder is prompted with "and its p99?"`} {
				if !strings.Contains(f, want) {
					t.Errorf("the written feature lacks %q:\n%s", want, f)
				}
			}
		}
	}
	var ts []string
	for i, d := range took {
		ts = append(ts, fmt.Sprintf("%d: %s", i+1, d.Round(10*time.Millisecond)))
	}
	t.Logf("walk-through: build %s; blocks %s; %s", built.Round(100*time.Millisecond), strings.Join(ts, ", "), shrinkSummary)
}

// changedFails builds zooid-sim from this tree with one change to the
// behaviour the feature pins — a bare reply in a thread no longer wakes the
// agent the thread addressed — and checks the feature fails on it.
func changedFails(t *testing.T, work, feature string) {
	t.Helper()
	router, err := filepath.Abs("../../zooid/router/router.go")
	if err != nil {
		t.Fatal(err)
	}
	src := mustRead(t, router)
	const from, to = "\tcase th != nil:\n\t\ttargets = th.addressees\n", "\tcase th != nil:\n\t\ttargets = nil\n"
	if strings.Count(src, from) != 1 {
		t.Fatalf("%s no longer routes a bare thread reply with %q: change this test's change with it", router, from)
	}
	dir := t.TempDir()
	changed := filepath.Join(dir, "router.go")
	writeFile(t, changed, strings.Replace(src, from, to, 1))
	overlay, _ := json.Marshal(map[string]map[string]string{"Replace": {router: changed}})
	writeFile(t, filepath.Join(dir, "overlay.json"), string(overlay))
	exe := filepath.Join(dir, "zooid-sim")
	if out, err := exec.Command("go", "build", "-tags", "goolm", "-overlay", filepath.Join(dir, "overlay.json"), "-o", exe, "../zooid-sim").CombinedOutput(); err != nil {
		t.Fatalf("building zooid-sim with the change: %v\n%s", err, out)
	}
	cmd := exec.Command(exe, "sim", feature)
	cmd.Dir = work
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(out), "1 scenarios (1 failed)") ||
		!strings.Contains(string(out), `the daemon posting recorded event 3 as coder ("p99 is 40 ms"), as the recording's trace says: not within`) {
		t.Fatalf("the feature on a daemon that no longer wakes a bare reply's addressee: %v, want exit 1, the scenario failed waiting for coder's answer to it:\n%s", err, out)
	}
}

// walkthroughBlocks are the sh blocks of the walk-through, each after a
// <!-- walkthrough --> marker, in order.
func walkthroughBlocks(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile(walkthroughDoc)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range regexp.MustCompile("(?s)<!-- walkthrough -->\n```sh\n(.*?)```").FindAllSubmatch(doc, -1) {
		out = append(out, string(m[1]))
	}
	if len(out) == 0 {
		t.Fatalf("%s has no walk-through blocks (```sh after <!-- walkthrough -->)", walkthroughDoc)
	}
	return out
}

// jobNotice is bash's note that a background job ended on a signal.
var jobNotice = regexp.MustCompile(`^[a-z]+: line \d+: +\d+ (Killed|Terminated) .*\n?$`)

// dropJobNotices returns s's lines (with their newlines) but bash's job notices.
func dropJobNotices(s string) []string {
	var out []string
	for _, l := range strings.SplitAfter(s, "\n") {
		if l != "" && !jobNotice.MatchString(l) {
			out = append(out, l)
		}
	}
	return out
}

// onlyJobNotices wants nothing on stderr but bash's notice that the job was
// killed with that signal.
func onlyJobNotices(signal string) func(string) error {
	return func(s string) error {
		if rest := dropJobNotices(s); len(rest) > 0 || !strings.Contains(s, signal) {
			return fmt.Errorf("want only bash's %s notice, got %q", signal, s)
		}
		return nil
	}
}

// environWithout is os.Environ without the variable name.
func environWithout(name string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// shell is one bash the walk-through's blocks run in, in order, so what a
// block sets (variables, functions) the next one has, as in a maintainer's
// terminal. Everything it starts shares its process group, stopped on cleanup.
type shell struct {
	stdin io.Writer
	done  chan string // bash's stdout lines
	dir   string
}

func startShell(t *testing.T, dir string, env []string) *shell {
	t.Helper()
	cmd := exec.Command("bash", "--noprofile", "--norc")
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sh := &shell{stdin: stdin, done: make(chan string), dir: dir}
	// The reader goroutine ends when bash's stdout closes, which cleanup
	// brings about by stopping bash and what it started.
	go func() {
		defer close(sh.done)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			sh.done <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		// The walk-through stops its daemon and homeserver itself; a failed
		// run may leave them: the daemon gets SIGTERM first so it stops its
		// agents.
		for _, pidFile := range []string{"daemon.pid", "fakehs.pid"} {
			if b, err := os.ReadFile(filepath.Join(dir, pidFile)); err == nil {
				var pid int
				if _, err := fmt.Sscan(string(b), &pid); err == nil && pid > 0 {
					_ = syscall.Kill(pid, syscall.SIGTERM)
				}
			}
		}
		_ = stdin.Close()
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		for range sh.done {
		}
		if t.Failed() {
			t.Logf("the walk-through's shell's stderr:\n%s", stderr.String())
			for _, log := range []string{"daemon.log", "fakehs.log"} {
				if b, err := os.ReadFile(filepath.Join(dir, log)); err == nil {
					t.Logf("%s:\n%s", log, b)
				}
			}
		}
	})
	return sh
}

// run runs block n in the shell with its output in files and returns the
// exit code of its last command, its stdout and its stderr.
func (sh *shell) run(t *testing.T, n int, block string, limit time.Duration) (int, string, string) {
	t.Helper()
	outFile, errFile := fmt.Sprintf(".walk-%d.out", n), fmt.Sprintf(".walk-%d.err", n)
	marker := fmt.Sprintf("walk-through block %d ended:", n)
	script := fmt.Sprintf("{\n%s\n} > %s 2> %s\necho \"%s $?\"\n", block, outFile, errFile, marker)
	if _, err := io.WriteString(sh.stdin, script); err != nil {
		t.Fatalf("handing block %d to the shell: %v", n, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	for {
		select {
		case line, ok := <-sh.done:
			if !ok {
				t.Fatalf("the shell ended during walk-through block %d:\n%s", n, block)
			}
			rest, found := strings.CutPrefix(line, marker+" ")
			if !found {
				continue
			}
			var code int
			if _, err := fmt.Sscan(rest, &code); err != nil {
				t.Fatalf("block %d's end line %q", n, line)
			}
			return code, mustRead(t, filepath.Join(sh.dir, outFile)), mustRead(t, filepath.Join(sh.dir, errFile))
		case <-ctx.Done():
			out, _ := os.ReadFile(filepath.Join(sh.dir, outFile))
			errOut, _ := os.ReadFile(filepath.Join(sh.dir, errFile))
			t.Fatalf("walk-through block %d did not end within %s:\n%s\nstdout so far:\n%s\nstderr so far:\n%s", n, limit, block, out, errOut)
		}
	}
}
