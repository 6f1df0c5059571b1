package report

import (
	"fmt"
	"html/template"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/zooid-dev/zooid/zooid/trace"
)

// Write renders runs as one HTML page to w.
func Write(w io.Writer, title string, runs ...Run) error {
	p := pageView{Title: title}
	for i, r := range runs {
		p.Runs = append(p.Runs, buildRun(i, r))
	}
	if err := page.Execute(w, p); err != nil {
		return fmt.Errorf("rendering the report: %w", err)
	}
	return nil
}

type pageView struct {
	Title string
	Runs  []runView
}

type runView struct {
	Title, Status string
	Failed        bool
	Rooms         []roomView
	// Diffs are the run's divergences, each linked to where it shows.
	Diffs []diffView
}

type diffView struct {
	Text   string
	Anchor string
}

type roomView struct {
	Name   string
	Anchor string
	Items  []*itemView
	// Turns are turns no shown event triggered (internal wakes).
	Turns []*turnView
	Diffs []diffView
}

type itemView struct {
	Anchor, Sender, Time, Type, Text, Label, Relation string
	Agent                                             bool
	Decision                                          string
	Notes                                             []string
	// TaskOf links a task thread's root to the turn that started it.
	TaskOf   string
	Turns    []*turnView
	Replies  []*itemView
	Diverges []string
	// RepliesDiverge opens the thread: a divergence is inside it.
	RepliesDiverge bool
	thread         string
}

type turnView struct {
	Anchor, Agent, Prompt, End string
	Fresh                      bool
	Steps                      []stepView
}

type stepView struct {
	Kind, Title, Args, Result, Error string
	// Link, when set, is an anchor the step points at (a task thread).
	Link string
}

var idRE = regexp.MustCompile(`[$!][A-Za-z0-9._~:/+=-]+`)

// buildRun lays run n out: threads under their roots, turns under the events
// that triggered them, steps in the order the trace has them.
func buildRun(n int, r Run) runView {
	rv := runView{Title: r.Title, Status: r.Status, Failed: strings.HasPrefix(r.Status, "fail") || len(r.Diff) > 0}
	anchors := map[string]string{}
	anchor := func(id string) string {
		a, ok := anchors[id]
		if !ok {
			a = fmt.Sprintf("r%d-e%d", n, len(anchors))
			anchors[id] = a
		}
		return a
	}
	turnN := 0
	placed := make([]bool, len(r.Diff))
	for ri, room := range r.Rooms {
		rm := roomView{Name: room.Name, Anchor: fmt.Sprintf("r%d-room%d", n, ri)}
		byID := map[string]*itemView{}
		var all []*itemView
		for _, e := range room.Events {
			it := &itemView{Anchor: anchor(e.ID), Sender: e.Sender, Agent: e.Agent, Type: e.Type, Text: e.Text,
				Label: e.Label, Relation: e.Relation, thread: e.Thread}
			if !e.Time.IsZero() {
				it.Time = e.Time.UTC().Format(time.TimeOnly)
			}
			if e.Type == "" || e.Type == "m.room.message" {
				it.Type = e.MsgType
			}
			byID[e.ID] = it
			all = append(all, it)
		}
		// The trace: decisions, turns and their steps.
		current := map[string]*turnView{}
		var pending []string
		taskCaller := map[string]string{}
		for _, rec := range room.Trace {
			switch {
			case rec.Start != nil:
				note := "daemon started"
				if rec.Start.Restart {
					note = "daemon restarted"
				}
				if len(rec.Start.Agents) > 0 {
					note += " with " + strings.Join(rec.Start.Agents, ", ")
				}
				pending = append(pending, note)
			case rec.Event != nil:
				it := byID[string(rec.Event.ID)]
				if it == nil {
					continue
				}
				it.Notes = append(it.Notes, pending...)
				pending = nil
				if len(rec.Event.Woke) > 0 {
					var ws []string
					for _, w := range rec.Event.Woke {
						ws = append(ws, w.Agent+" ("+w.Why+")")
					}
					it.Decision = "woke " + strings.Join(ws, ", ")
				} else if rec.Event.Nobody != "" {
					it.Decision = "woke nobody (" + rec.Event.Nobody + ")"
				}
				if d := rec.Event.Decision.String(); d != "" {
					it.Decision += "; " + d
				}
			case rec.Prompt != nil:
				t := &turnView{Anchor: fmt.Sprintf("r%d-t%d", n, turnN), Agent: rec.Prompt.Agent, Prompt: rec.Prompt.Text, Fresh: rec.Prompt.Fresh}
				turnN++
				current[rec.Session] = t
				trigger := string(rec.Prompt.Trigger)
				if trigger == "" {
					trigger = rec.Prompt.Turn
				}
				if it := byID[trigger]; it != nil {
					it.Turns = append(it.Turns, t)
				} else {
					rm.Turns = append(rm.Turns, t)
				}
			case rec.Tool != nil:
				if t := current[rec.Session]; t != nil {
					t.Steps = append(t.Steps, stepView{Kind: "tool", Title: rec.Tool.Tool, Args: sized(rec.Tool.Args, rec.Tool.ArgsSize),
						Result: sized(rec.Tool.Result, rec.Tool.ResultSize), Error: rec.Tool.Error})
				}
			case rec.Task != nil:
				ts := rec.Task
				title := ts.Step + " for " + ts.Agent
				if ts.Status != "" {
					title += ": " + ts.Status
				}
				if ts.Reason != "" {
					title += " (" + ts.Reason + ")"
				}
				if t := current[rec.Session]; t != nil && ts.Step != trace.StepClosed && ts.Step != trace.StepReported {
					st := stepView{Kind: "task", Title: title, Result: ts.Output}
					if ts.Thread != "" {
						st.Link = anchor(string(ts.Thread))
						taskCaller[string(ts.Thread)] = t.Anchor
					}
					t.Steps = append(t.Steps, st)
				} else if it := byID[string(ts.Thread)]; it != nil {
					it.Notes = append(it.Notes, title)
				}
			case rec.Post != nil:
				if t := current[rec.Session]; t != nil && rec.Session != "" {
					st := stepView{Kind: "post", Title: "posted " + rec.Post.MsgType, Result: sized(rec.Post.Text, rec.Post.TextSize), Error: rec.Post.Error}
					if rec.Post.ID != "" {
						st.Link = anchor(string(rec.Post.ID))
					}
					t.Steps = append(t.Steps, st)
				}
			case rec.Agent != nil:
				if t := current[rec.Session]; t != nil {
					t.Steps = append(t.Steps, stepView{Kind: "agent", Title: "agent " + rec.Agent.What, Error: rec.Agent.Error})
				}
			case rec.TurnEnd != nil:
				if t := current[rec.Session]; t != nil {
					t.End = rec.TurnEnd.Stop
					if rec.TurnEnd.Error != "" {
						t.End += " " + rec.TurnEnd.Error
					}
					delete(current, rec.Session)
				}
			}
		}
		for id, caller := range taskCaller {
			if it := byID[id]; it != nil {
				it.TaskOf = caller
			}
		}
		// Divergences: on the event (or thread) the first id they name.
		for i, d := range r.Diff {
			if placed[i] || len(r.Rooms) > 1 && d.Room != room.Name && d.Room != room.ID {
				continue
			}
			dv := diffView{Text: d.String()}
			for _, id := range idRE.FindAllString(d.What+" "+d.Stream, -1) {
				if it := byID[id]; it != nil {
					it.Diverges = append(it.Diverges, d.Stream+": "+d.What)
					dv.Anchor = it.Anchor
					break
				}
			}
			if dv.Anchor == "" {
				dv.Anchor = rm.Anchor
				rm.Diffs = append(rm.Diffs, dv)
			}
			placed[i] = true
			rv.Diffs = append(rv.Diffs, dv)
		}
		// Threads under their roots.
		for _, it := range all {
			if root := byID[it.thread]; it.thread != "" && root != nil && root != it {
				root.Replies = append(root.Replies, it)
				if len(it.Diverges) > 0 {
					root.RepliesDiverge = true
				}
				continue
			}
			rm.Items = append(rm.Items, it)
		}
		rv.Rooms = append(rv.Rooms, rm)
	}
	for i, d := range r.Diff {
		if !placed[i] {
			rv.Diffs = append(rv.Diffs, diffView{Text: d.String()})
		}
	}
	return rv
}

// sized says how big a bounded field was before the trace cut it.
func sized(s string, size int) string {
	if size > 0 {
		return fmt.Sprintf("%s … (cut; %d bytes in all)", s, size)
	}
	return s
}

var page = template.Must(template.New("page").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body{font:14px/1.45 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
header{background:#1d3557;color:#fff;padding:12px 20px}
header h1{margin:0;font-size:20px}
main{padding:12px 20px}
section.run{background:#fff;border:1px solid #d5dae3;border-radius:6px;margin:0 0 18px;padding:10px 16px}
section.run>h2{margin:4px 0 8px;font-size:17px}
.status{font-size:13px;padding:1px 8px;border-radius:10px;background:#d8f3dc;color:#1b4332;margin-left:8px}
.status.failed{background:#ffd6d6;color:#8a1c1c}
.diffs{border-left:4px solid #d62828;background:#fff0f0;padding:6px 10px;margin:8px 0}
.diffs li{font-family:ui-monospace,monospace;font-size:12px}
.room>h3{font-size:15px;margin:12px 0 6px;color:#1d3557}
ol.timeline{list-style:none;margin:0;padding:0 0 0 12px;border-left:3px solid #a8dadc}
li.event{margin:6px 0;padding:6px 10px;background:#fbfcfd;border:1px solid #e3e7ee;border-radius:5px}
li.event.agent{background:#eef6ff;border-color:#bcd7f5}
li.event.diverges{border:2px solid #d62828;background:#fff5f5}
.meta{font-size:12px;color:#5c6677}
.sender{font-weight:600;color:#1d2330}
.agent-badge{font-size:11px;background:#457b9d;color:#fff;border-radius:3px;padding:0 5px;margin-left:4px}
.label{font-family:ui-monospace,monospace;font-size:11px;color:#6a4c93;margin-left:6px}
.text{white-space:pre-wrap;word-break:break-word;margin:2px 0}
.decision{font-size:12px;color:#2a6f97}
.note{font-size:12px;color:#7f5539}
.divergence{font-size:12px;color:#b00020;font-weight:600}
details.thread{margin:4px 0 0 8px}
details.thread>summary{cursor:pointer;color:#1d3557;font-size:12px}
details.thread.diverges>summary{color:#b00020;font-weight:600}
.turn{margin:4px 0 0 10px;padding:4px 8px;border-left:3px solid #457b9d;background:#f3f8fc;font-size:12px}
.turn .prompt{white-space:pre-wrap;color:#333}
.step{margin:2px 0 0 6px;font-family:ui-monospace,monospace;font-size:11.5px;white-space:pre-wrap;word-break:break-word}
.step .err{color:#b00020}
.toolbar button{margin-right:6px}
</style></head>
<body>
<header><h1>{{.Title}}</h1></header>
<main>
<p class="toolbar"><button type="button" id="expand-all">Expand all threads</button><button type="button" id="collapse-all">Collapse all</button></p>
{{range .Runs}}<section class="run">
<h2>{{.Title}}{{if .Status}}<span class="status{{if .Failed}} failed{{end}}">{{.Status}}</span>{{end}}</h2>
{{if .Diffs}}<div class="diffs"><strong>Divergences</strong><ul>{{range .Diffs}}<li>{{if .Anchor}}<a href="#{{.Anchor}}" class="difflink">{{.Text}}</a>{{else}}{{.Text}}{{end}}</li>{{end}}</ul></div>{{end}}
{{range .Rooms}}<div class="room" id="{{.Anchor}}"><h3>{{.Name}}</h3>
{{if .Diffs}}<div class="diffs"><ul>{{range .Diffs}}<li>{{.Text}}</li>{{end}}</ul></div>{{end}}
<ol class="timeline">{{range .Items}}{{template "item" .}}{{end}}</ol>
{{range .Turns}}{{template "turn" .}}{{end}}
</div>{{end}}
</section>{{end}}
</main>
<script>
(function(){
  function all(open){document.querySelectorAll('details.thread').forEach(function(d){d.open=open;});}
  document.getElementById('expand-all').addEventListener('click',function(){all(true);});
  document.getElementById('collapse-all').addEventListener('click',function(){all(false);});
  function reveal(){
    var id=decodeURIComponent(location.hash.slice(1)); if(!id) return;
    var el=document.getElementById(id);
    for(var p=el;p;p=p.parentElement){if(p.tagName==='DETAILS'){p.open=true;}}
    if(el){el.scrollIntoView();}
  }
  window.addEventListener('hashchange',reveal); reveal();
})();
</script>
</body></html>
{{define "item"}}<li class="event{{if .Agent}} agent{{end}}{{if .Diverges}} diverges{{end}}" id="{{.Anchor}}">
<div class="meta"><span class="sender">{{.Sender}}</span>{{if .Agent}}<span class="agent-badge">agent</span>{{end}} {{.Time}} {{.Type}}{{if .Label}}<span class="label">{{.Label}}</span>{{end}}{{if .Relation}} · {{.Relation}}{{end}}{{if .TaskOf}} · <a href="#{{.TaskOf}}" class="caller">started by its caller's turn</a>{{end}}</div>
{{range .Notes}}<div class="note">{{.}}</div>{{end}}
<div class="text">{{.Text}}</div>
{{if .Decision}}<div class="decision">{{.Decision}}</div>{{end}}
{{range .Diverges}}<div class="divergence">diverges: {{.}}</div>{{end}}
{{range .Turns}}{{template "turn" .}}{{end}}
{{if .Replies}}<details class="thread{{if .RepliesDiverge}} diverges{{end}}"{{if .RepliesDiverge}} open{{end}}><summary>{{len .Replies}} {{if eq (len .Replies) 1}}reply{{else}}replies{{end}} in thread</summary>
<ol class="timeline">{{range .Replies}}{{template "item" .}}{{end}}</ol></details>{{end}}
</li>{{end}}
{{define "turn"}}<div class="turn" id="{{.Anchor}}"><div><strong>{{.Agent}}</strong> turn{{if .Fresh}} (fresh process){{end}}{{if .End}} · ended: {{.End}}{{end}}</div>
<div class="prompt">{{.Prompt}}</div>
{{range .Steps}}<div class="step step-{{.Kind}}">{{.Kind}} {{if .Link}}<a href="#{{.Link}}">{{.Title}}</a>{{else}}{{.Title}}{{end}}{{if .Args}} {{.Args}}{{end}}{{if .Result}}
→ {{.Result}}{{end}}{{if .Error}}
<span class="err">error: {{.Error}}</span>{{end}}</div>{{end}}
</div>{{end}}
`))
