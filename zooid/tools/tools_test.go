package tools

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"maunium.net/go/mautrix/id"
)

// recRooms records the validated input each Rooms method receives.
type recRooms struct {
	unavailableRooms
	limit  int
	before string
	thread id.EventID
	room   string
	text   string
	calls  int
}

func (r *recRooms) History(_ context.Context, _ Caller, limit int, before string) (MessagePage, error) {
	r.calls++
	r.limit, r.before = limit, before
	return MessagePage{}, nil
}

func (r *recRooms) ThreadHistory(_ context.Context, _ Caller, thread id.EventID, limit int, before string) (MessagePage, error) {
	r.calls++
	r.thread, r.limit, r.before = thread, limit, before
	return MessagePage{Messages: []Message{{ID: "$a", Sender: "@u:x", Text: "hi", Timestamp: "t"}}}, nil
}

func (r *recRooms) Send(_ context.Context, _ Caller, room string, thread id.EventID, text string) (SendResult, error) {
	r.calls++
	r.room, r.thread, r.text = room, thread, text
	return SendResult{EventID: "$new", ThreadID: thread}, nil
}

type recTasks struct {
	req     StartRequest
	summary string
	handoff HandoffRequest
}

func (t *recTasks) Handoff(_ context.Context, _ Caller, req HandoffRequest) (HandoffResult, error) {
	t.handoff = req
	return HandoffResult{Status: HandoffStarted}, nil
}

func (t *recTasks) Start(_ context.Context, _ Caller, req StartRequest) (StartResult, error) {
	t.req = req
	return StartResult{Notify: req.Notify}, nil
}

func (t *recTasks) Complete(_ context.Context, _ Caller, summary string) (CompleteResult, error) {
	t.summary = summary
	return CompleteResult{Status: CompleteRecorded}, nil
}

func call(t *testing.T, b Backends, kind SessionKind, name, args string) (any, *Error) {
	t.Helper()
	res, terr, _ := Call(context.Background(), b, Caller{Agent: "a", Kind: kind}, name, json.RawMessage(args))
	return res, terr
}

func TestGating(t *testing.T) {
	names := func(ts []Tool) map[string]bool {
		m := map[string]bool{}
		for _, t := range ts {
			m[t.Name] = true
		}
		return m
	}
	conv, task := names(Offered(Conversation)), names(Offered(TaskAssignee))
	if len(conv) != 9 || !conv[StartTaskThreads] || conv[CompleteTask] || !conv[Handoff] {
		t.Fatalf("conversation offered %v", conv)
	}
	if len(task) != 9 || task[StartTaskThreads] || !task[CompleteTask] || !task[Handoff] {
		t.Fatalf("task assignee offered %v", task)
	}
	member := names(Offered(TaskThreadMember))
	if len(member) != 7 || member[StartTaskThreads] || member[CompleteTask] || member[Handoff] {
		t.Fatalf("task thread member offered %v", member)
	}
	for _, n := range []string{GetRecentThreads, GetThreadHistory, GetHistory, GetMembers, GetRoomInfo, GetRooms, SendMessage} {
		if !conv[n] || !task[n] || !member[n] {
			t.Errorf("%s not offered to every kind", n)
		}
	}
	_, terr := call(t, Backends{Tasks: &recTasks{}}, TaskAssignee, StartTaskThreads, `{"tasks":[{"agent":"b","prompt":"p"}]}`)
	if terr == nil || terr.Code != CodeUnknownTool {
		t.Fatalf("start_task_threads from an assignee: %v", terr)
	}
	_, terr = call(t, Backends{Tasks: &recTasks{}}, Conversation, CompleteTask, `{"summary":"x"}`)
	if terr == nil || terr.Code != CodeUnknownTool {
		t.Fatalf("complete_task from a conversation: %v", terr)
	}
	_, terr = call(t, Backends{Tasks: &recTasks{}}, TaskThreadMember, Handoff, `{"agent":"b","prompt":"p"}`)
	if terr == nil || terr.Code != CodeUnknownTool {
		t.Fatalf("handoff from a task thread member: %v", terr)
	}
}

// TestHandoffValidation: zooid_handoff refuses a missing agent, an empty or
// oversized prompt and unknown properties before the backend hears of it, and
// hands the backend the trimmed agent name.
func TestHandoffValidation(t *testing.T) {
	rec := &recTasks{}
	b := Backends{Tasks: rec}
	for _, args := range []string{
		`{"prompt":"p"}`,
		`{"agent":"  ","prompt":"p"}`,
		`{"agent":"b","prompt":"  "}`,
		`{"agent":"b","prompt":"p","room":"!r:x"}`,
	} {
		if _, terr := call(t, b, Conversation, Handoff, args); terr == nil || terr.Code != CodeInvalidArgument {
			t.Errorf("%s: got %v, want invalid_argument", args, terr)
		}
	}
	big := `{"agent":"b","prompt":"` + strings.Repeat("x", 48*1024) + `"}`
	if _, terr := call(t, b, Conversation, Handoff, big); terr == nil || terr.Code != CodeTooLarge {
		t.Errorf("oversized prompt: got %v, want too_large", terr)
	}
	if rec.handoff != (HandoffRequest{}) {
		t.Fatalf("the backend heard of a refused call: %+v", rec.handoff)
	}
	if _, terr := call(t, b, TaskAssignee, Handoff, `{"agent":" b ","prompt":"check it"}`); terr != nil {
		t.Fatal(terr)
	}
	if rec.handoff != (HandoffRequest{Agent: "b", Prompt: "check it"}) {
		t.Fatalf("backend got %+v", rec.handoff)
	}
}

func TestSchemasRefuseUnknownAndNameNoCaller(t *testing.T) {
	if len(Manifest()) != 10 {
		t.Fatalf("manifest has %d tools", len(Manifest()))
	}
	for _, s := range Manifest() {
		var sch struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Additional *bool                      `json:"additionalProperties"`
		}
		if err := json.Unmarshal(s.InputSchema, &sch); err != nil {
			t.Fatalf("%s: schema: %v", s.Name, err)
		}
		if sch.Type != "object" || sch.Additional == nil || *sch.Additional {
			t.Errorf("%s: schema must be an object refusing unknown properties", s.Name)
		}
		for p := range sch.Properties {
			if s.Name == Handoff && p == "agent" {
				// The contract's one exception: it names the callee, never
				// the caller, who comes from the connection as everywhere.
				continue
			}
			switch p {
			case "session_id", "agent", "agent_name", "token", "room_id":
				t.Errorf("%s takes %q: no tool says who is calling", s.Name, p)
			}
		}
		if s.Description == "" {
			t.Errorf("%s has no description", s.Name)
		}
	}
}

func TestLimitsAndValidation(t *testing.T) {
	r := &recRooms{}
	b := Backends{Rooms: r}
	if _, terr := call(t, b, Conversation, GetHistory, `{}`); terr != nil || r.limit != 50 {
		t.Fatalf("default limit: %v %d", terr, r.limit)
	}
	if _, terr := call(t, b, Conversation, GetHistory, `{"limit":500,"before":"c"}`); terr != nil || r.limit != 200 || r.before != "c" {
		t.Fatalf("clamped limit: %v %d %q", terr, r.limit, r.before)
	}
	calls := r.calls
	for _, args := range []string{`{"limit":0}`, `{"limit":-3}`, `{"limit":"ten"}`, `{"limit":1.5}`, `{"room_id":"!x"}`, `[1]`, `{"limit":1} {}`} {
		_, terr := call(t, b, Conversation, GetHistory, args)
		if terr == nil || terr.Code != CodeInvalidArgument {
			t.Errorf("%s: want invalid_argument, got %v", args, terr)
		}
	}
	if _, terr := call(t, b, Conversation, GetThreadHistory, `{}`); terr == nil || terr.Code != CodeInvalidArgument {
		t.Errorf("thread_id missing: %v", terr)
	}
	if _, terr := call(t, b, Conversation, GetThreadHistory, `{"thread_id":"abc"}`); terr == nil || !strings.Contains(terr.Error(), "invalid_argument: thread_id") {
		t.Errorf("bad thread_id: %v", terr)
	}
	if r.calls != calls {
		t.Fatalf("backend called with invalid input")
	}
	res, terr := call(t, b, Conversation, GetThreadHistory, `{"thread_id":"$root","limit":3}`)
	if terr != nil || r.thread != "$root" || r.limit != 3 || len(res.(MessagePage).Messages) != 1 {
		t.Fatalf("thread history: %v %+v", terr, r)
	}
}

func TestSendValidation(t *testing.T) {
	r := &recRooms{}
	b := Backends{Rooms: r}
	for _, args := range []string{`{"text":"hi"}`, `{"room":"general","text":"hi"}`, `{"room":"!r:x","text":"  "}`, `{"room":"!r:x","text":"hi","thread_id":"nope"}`, `{"room":"!r:x","text":"hi","as":"@b:x"}`} {
		if _, terr := call(t, b, Conversation, SendMessage, args); terr == nil || terr.Code != CodeInvalidArgument {
			t.Errorf("%s: want invalid_argument, got %v", args, terr)
		}
	}
	res, terr := call(t, b, Conversation, SendMessage, `{"room":"#general:x","thread_id":"$t","text":"hello"}`)
	if terr != nil || r.room != "#general:x" || r.thread != "$t" || r.text != "hello" || res.(SendResult).EventID != "$new" {
		t.Fatalf("send: %v %+v", terr, r)
	}
}

func TestTaskValidation(t *testing.T) {
	tk := &recTasks{}
	b := Backends{Tasks: tk}
	for _, args := range []string{`{"tasks":[]}`, `{}`, `{"tasks":[{"agent":"b"}]}`, `{"tasks":[{"agent":"b","prompt":"p"}],"notify":"all"}`, `{"tasks":[{"agent":"b","prompt":"p","x":1}]}`} {
		if _, terr := call(t, b, Conversation, StartTaskThreads, args); terr == nil || terr.Code != CodeInvalidArgument {
			t.Errorf("%s: want invalid_argument, got %v", args, terr)
		}
	}
	if _, terr := call(t, b, Conversation, StartTaskThreads, `{"tasks":[{"agent":"b","prompt":"p"}]}`); terr != nil || tk.req.Notify != NotifyCaller || len(tk.req.Tasks) != 1 {
		t.Fatalf("start: %v %+v", terr, tk.req)
	}
	if _, terr := call(t, b, TaskAssignee, CompleteTask, `{"summary":""}`); terr == nil || terr.Code != CodeInvalidArgument {
		t.Fatalf("empty summary: %v", terr)
	}
	if _, terr := call(t, b, TaskAssignee, CompleteTask, `{"summary":"done"}`); terr != nil || tk.summary != "done" {
		t.Fatalf("complete: %v", terr)
	}
}

func TestBackendErrorsDoNotLeak(t *testing.T) {
	e := AsError(context.DeadlineExceeded)
	if e.Code != CodeUnavailable {
		t.Fatalf("code %q", e.Code)
	}
	e = AsError(&Error{Code: CodeNotFound, Message: "m"})
	if e.Error() != "not_found: m" {
		t.Fatalf("got %q", e.Error())
	}
	e = AsError(errString("GET http://hs/_matrix?access_token=secret failed"))
	if strings.Contains(e.Error(), "secret") {
		t.Fatalf("leaked %q", e.Error())
	}
}

type errString string

func (e errString) Error() string { return string(e) }
