package daemon

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/router"
	"github.com/zooid-dev/zooid/zooid/trace"
)

func TestTurnTimeoutComesFromOptionsThenConfigThenDefault(t *testing.T) {
	for _, c := range []struct {
		opt, cfg, want time.Duration
	}{
		{0, 0, DefaultTurnTimeout},
		{0, 5 * time.Minute, 5 * time.Minute},
		{time.Second, 5 * time.Minute, time.Second},
	} {
		d, err := New(Options{Config: &config.Config{TurnTimeout: c.cfg}, TurnTimeout: c.opt})
		if err != nil {
			t.Fatal(err)
		}
		if d.opts.TurnTimeout != c.want {
			t.Errorf("options %s, config %s: turn timeout %s, want %s", c.opt, c.cfg, d.opts.TurnTimeout, c.want)
		}
	}
}

func TestCursorKeySurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	first, err := cursorKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	second, err := cursorKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 32 || string(first) != string(second) {
		t.Fatalf("cursor key changed across restarts: %x then %x", first, second)
	}
}

// Wakes happen in configuration order (the router's promise): the daemon must
// hand it its agents in zooid.yaml order, not in map order.
func TestRouterWakesInConfigurationOrder(t *testing.T) {
	cfg := &config.Config{}
	var users []id.UserID
	var names []string
	for i := range 24 {
		name := fmt.Sprintf("agent-%02d", 23-i) // not alphabetical either
		uid := id.NewUserID(name, "hs")
		names, users = append(names, name), append(users, uid)
		cfg.Agents = append(cfg.Agents, config.Agent{Name: name, Matrix: &config.AgentMatrix{UserID: uid, Rooms: []config.RoomRef{"#ops:hs"}}})
	}
	d, err := New(Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	r := router.New(d.routerAgents(func(id.UserID, config.RoomRef) (id.RoomID, bool) { return "!ops:hs", true }))
	slices.Reverse(users) // mention order must not matter either
	ev := &event.Event{Type: event.EventMessage, ID: "$1", RoomID: "!ops:hs", Sender: "@ori:hs", Content: event.Content{
		Parsed: &event.MessageEventContent{MsgType: event.MsgText, Body: "all of you", Mentions: &event.Mentions{UserIDs: users}},
		Raw:    map[string]any{"msgtype": "m.text", "body": "all of you"},
	}}
	_, dec := r.Decide(ev, nil) // a top-level mention asks no facts
	var got []string
	for _, w := range dec.Wakes {
		got = append(got, w.Agent)
	}
	if !slices.Equal(got, names) {
		t.Fatalf("wake order %v, want configuration order %v", got, names)
	}
}

// The header every new session's first prompt opens with, in its one shape.
func TestSessionHeaderShape(t *testing.T) {
	for _, c := range []struct {
		h    sessionHeader
		want string
	}{
		{sessionHeader{room: "!r:hs", alias: "#ops:hs", thread: "$root", from: "@ori:hs", fromName: "Ori"},
			"[zooid] room: #ops:hs (!r:hs) · thread: $root · from: Ori (@ori:hs)\n" +
				`[zooid] Read more of this thread with zooid_get_thread_history {"thread_id": "$root"}.`},
		{sessionHeader{room: "!r:hs", thread: "$root", catchUp: true},
			"[zooid] room: !r:hs · thread: $root · from: zooid\n" +
				`[zooid] This thread has messages from before this session: catch up with zooid_get_thread_history {"thread_id": "$root"}.`},
	} {
		if got := c.h.String(); got != c.want {
			t.Errorf("header\n%s\nwant\n%s", got, c.want)
		}
	}
}

// The trace records the router's reasons as the router gives them, so the two
// vocabularies must be one.
func TestRouterReasonsAreTheTraces(t *testing.T) {
	for r, tr := range map[string]string{
		router.WhyMention: trace.WhyMention, router.WhyTriggerAny: trace.WhyTriggerAny,
		router.WhyAddressee: trace.WhyAddressee, router.WhyTaskAssignee: trace.WhyTaskAssignee,
		router.WhyNotMessage: trace.WhyNotMessage, router.WhyReset: trace.WhyReset,
		router.WhyTaskResult: trace.WhyTaskResult, router.WhyAgentPost: trace.WhyAgentPost,
		router.WhyNotAddressed: trace.WhyNotNotified, router.WhyEncrypted: trace.WhyEncrypted,
	} {
		if r != tr {
			t.Errorf("the router says %q where the trace says %q", r, tr)
		}
	}
}
