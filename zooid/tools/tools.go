package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/zevent"
)

// Tool names: the contract of behaviour §3.
const (
	GetRecentThreads = "zooid_get_recent_threads"
	GetThreadHistory = "zooid_get_thread_history"
	GetHistory       = "zooid_get_history"
	GetMembers       = "zooid_get_members"
	GetRoomInfo      = "zooid_get_room_info"
	GetRooms         = "zooid_get_rooms"
	SendMessage      = "zooid_send_message"
	StartTaskThreads = "zooid_start_task_threads"
	CompleteTask     = "zooid_complete_task"
	Handoff          = "zooid_handoff"
)

// Paging limits of the three history tools.
const (
	DefaultLimit = 50
	MaxLimit     = 200
	// MaxPageBytes bounds the JSON of one page: a page of long messages ends
	// before the entry that would take it past this, so it holds fewer than
	// limit entries (at least one), and has_more and next_before go on from
	// there. Claude Code cuts an MCP result past 100,000 characters (its
	// MAX_MCP_OUTPUT_TOKENS, 25,000 tokens, times four), and the cut would
	// take the page's next_before with it: the agent could not page on.
	MaxPageBytes = 64 << 10
)

// Gating says which sessions are offered a tool.
type Gating string

const (
	// Always tools are offered to every session.
	Always Gating = "always"
	// ConversationOnly tools are offered to ordinary conversation sessions only.
	ConversationOnly Gating = "conversation"
	// TaskAssigneeOnly tools are offered to assignee sessions of open task threads only.
	TaskAssigneeOnly Gating = "task_assignee"
	// HandoffCapable tools are offered to the sessions that own their turn's
	// work: conversations and assignees of open tasks. A task thread's other
	// sessions (a handoff callee, an assignee whose task closed) are not: their
	// work belongs to the task, and a callee hands on by @mentioning, which the
	// task's chain of handoffs tracks.
	HandoffCapable Gating = "handoff"
)

// Offers reports whether a session of kind is offered a tool gated by g.
func (g Gating) Offers(kind SessionKind) bool {
	switch g {
	case Always:
		return true
	case ConversationOnly:
		return kind == Conversation
	case TaskAssigneeOnly:
		return kind == TaskAssignee
	case HandoffCapable:
		return kind == Conversation || kind == TaskAssignee
	}
	return false
}

// ToolSpec is the data definition of one tool: what the MCP server lists and what
// the pi extension generator reads.
type ToolSpec struct {
	Name        string          `json:"name"`
	Title       string          `json:"title"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	Gating      Gating          `json:"gating"`
	ReadOnly    bool            `json:"read_only"`
}

// Backends are what the handlers run over.
type Backends struct {
	Rooms Rooms
	Tasks Tasks
}

// Tool is a spec plus its handler. Args is the raw JSON object of the call (nil or
// "null" means no arguments). The result is a JSON-encodable record; a model-facing
// failure is an *Error (use AsError for any other error).
type Tool struct {
	ToolSpec
	Handle func(ctx context.Context, b Backends, c Caller, args json.RawMessage) (any, error)
}

const pagingProps = `
    "limit": {"type": "integer", "minimum": 1, "default": 50, "description": "Maximum entries on this page (default 50; values above 200 are clamped to 200). A page of long messages holds fewer: a page stays within 64 KiB (a longer message comes on a page of its own), and has_more says whether there is more."},
    "before": {"type": "string", "description": "Opaque cursor: the next_before of the previous page of this same tool, passed back untouched. Omit for the newest page."}`

func schema(props string, required ...string) json.RawMessage {
	req := "[]"
	if len(required) > 0 {
		req = `["` + strings.Join(required, `","`) + `"]`
	}
	raw := `{"type":"object","properties":{` + props + `},"required":` + req + `,"additionalProperties":false}`
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(raw)); err != nil {
		panic(fmt.Sprintf("tools: bad schema %s: %v", raw, err))
	}
	return buf.Bytes()
}

var all = []Tool{
	{
		ToolSpec: ToolSpec{
			Name:  GetRecentThreads,
			Title: "Recent threads",
			Description: "Overview of the current room: its top-level messages and thread roots, newest first, each with reply_count and last_activity_at (thread replies are not listed). " +
				"Start here to see what is going on, then drill into one conversation with zooid_get_thread_history. " +
				"For older entries pass the page's next_before back as before, untouched (it is an opaque cursor); has_more says whether another page exists.",
			InputSchema: schema(pagingProps),
			Gating:      Always,
			ReadOnly:    true,
		},
		Handle: func(ctx context.Context, b Backends, c Caller, args json.RawMessage) (any, error) {
			var in pageArgs
			limit, err := decodePage(args, &in, &in)
			if err != nil {
				return nil, err
			}
			page, err := needRooms(b).RecentThreads(ctx, c, limit, in.Before)
			if err != nil {
				return nil, err
			}
			if page.Threads == nil {
				page.Threads = []ThreadOverview{}
			}
			return page, nil
		},
	},
	{
		ToolSpec: ToolSpec{
			Name:  GetThreadHistory,
			Title: "Thread history",
			Description: "Messages of one thread of the current room: the root, then its replies in chronological order. " +
				"thread_id is a thread root's event id (from zooid_get_recent_threads, or the thread_id of a message). " +
				"The first page holds the root plus the newest replies; pass next_before back as before, untouched, for older replies (the root is only on the first page).",
			InputSchema: schema(`"thread_id": {"type": "string", "description": "Event id of the thread root, e.g. $abc..."},`+pagingProps, "thread_id"),
			Gating:      Always,
			ReadOnly:    true,
		},
		Handle: func(ctx context.Context, b Backends, c Caller, args json.RawMessage) (any, error) {
			var in struct {
				ThreadID string `json:"thread_id"`
				pageArgs
			}
			limit, err := decodePage(args, &in, &in.pageArgs)
			if err != nil {
				return nil, err
			}
			thread, err := eventID("thread_id", in.ThreadID, true)
			if err != nil {
				return nil, err
			}
			page, err := needRooms(b).ThreadHistory(ctx, c, thread, limit, in.Before)
			if err != nil {
				return nil, err
			}
			if page.Messages == nil {
				page.Messages = []Message{}
			}
			return page, nil
		},
	},
	{
		ToolSpec: ToolSpec{
			Name:  GetHistory,
			Title: "Room history",
			Description: "Every message of the current room, top-level and thread replies together, chronological within a page; replies carry thread_id. " +
				"The first page is the newest messages; pass next_before back as before, untouched, to go further back in time. " +
				"Prefer zooid_get_recent_threads for an overview.",
			InputSchema: schema(pagingProps),
			Gating:      Always,
			ReadOnly:    true,
		},
		Handle: func(ctx context.Context, b Backends, c Caller, args json.RawMessage) (any, error) {
			var in pageArgs
			limit, err := decodePage(args, &in, &in)
			if err != nil {
				return nil, err
			}
			page, err := needRooms(b).History(ctx, c, limit, in.Before)
			if err != nil {
				return nil, err
			}
			if page.Messages == nil {
				page.Messages = []Message{}
			}
			return page, nil
		},
	},
	{
		ToolSpec: ToolSpec{
			Name:        GetMembers,
			Title:       "Room members",
			Description: "Joined members of the current room: id, display name, and whether each is a Zooid agent, this daemon's or another's (with its agent_name, and its workstation when it has one: mention it as @workstation.name). Use it to find whom to @mention.",
			InputSchema: schema(""),
			Gating:      Always,
			ReadOnly:    true,
		},
		Handle: func(ctx context.Context, b Backends, c Caller, args json.RawMessage) (any, error) {
			if err := decode(args, &struct{}{}); err != nil {
				return nil, err
			}
			ms, err := needRooms(b).Members(ctx, c)
			if err != nil {
				return nil, err
			}
			if ms == nil {
				ms = []Member{}
			}
			return MembersResult{Members: ms}, nil
		},
	},
	{
		ToolSpec: ToolSpec{
			Name:        GetRoomInfo,
			Title:       "Current room",
			Description: "The room this conversation is in: its id, name and transport (matrix or http).",
			InputSchema: schema(""),
			Gating:      Always,
			ReadOnly:    true,
		},
		Handle: func(ctx context.Context, b Backends, c Caller, args json.RawMessage) (any, error) {
			if err := decode(args, &struct{}{}); err != nil {
				return nil, err
			}
			return needRooms(b).RoomInfo(ctx, c)
		},
	},
	{
		ToolSpec: ToolSpec{
			Name:        GetRooms,
			Title:       "My rooms",
			Description: "Every room you are a member of ({id, name, transport}): exactly the valid targets of zooid_send_message.",
			InputSchema: schema(""),
			Gating:      Always,
			ReadOnly:    true,
		},
		Handle: func(ctx context.Context, b Backends, c Caller, args json.RawMessage) (any, error) {
			if err := decode(args, &struct{}{}); err != nil {
				return nil, err
			}
			rs, err := needRooms(b).Rooms(ctx, c)
			if err != nil {
				return nil, err
			}
			if rs == nil {
				rs = []RoomInfo{}
			}
			return RoomsResult{Rooms: rs}, nil
		},
	},
	{
		ToolSpec: ToolSpec{
			Name:  SendMessage,
			Title: "Send a message",
			Description: "Post a message as yourself (a Matrix notice, so it does not ping anyone's notifications) into a room you are a member of (see zooid_get_rooms): " +
				"room is the target room's id or alias, thread_id a thread root in that room, omit thread_id for a new top-level message. " +
				"Fire-and-forget: it returns the new event_id and nothing comes back. Your normal reply already goes to the current thread; use this for other threads or rooms. " +
				"To hand work to another agent and get its result back, use zooid_handoff (in this thread) or zooid_start_task_threads (a thread of its own) instead. " +
				"A text over 49152 bytes (48 KiB) is refused with too_large and not posted, never split: send long text in several calls.",
			InputSchema: schema(`"room": {"type": "string", "description": "Target room id (!abc:server) or alias (#name:server, or #name on your own server); must be one of zooid_get_rooms."},
    "thread_id": {"type": "string", "description": "Event id of a thread root in the target room; omit for a top-level message."},
    "text": {"type": "string", "minLength": 1, "description": "Message text (Markdown allowed), at most 49152 bytes."}`, "room", "text"),
			Gating: Always,
		},
		Handle: func(ctx context.Context, b Backends, c Caller, args json.RawMessage) (any, error) {
			var in struct {
				Room     string `json:"room"`
				ThreadID string `json:"thread_id"`
				Text     string `json:"text"`
			}
			if err := decode(args, &in); err != nil {
				return nil, err
			}
			room := strings.TrimSpace(in.Room)
			if room == "" {
				return nil, Errorf(CodeInvalidArgument, "room is required: a room id or alias from zooid_get_rooms")
			}
			if !strings.HasPrefix(room, "!") && !strings.HasPrefix(room, "#") {
				return nil, Errorf(CodeInvalidArgument, "room %q is neither a room id (!…) nor an alias (#…)", room)
			}
			thread, err := eventID("thread_id", in.ThreadID, false)
			if err != nil {
				return nil, err
			}
			if strings.TrimSpace(in.Text) == "" {
				return nil, Errorf(CodeInvalidArgument, "text must not be empty")
			}
			if n := zevent.BodySize(in.Text); n > zevent.MaxBodyBytes {
				return nil, Errorf(CodeTooLarge, "text is %d bytes, over the %d-byte limit of one message (homeservers refuse events over 64 KiB); nothing was posted: send it as several zooid_send_message calls", n, zevent.MaxBodyBytes)
			}
			return needRooms(b).Send(ctx, c, room, thread, in.Text)
		},
	},
	{
		ToolSpec: ToolSpec{
			Name:  StartTaskThreads,
			Title: "Delegate tasks",
			Description: "Delegate work to other agents of this room: each task opens a new task thread in this room, posted by you and mentioning the assignee, who works on the prompt there. " +
				"results is index-aligned with tasks: started (with thread_id) or refused/failed with a reason. " +
				"With notify \"caller\" (default) each task's result comes back to you as a new turn: end your turn now and do not poll. With notify \"none\" nothing comes back; the thread is the result.",
			InputSchema: schema(`"tasks": {"type": "array", "minItems": 1, "description": "Tasks to start, in order.", "items": {"type": "object", "properties": {
        "agent": {"type": "string", "description": "The assignee's agent name (see agent_name in zooid_get_members); workstation.name for an agent of another workstation, whose daemon runs the task."},
        "prompt": {"type": "string", "minLength": 1, "description": "What the assignee should do; self-contained."}},
      "required": ["agent", "prompt"], "additionalProperties": false}},
    "notify": {"type": "string", "enum": ["caller", "none"], "default": "caller", "description": "caller: each result wakes you as a new turn; none: nothing comes back."}`, "tasks"),
			Gating: ConversationOnly,
		},
		Handle: func(ctx context.Context, b Backends, c Caller, args json.RawMessage) (any, error) {
			var in StartRequest
			if err := decode(args, &in); err != nil {
				return nil, err
			}
			if len(in.Tasks) == 0 {
				return nil, Errorf(CodeInvalidArgument, "tasks must hold at least one {agent, prompt}")
			}
			for i, t := range in.Tasks {
				if strings.TrimSpace(t.Agent) == "" {
					return nil, Errorf(CodeInvalidArgument, "tasks[%d].agent is required", i)
				}
				if strings.TrimSpace(t.Prompt) == "" {
					return nil, Errorf(CodeInvalidArgument, "tasks[%d].prompt must not be empty", i)
				}
			}
			switch in.Notify {
			case "":
				in.Notify = NotifyCaller
			case NotifyCaller, NotifyNone:
			default:
				return nil, Errorf(CodeInvalidArgument, "notify must be \"caller\" or \"none\", not %q", in.Notify)
			}
			if b.Tasks == nil {
				return nil, Errorf(CodeUnavailable, "task threads are not available in this daemon")
			}
			return b.Tasks.Start(ctx, c, in)
		},
	},
	{
		ToolSpec: ToolSpec{
			Name:  CompleteTask,
			Title: "Complete the task",
			Description: "Record the result of the task thread you were assigned: summary is what the delegating agent receives. The first recorded summary wins (already_recorded after that). " +
				"Recording does not end your turn. If you just end your turn instead, your last message becomes the result.",
			InputSchema: schema(`"summary": {"type": "string", "minLength": 1, "description": "The task's result for the delegating agent."}`, "summary"),
			Gating:      TaskAssigneeOnly,
		},
		Handle: func(ctx context.Context, b Backends, c Caller, args json.RawMessage) (any, error) {
			var in struct {
				Summary string `json:"summary"`
			}
			if err := decode(args, &in); err != nil {
				return nil, err
			}
			if strings.TrimSpace(in.Summary) == "" {
				return nil, Errorf(CodeInvalidArgument, "summary must not be empty")
			}
			if b.Tasks == nil {
				return nil, Errorf(CodeUnavailable, "task threads are not available in this daemon")
			}
			return b.Tasks.Complete(ctx, c, in.Summary)
		},
	},
	{
		ToolSpec: ToolSpec{
			Name:  Handoff,
			Title: "Hand off in this thread",
			Description: "Hand work to one other agent in THIS thread: the only way to involve another agent here. The daemon posts your prompt in this thread mentioning the agent, who works on it in its own session of the thread. " +
				"status is started, or refused with a reason (already_open: a handoff of yours is still outstanding; self; unknown_agent; not_in_room). " +
				"After started, end your turn now and do not poll: when the agent is really done (its turn ended and it is not still running tools or waiting on an agent it mentioned), you are woken once, in this session, with \"[handoff return] from <agent>\" and its final message.",
			InputSchema: schema(`"agent": {"type": "string", "description": "The other agent's name (see agent_name in zooid_get_members)."},
    "prompt": {"type": "string", "minLength": 1, "description": "What the agent should do; it reads this thread too."}`, "agent", "prompt"),
			Gating: HandoffCapable,
		},
		Handle: func(ctx context.Context, b Backends, c Caller, args json.RawMessage) (any, error) {
			var in HandoffRequest
			if err := decode(args, &in); err != nil {
				return nil, err
			}
			in.Agent = strings.TrimSpace(in.Agent)
			if in.Agent == "" {
				return nil, Errorf(CodeInvalidArgument, "agent is required: an agent_name from zooid_get_members")
			}
			if strings.TrimSpace(in.Prompt) == "" {
				return nil, Errorf(CodeInvalidArgument, "prompt must not be empty")
			}
			if n := zevent.BodySize(in.Prompt); n > zevent.MaxBodyBytes-1024 {
				return nil, Errorf(CodeTooLarge, "prompt is %d bytes, over the %d-byte limit of a handoff (one message with its header); nothing was posted", n, zevent.MaxBodyBytes-1024)
			}
			if b.Tasks == nil {
				return nil, Errorf(CodeUnavailable, "handoffs are not available in this daemon")
			}
			return b.Tasks.Handoff(ctx, c, in)
		},
	},
}

// All returns the ten tools in their listing order.
func All() []Tool { return append([]Tool(nil), all...) }

// Offered returns the tools a session of kind is offered: the seven read/post
// tools always, plus delegation for conversations or completion for assignees,
// and the handoff for both.
func Offered(kind SessionKind) []Tool {
	var out []Tool
	for _, t := range all {
		if t.Gating.Offers(kind) {
			out = append(out, t)
		}
	}
	return out
}

// Manifest returns the tool definitions as data, for generators (the pi extension).
func Manifest() []ToolSpec {
	out := make([]ToolSpec, len(all))
	for i, t := range all {
		out[i] = t.ToolSpec
	}
	return out
}

// Lookup finds a tool by name among those offered to kind.
func Lookup(kind SessionKind, name string) (Tool, bool) {
	for _, t := range all {
		if t.Name == name && t.Gating.Offers(kind) {
			return t, true
		}
	}
	return Tool{}, false
}

// Call runs the named tool for c with raw JSON arguments. A tool not offered to
// c.Kind is an unknown tool. Errors are always *Error (see AsError).
func Call(ctx context.Context, b Backends, c Caller, name string, args json.RawMessage) (any, *Error, error) {
	t, ok := Lookup(c.Kind, name)
	if !ok {
		return nil, Errorf(CodeUnknownTool, "no tool named %q", name), nil
	}
	res, err := t.Handle(ctx, b, c, args)
	if err != nil {
		var te *Error
		if errors.As(err, &te) {
			return nil, te, nil
		}
		return nil, AsError(err), err
	}
	return res, nil, nil
}

func needRooms(b Backends) Rooms {
	if b.Rooms == nil {
		return unavailableRooms{}
	}
	return b.Rooms
}

// decode parses a tool's arguments strictly: unknown properties and wrong types
// are input errors a model can correct.
func decode(args json.RawMessage, into any) error {
	trimmed := bytes.TrimSpace(args)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		trimmed = []byte("{}")
	}
	if trimmed[0] != '{' {
		return Errorf(CodeInvalidArgument, "arguments must be a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		var ute *json.UnmarshalTypeError
		switch {
		case errors.As(err, &ute):
			return Errorf(CodeInvalidArgument, "%s must be of type %s", ute.Field, ute.Type)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return Errorf(CodeInvalidArgument, "unknown property %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
		default:
			return Errorf(CodeInvalidArgument, "arguments are not valid JSON: %v", err)
		}
	}
	if _, err := dec.Token(); err != io.EOF {
		return Errorf(CodeInvalidArgument, "arguments must be a single JSON object")
	}
	return nil
}

// pageArgs are the paging arguments the three history tools share.
type pageArgs struct {
	Limit  *int   `json:"limit"`
	Before string `json:"before"`
}

// decodePage decodes a history tool's arguments into in, whose paging part is
// page, and returns the effective limit.
func decodePage(args json.RawMessage, in any, page *pageArgs) (int, error) {
	if err := decode(args, in); err != nil {
		return 0, err
	}
	return clampLimit(page.Limit)
}

func clampLimit(l *int) (int, error) {
	if l == nil {
		return DefaultLimit, nil
	}
	if *l < 1 {
		return 0, Errorf(CodeInvalidArgument, "limit must be at least 1, got %d", *l)
	}
	if *l > MaxLimit {
		return MaxLimit, nil
	}
	return *l, nil
}

func eventID(field, s string, required bool) (id.EventID, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		if required {
			return "", Errorf(CodeInvalidArgument, "%s is required", field)
		}
		return "", nil
	}
	if !strings.HasPrefix(s, "$") || len(s) < 2 || len(s) > 255 {
		return "", Errorf(CodeInvalidArgument, "%s %q is not an event id (they start with $)", field, s)
	}
	return id.EventID(s), nil
}

type unavailableRooms struct{}

var errNoRooms = Errorf(CodeUnavailable, "room reads are not available in this daemon")

func (unavailableRooms) RecentThreads(context.Context, Caller, int, string) (ThreadPage, error) {
	return ThreadPage{}, errNoRooms
}
func (unavailableRooms) ThreadHistory(context.Context, Caller, id.EventID, int, string) (MessagePage, error) {
	return MessagePage{}, errNoRooms
}
func (unavailableRooms) History(context.Context, Caller, int, string) (MessagePage, error) {
	return MessagePage{}, errNoRooms
}
func (unavailableRooms) Members(context.Context, Caller) ([]Member, error) { return nil, errNoRooms }
func (unavailableRooms) RoomInfo(context.Context, Caller) (RoomInfo, error) {
	return RoomInfo{}, errNoRooms
}
func (unavailableRooms) Rooms(context.Context, Caller) ([]RoomInfo, error) { return nil, errNoRooms }
func (unavailableRooms) Send(context.Context, Caller, string, id.EventID, string) (SendResult, error) {
	return SendResult{}, errNoRooms
}
