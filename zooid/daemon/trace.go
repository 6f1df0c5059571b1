package daemon

import (
	"fmt"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/router"
	"github.com/zooid-dev/zooid/zooid/trace"
)

// openTrace turns the flight recorder on when zooid.yaml (or --trace) asks for
// it. The writer is given every token of the config to scrub, though nothing
// the daemon records carries one.
func (d *Daemon) openTrace() error {
	d.trace = trace.Off
	tc := d.opts.Config.Trace
	if tc == nil || tc.Dir == "" {
		return nil
	}
	w, err := trace.Open(trace.Options{Dir: tc.Dir, MaxFileSize: tc.MaxFileSize, MaxFiles: tc.MaxFiles, Secrets: d.secrets(), Logger: d.log.With("component", "trace")})
	if err != nil {
		return fmt.Errorf("opening trace: %w", err)
	}
	d.traceW, d.trace = w, w
	if d.opts.TraceTap != nil {
		d.trace = tapped{w, d.opts.TraceTap}
	}
	return nil
}

// tapped hands each record to the writer, then to the tap.
type tapped struct {
	trace.Recorder
	tap func(trace.Record)
}

func (t tapped) Record(r trace.Record) {
	t.Recorder.Record(r)
	t.tap(r)
}

// traceStarts writes a start record in each bound room: the first record of
// this run there, marked a restart when the room's trace already had one.
func (d *Daemon) traceStarts() {
	if d.traceW == nil {
		return
	}
	type room struct {
		alias  string
		agents []string
	}
	rooms := map[id.RoomID]*room{}
	var order []id.RoomID
	for _, a := range d.opts.Config.Agents {
		if a.Matrix == nil {
			continue
		}
		for _, r := range a.Matrix.Rooms {
			rid, ok := d.transport.RoomID(r)
			if !ok {
				continue
			}
			if rooms[rid] == nil {
				rooms[rid] = &room{alias: string(r)}
				order = append(order, rid)
			}
			rooms[rid].agents = append(rooms[rid].agents, a.Name)
		}
	}
	for _, rid := range order {
		r := rooms[rid]
		d.trace.Record(trace.Record{Kind: trace.KindStart, Room: rid, Start: &trace.Start{Alias: r.alias, Agents: r.agents, Restart: d.traceW.Existed(rid)}})
	}
}

// traceEvent is the record of one inbound event and the router's decision on
// it, as the router made it.
func (d *Daemon) traceEvent(ev *event.Event, msg router.Message, dec router.Decision) trace.Record {
	if !d.trace.Enabled() {
		return trace.Record{}
	}
	e := &trace.Event{ID: ev.ID, Sender: ev.Sender, Type: ev.Type.Type, MsgType: msg.MsgType, Thread: msg.ThreadRoot, Text: msg.Body, Nobody: dec.Why,
		Decision: &trace.Decision{Reset: dec.Reset, Recall: dec.Recall, TaskRoot: dec.TaskRoot}}
	for _, w := range dec.Wakes {
		key := sessionKey{agent: w.Agent, room: w.Room, thread: w.ThreadRoot}
		e.Woke = append(e.Woke, trace.Wake{Agent: w.Agent, Thread: w.ThreadRoot, Session: key.String(), Why: w.Why})
	}
	return trace.Record{Kind: trace.KindEvent, Room: ev.RoomID, Event: e}
}

func tracePrompt(key sessionKey, req turnRequest, fresh bool) trace.Record {
	return trace.Record{Kind: trace.KindPrompt, Room: key.room, Session: key.String(),
		Prompt: &trace.Prompt{Agent: key.agent, Turn: req.id, Trigger: req.trigger, Fresh: fresh, Text: req.text}}
}

func traceTurnEnd(key sessionKey, req turnRequest, stop string, err error) trace.Record {
	return trace.Record{Kind: trace.KindTurnEnd, Room: key.room, Session: key.String(),
		TurnEnd: &trace.TurnEnd{Agent: key.agent, Turn: req.id, Stop: stop, Error: errText(err)}}
}

func traceAgent(key sessionKey, what string, err error) trace.Record {
	return trace.Record{Kind: trace.KindAgent, Room: key.room, Session: key.String(),
		Agent: &trace.AgentEnd{Agent: key.agent, What: what, Error: errText(err)}}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
