package steps

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/zooid-dev/zooid/fakeagent"
)

// BenchmarkThreads200 measures what 200 threads of one agent cost (the
// scripted fake agent, each thread one mention answered "ok"), once all 200
// are answered: live agent processes, their resident memory in all, and the
// daemon's (run as its own process). "uncapped" sets max_processes to 1024,
// which is how the daemon behaved before the caps: one process per thread,
// alive until idle_timeout (30 minutes). Run with -benchtime=1x; docs/reliability.md
// has the figures.
func BenchmarkThreads200(b *testing.B) {
	for _, c := range []struct {
		name              string
		maxProcs, perProc int
	}{
		{"uncapped", 1024, 1},
		{"max_processes=4", 4, 1},
		{"max_processes=4,sessions_per_process=50", 4, 50},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				benchThreads(b, 200, c.maxProcs, c.perProc)
			}
		})
	}
}

func benchThreads(b *testing.B, threads, maxProcs, perProc int) {
	// Starting 200 agents at once on a loaded machine takes minutes: the
	// bounds are generous so the uncapped case is measured, not timed out.
	r := &runner{backend: fakeBackend{}, log: slog.New(slog.DiscardHandler), wait: 5 * time.Minute, turnTimeout: 10 * time.Minute}
	ctx := context.Background()
	w := newWorld(r)
	defer w.close()
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	must(w.stepUsers(ctx, `"ori"`))
	must(w.stepAgents(ctx, `"agent-a"`, `"#ops"`, ""))
	must(w.stepAgentMaxProcs("agent-a", strconv.Itoa(maxProcs)))
	must(w.stepDaemonMaxProcs(strconv.Itoa(max(maxProcs, 16))))
	must(w.stepPerProc("agent-a", strconv.Itoa(perProc)))
	must(w.stepQueueNotice("600"))
	must(w.startAsProcess(ctx))
	began := time.Now()
	must(w.stepMentionsMany(ctx, "ori", "agent-a", strconv.Itoa(threads), "#ops"))
	must(w.stepEachThreadGets(ctx, "", "ok", "agent-a"))
	took := time.Since(began)
	n, agentsKiB, err := w.ctl.LiveProcesses("agent-a")
	must(err)
	peak, err := w.ctl.PeakProcesses("agent-a")
	must(err)
	pid := strconv.Itoa(w.tw().proc.Pid())
	daemonKiB, err := fakeagent.ResidentKiB(pid)
	must(err)
	daemonPeakKiB, err := fakeagent.PeakResidentKiB(pid)
	must(err)
	b.ReportMetric(float64(n), "live-procs")
	b.ReportMetric(float64(peak), "peak-procs")
	b.ReportMetric(float64(agentsKiB)/1024, "agents-MiB")
	b.ReportMetric(float64(daemonKiB)/1024, "daemon-MiB")
	b.ReportMetric(float64(daemonPeakKiB)/1024, "daemon-peak-MiB")
	b.ReportMetric(took.Seconds(), "s-all-answered")
}
