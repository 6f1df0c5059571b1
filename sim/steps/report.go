package steps

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/cucumber/godog"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/sim/report"
	"github.com/zooid-dev/zooid/zooid/trace"
)

// reports collects each scenario's world for `zooid sim --report`.
type reports struct {
	mu   sync.Mutex
	runs []report.Run
}

func (rs *reports) add(r report.Run) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.runs = append(rs.runs, r)
}

// write renders every collected scenario, in the order of their titles, as
// one page.
func (rs *reports) write(path string) error {
	rs.mu.Lock()
	runs := slices.Clone(rs.runs)
	rs.mu.Unlock()
	slices.SortStableFunc(runs, func(a, b report.Run) int { return strings.Compare(a.Title, b.Title) })
	var b bytes.Buffer
	if err := report.Write(&b, fmt.Sprintf("zooid sim: %d scenarios", len(runs)), runs...); err != nil {
		return err
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing the report: %w", err)
	}
	return nil
}

// reportRun is the scenario's world as the report shows it: each room's
// messages read back from the homeserver (newest 500) and, when the
// scenario traced the daemon, the trace's records for the room. It is taken
// before teardown, while the homeserver is still leased; what can't be read
// is said in the status rather than failing the scenario.
func (w *world) reportRun(ctx context.Context, s *godog.Scenario, scenarioErr error) report.Run {
	run := report.Run{Title: s.Name + " (" + s.Uri + ")", Status: "passed"}
	if scenarioErr != nil {
		run.Status = "failed: " + scenarioErr.Error()
	}
	if w.lease == nil || len(w.humanSeq) == 0 {
		return run
	}
	ctx, cancel := w.waitCtx(ctx)
	defer cancel()
	var tr *trace.Trace
	if w.traceDir != "" {
		t, err := trace.Read(w.traceDir)
		if err != nil {
			run.Status += "; trace unreadable: " + err.Error()
		}
		tr = t
	}
	who := map[id.UserID]string{}
	agent := map[id.UserID]bool{}
	for _, name := range w.agentSeq {
		u := w.agentUser(name)
		who[u], agent[u] = name, true
	}
	for _, name := range w.humanSeq {
		who[w.humans[name].id] = name
	}
	for _, name := range w.roomSeq {
		r := w.rooms[name]
		if r.id == "" {
			continue
		}
		room := report.Room{Name: name, ID: string(r.id)}
		msgs, err := w.readRoom(ctx, r, 5)
		if err != nil {
			run.Status += "; " + err.Error()
		}
		for i := len(msgs) - 1; i >= 0; i-- {
			m := msgs[i]
			sender := who[m.sender]
			if sender == "" {
				sender = string(m.sender)
			}
			room.Events = append(room.Events, report.Event{ID: string(m.id), Sender: sender, Agent: agent[m.sender],
				Type: "m.room.message", MsgType: m.msgtype, Text: m.body, Thread: string(m.thread)})
		}
		if tr != nil {
			if tRoom, ok := tr.Room(r.id); ok {
				room.Trace = tRoom.Records
			}
		}
		run.Rooms = append(run.Rooms, room)
	}
	return run
}
