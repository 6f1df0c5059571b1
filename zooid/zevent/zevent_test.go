package zevent_test

import (
	"encoding/json"
	"testing"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/zevent"
)

// received is a timeline event as a client library receives it: VeryRaw and Raw
// set, nothing parsed.
func received(t *testing.T, typ, content string) *event.Event {
	t.Helper()
	var ev event.Event
	js := `{"type":"` + typ + `","event_id":"$ev","room_id":"!r:hs","sender":"@a:hs","content":` + content + `}`
	if err := json.Unmarshal([]byte(js), &ev); err != nil {
		t.Fatalf("event %s: %v", js, err)
	}
	// As mautrix's syncer and appservice do: the class comes from where the event
	// was found (a room timeline), which a custom type's name can't say.
	ev.Type.Class = event.MessageEventType
	return &ev
}

// The wire names are behaviour.md's; this pins them so no rename goes unnoticed.
func TestWireFormat(t *testing.T) {
	cases := []struct {
		name    string
		content any
		want    string
	}{
		{"task root", zevent.TaskRootContent{
			MsgType: event.MsgText, Body: "@w:hs go", Mentions: &event.Mentions{UserIDs: []id.UserID{"@w:hs"}},
			ThreadStart: zevent.ThreadStart{Version: zevent.ThreadStartVersion, Assignee: "w", AttemptID: "a1",
				Parent: zevent.ThreadStartParent{Agent: "c", ThreadRoot: "$home", SessionKey: "k"}, Notify: "caller"},
		}, `{"msgtype":"m.text","body":"@w:hs go","m.mentions":{"user_ids":["@w:hs"]},"dev.zooid.thread_start":{"version":1,"assignee":"w","attempt_id":"a1","parent":{"agent":"c","thread_root":"$home","session_key":"k"},"notify":"caller"}}`},
		{"thread result", zevent.ThreadResultEventContent{
			ThreadResult: zevent.ThreadResult{Agent: "w", ThreadID: "$t", Status: "complete", Output: "done"},
			RelatesTo:    zevent.ThreadReply("$t", "$t"),
		}, `{"agent":"w","thread_id":"$t","status":"complete","output":"done","m.relates_to":{"rel_type":"m.thread","event_id":"$t","m.in_reply_to":{"event_id":"$t"},"is_falling_back":true}}`},
		{"result notice", zevent.ResultNoticeContent{
			MsgType: event.MsgNotice, Body: "Task for w", Mentions: &event.Mentions{},
			ThreadResult: zevent.ThreadResult{Agent: "w", ThreadID: "$t", Status: "failed", Reason: "no_result"},
		}, `{"msgtype":"m.notice","body":"Task for w","m.mentions":{},"dev.zooid.thread_result":{"agent":"w","thread_id":"$t","status":"failed","reason":"no_result"}}`},
		{"handoff", zevent.HandoffContent{
			MsgType: event.MsgNotice, Body: "@w:hs check it", Mentions: &event.Mentions{UserIDs: []id.UserID{"@w:hs"}},
			RelatesTo: zevent.ThreadReply("$t", "$t"),
			Handoff:   zevent.Handoff{Version: zevent.HandoffVersion, ID: "zh1", From: "c", To: "w"},
		}, `{"msgtype":"m.notice","body":"@w:hs check it","m.mentions":{"user_ids":["@w:hs"]},"m.relates_to":{"rel_type":"m.thread","event_id":"$t","m.in_reply_to":{"event_id":"$t"},"is_falling_back":true},"dev.zooid.handoff":{"version":1,"id":"zh1","from":"c","to":"w"}}`},
		{"handoff return", zevent.HandoffReturnContent{
			MsgType: event.MsgNotice, Body: "w returns to c", Mentions: &event.Mentions{},
			RelatesTo: zevent.ThreadReply("$t", "$t"),
			Return:    zevent.HandoffReturn{Version: zevent.HandoffVersion, ID: "zh1", From: "c", To: "w", Output: "all green"},
		}, `{"msgtype":"m.notice","body":"w returns to c","m.mentions":{},"m.relates_to":{"rel_type":"m.thread","event_id":"$t","m.in_reply_to":{"event_id":"$t"},"is_falling_back":true},"dev.zooid.handoff_return":{"version":1,"id":"zh1","from":"c","to":"w","output":"all green"}}`},
		{"session reset", zevent.SessionResetEventContent{RelatesTo: zevent.InThread("$t")},
			`{"m.relates_to":{"rel_type":"m.thread","event_id":"$t"}}`},
		{"error", zevent.ErrorEventContent{Agent: "w", Code: "agent_crashed", Error: "it died", ThreadID: "$t", RelatesTo: zevent.InThread("$t")},
			`{"agent":"w","code":"agent_crashed","error":"it died","thread_id":"$t","m.relates_to":{"rel_type":"m.thread","event_id":"$t"}}`},
	}
	for _, c := range cases {
		got, err := json.Marshal(c.content)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if string(got) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
	for typ, want := range map[event.Type]string{
		zevent.EventThreadResult: "dev.zooid.thread_result",
		zevent.EventSessionReset: "dev.zooid.session_reset",
		zevent.EventError:        "dev.zooid.error",
	} {
		if typ.Type != want || typ.Class != event.MessageEventType {
			t.Errorf("event type %+v, want message event %s", typ, want)
		}
	}
	if zevent.KeyHandoffReturn != "dev.zooid.handoff_return" {
		t.Errorf("handoff return key %q", zevent.KeyHandoffReturn)
	}
	if zevent.KeyThreadStart != "dev.zooid.thread_start" || zevent.KeyThreadResult != "dev.zooid.thread_result" {
		t.Errorf("content keys %q, %q", zevent.KeyThreadStart, zevent.KeyThreadResult)
	}
}

func TestParseRawYieldsZooidContents(t *testing.T) {
	rel := `"m.relates_to":{"rel_type":"m.thread","event_id":"$root"}`
	ev := received(t, "dev.zooid.thread_result", `{"agent":"w","thread_id":"$root","status":"partial",`+rel+`}`)
	if err := ev.Content.ParseRaw(ev.Type); err != nil {
		t.Fatal(err)
	}
	r, ok := ev.Content.Parsed.(*zevent.ThreadResultEventContent)
	if !ok || r.Status != "partial" || r.Agent != "w" || r.RelatesTo.GetThreadParent() != "$root" {
		t.Fatalf("parsed %T %+v", ev.Content.Parsed, ev.Content.Parsed)
	}

	ev = received(t, "dev.zooid.session_reset", `{`+rel+`}`)
	if err := ev.Content.ParseRaw(ev.Type); err != nil {
		t.Fatal(err)
	}
	if s, ok := ev.Content.Parsed.(*zevent.SessionResetEventContent); !ok || s.RelatesTo.GetThreadParent() != "$root" {
		t.Fatalf("parsed %T %+v", ev.Content.Parsed, ev.Content.Parsed)
	}

	ev = received(t, "dev.zooid.error", `{"agent":"w","code":"timeout","error":"slow","thread_id":"$root",`+rel+`}`)
	if err := ev.Content.ParseRaw(ev.Type); err != nil {
		t.Fatal(err)
	}
	if e, ok := ev.Content.Parsed.(*zevent.ErrorEventContent); !ok || e.Code != "timeout" || e.ThreadID != "$root" {
		t.Fatalf("parsed %T %+v", ev.Content.Parsed, ev.Content.Parsed)
	}
}

func TestThreadRoot(t *testing.T) {
	cases := []struct {
		name, typ, content string
		want               id.EventID
	}{
		{"thread reply", "m.room.message", `{"msgtype":"m.text","body":"x","m.relates_to":{"rel_type":"m.thread","event_id":"$root","is_falling_back":true,"m.in_reply_to":{"event_id":"$latest"}}}`, "$root"},
		{"top-level message", "m.room.message", `{"msgtype":"m.text","body":"x"}`, ""},
		{"plain reply is no thread", "m.room.message", `{"msgtype":"m.text","body":"x","m.relates_to":{"m.in_reply_to":{"event_id":"$other"}}}`, ""},
		{"edit is no thread", "m.room.message", `{"msgtype":"m.text","body":"x","m.relates_to":{"rel_type":"m.replace","event_id":"$orig"}}`, ""},
		{"reset in a thread", "dev.zooid.session_reset", `{"m.relates_to":{"rel_type":"m.thread","event_id":"$root"}}`, "$root"},
		{"malformed relation", "m.room.message", `{"msgtype":"m.text","body":"x","m.relates_to":"$root"}`, ""},
		{"relation of the wrong shape", "m.room.message", `{"msgtype":"m.text","body":"x","m.relates_to":{"rel_type":"m.thread","event_id":7}}`, ""},
	}
	for _, c := range cases {
		ev := received(t, c.typ, c.content)
		if got := zevent.ThreadRoot(ev); got != c.want {
			t.Errorf("%s, raw: ThreadRoot = %q, want %q", c.name, got, c.want)
		}
		if err := ev.Content.ParseRaw(ev.Type); err == nil {
			if got := zevent.ThreadRoot(ev); got != c.want {
				t.Errorf("%s, parsed: ThreadRoot = %q, want %q", c.name, got, c.want)
			}
		}
	}
	built := &event.Event{Content: event.Content{Raw: map[string]any{
		"m.relates_to": map[string]any{"rel_type": "m.thread", "event_id": "$root"},
	}}}
	if got := zevent.ThreadRoot(built); got != "$root" {
		t.Errorf("event built in memory: ThreadRoot = %q, want $root", got)
	}
	if got := zevent.ThreadRoot(nil); got != "" {
		t.Errorf("nil event: ThreadRoot = %q", got)
	}
}

func TestThreadStartOf(t *testing.T) {
	ev := received(t, "m.room.message", `{"msgtype":"m.text","body":"x","dev.zooid.thread_start":{"version":1,"assignee":"w","attempt_id":"a1","parent":{"agent":"c","session_key":"k"},"notify":"none"}}`)
	ts, ok := zevent.ThreadStartOf(ev)
	if !ok || ts.Assignee != "w" || ts.AttemptID != "a1" || ts.Parent.Agent != "c" || ts.Notify != "none" {
		t.Fatalf("ThreadStartOf = %+v, %v", ts, ok)
	}
	// A mistyped field does not hide that the event is a task root.
	ev = received(t, "m.room.message", `{"msgtype":"m.text","body":"x","dev.zooid.thread_start":{"version":"one","assignee":"w"}}`)
	if ts, ok := zevent.ThreadStartOf(ev); !ok || ts.Assignee != "w" {
		t.Fatalf("mistyped version: ThreadStartOf = %+v, %v", ts, ok)
	}
	for _, content := range []string{`{"msgtype":"m.text","body":"x"}`, `{"dev.zooid.thread_start":"w"}`, `{"dev.zooid.thread_start":null}`} {
		if ts, ok := zevent.ThreadStartOf(received(t, "m.room.message", content)); ok {
			t.Errorf("%s: ThreadStartOf = %+v, true; want no task root", content, ts)
		}
	}
	if !zevent.HasThreadResult(received(t, "m.room.message", `{"msgtype":"m.notice","body":"x","dev.zooid.thread_result":{}}`)) {
		t.Error("notice with dev.zooid.thread_result: HasThreadResult = false")
	}
	if zevent.HasThreadResult(received(t, "m.room.message", `{"msgtype":"m.notice","body":"x"}`)) {
		t.Error("plain notice: HasThreadResult = true")
	}
}

// dev.zooid.agent marks a user as a Zooid agent only when that user set it
// (state_key = sender) and it names an agent.
func TestAgentOf(t *testing.T) {
	state := func(sender, key, content string) *event.Event {
		var ev event.Event
		js := `{"type":"dev.zooid.agent","state_key":"` + key + `","event_id":"$s","room_id":"!r:hs","sender":"` + sender + `","content":` + content + `}`
		if err := json.Unmarshal([]byte(js), &ev); err != nil {
			t.Fatalf("event %s: %v", js, err)
		}
		return &ev
	}
	if zevent.StateAgent.Type != "dev.zooid.agent" || zevent.StateAgent.Class != event.StateEventType {
		t.Errorf("StateAgent = %+v, want state event dev.zooid.agent", zevent.StateAgent)
	}
	u, c, ok := zevent.AgentOf(state("@ci.architect:hs", "@ci.architect:hs", `{"name":"architect","workstation":"ci"}`))
	if !ok || u != "@ci.architect:hs" || c != (zevent.AgentContent{Name: "architect", Workstation: "ci"}) {
		t.Errorf("AgentOf(own) = %s, %+v, %v; want @ci.architect:hs, architect on ci", u, c, ok)
	}
	if _, _, ok := zevent.AgentOf(state("@mallory:hs", "@ci.architect:hs", `{"name":"architect"}`)); ok {
		t.Error("AgentOf accepted a state event set by another user")
	}
	if _, _, ok := zevent.AgentOf(state("@ci.architect:hs", "@ci.architect:hs", `{}`)); ok {
		t.Error("AgentOf accepted a withdrawn agent (no name)")
	}
	got, err := json.Marshal(zevent.AgentContent{Name: "architect", Workstation: "ci"})
	if err != nil || string(got) != `{"name":"architect","workstation":"ci"}` {
		t.Errorf("wire format %s, %v", got, err)
	}
}
