package report

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/zooid-dev/zooid/internal/testdeps"

	"github.com/chromedp/chromedp"

	"github.com/zooid-dev/zooid/zooid/trace"
)

// TestPageInAHeadlessBrowser opens a report in Debian's chromium: the room's
// timeline renders, a folded thread opens on a click and shows its reply,
// the hostile body stays text, and a screenshot is not blank. Without
// chromium it follows internal/testdeps' rule (CI installs it).
func TestPageInAHeadlessBrowser(t *testing.T) {
	testdeps.Require(t, testdeps.Chromium)
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatal(err)
	}
	diff := trace.Diff{{Room: "#ops", Stream: "routing", What: `event $evil from @ori:hs1: want woke nobody (nobody_addressed); got woke agent-a (mention)`}}
	dir := t.TempDir()
	pagePath := filepath.Join(dir, "report.html")
	if err := os.WriteFile(pagePath, []byte(render(t, diff)), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser),
		chromedp.NoSandbox, // CI runs as root
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.WindowSize(1000, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
	defer cancelT()

	replySel := chromedp.CSS(`details.thread li.event .text`)
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s in chromium: %v", what, err)
		}
	}
	must("opening the page", chromedp.Do(ctx, chromedp.Navigate("file://"+pagePath), chromedp.WaitVisible(chromedp.CSS(`ol.timeline`))))
	rooms, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(`.room h3`)))
	must("reading the room heading", err)
	evilText, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelectorAll('li.event.diverges .text')[0].textContent`))
	must("reading the hostile event", err)
	pwned, err := chromedp.Run(ctx, chromedp.Evaluate[string](`String(window.pwned)`))
	must("reading window.pwned", err)
	open, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector('details.thread').open`))
	must("reading the thread's state", err)
	before, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('details.thread li.event .text').innerText`))
	must("reading the folded reply", err)
	must("expanding the thread", chromedp.Do(ctx, chromedp.Click(chromedp.CSS(`details.thread > summary`)), chromedp.WaitVisible(replySel)))
	reply, err := chromedp.Run(ctx, chromedp.Text(replySel))
	must("reading the reply", err)
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	must("taking a screenshot", err)
	if rooms != "#ops" {
		t.Errorf("room heading %q, want #ops", rooms)
	}
	if !strings.HasPrefix(evilText, "<script>window.pwned=1</script>") || pwned != "undefined" {
		t.Errorf("hostile body: shown as %q, window.pwned=%s; want it shown as text and never run", evilText, pwned)
	}
	if open || before != "" {
		t.Errorf("thread before the click: open=%v, reply text %q; want it folded", open, before)
	}
	if reply != "Deploy 8812 shrank the pool." {
		t.Errorf("reply after expanding: %q", reply)
	}
	if err := os.WriteFile(filepath.Join(dir, "report.png"), shot, 0o644); err != nil {
		t.Fatal(err)
	}
	if out := os.Getenv("ZOOID_REPORT_SCREENSHOT"); out != "" {
		_ = os.WriteFile(out, shot, 0o644)
	}
	img, err := png.Decode(bytes.NewReader(shot))
	if err != nil {
		t.Fatalf("screenshot is not a PNG: %v", err)
	}
	colours := map[uint32]bool{}
	nonWhite, total := 0, 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			colours[(r>>8)<<16|(g>>8)<<8|bl>>8] = true
			if r>>8 < 240 || g>>8 < 240 || bl>>8 < 240 {
				nonWhite++
			}
			total++
		}
	}
	t.Logf("screenshot %dx%d: %d colours, %.1f%% not white", b.Dx(), b.Dy(), len(colours), 100*float64(nonWhite)/float64(total))
	if len(colours) < 50 || nonWhite*20 < total {
		t.Errorf("screenshot looks blank: %d colours, %d of %d pixels not white", len(colours), nonWhite, total)
	}
}
