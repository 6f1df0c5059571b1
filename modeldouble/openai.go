package modeldouble

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// openai is OpenAI's Chat Completions and Responses APIs (platform.openai.com
// API reference): Responses is what codex calls, Chat Completions what most
// OpenAI-compatible clients (opencode's among them) call.
type openai struct{}

func (openai) endpoint(method, rest string) string {
	if method != http.MethodPost {
		return ""
	}
	switch {
	case strings.HasSuffix(rest, "/chat/completions"):
		return endpointTurn
	case strings.HasSuffix(rest, "/responses"):
		return endpointResponses
	}
	return ""
}

func (openai) decode(endpoint, _ string, body []byte, r *Request) error {
	if endpoint == endpointResponses {
		return decodeResponses(body, r)
	}
	var req struct {
		Model    string `json:"model"`
		Stream   bool   `json:"stream"`
		Messages []struct {
			Role       string          `json:"role"`
			Content    json.RawMessage `json:"content"`
			ToolCallID string          `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
		Tools []struct {
			Function struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return fmt.Errorf("not a Chat Completions request: %w", err)
	}
	if len(req.Messages) == 0 {
		return fmt.Errorf("messages: at least one message is required")
	}
	r.Model, r.Stream = req.Model, req.Stream
	for _, t := range req.Tools {
		r.Tools = append(r.Tools, Tool{Name: t.Function.Name, Description: t.Function.Description, Schema: t.Function.Parameters})
	}
	names := map[string]string{}
	var system []string
	for _, m := range req.Messages {
		switch m.Role {
		case "system", "developer":
			system = append(system, textOf(m.Content)...)
		case "user":
			r.ToolResults = nil
			if p := promptText(textOf(m.Content)); p != "" {
				r.Prompt = p
			}
		case "assistant":
			r.ToolResults = nil
			for _, c := range m.ToolCalls {
				names[c.ID] = c.Function.Name
			}
		case "tool":
			r.ToolResults = append(r.ToolResults, ToolResult{CallID: m.ToolCallID, Name: names[m.ToolCallID], Text: strings.Join(textOf(m.Content), "\n")})
		}
	}
	r.System = strings.Join(system, "\n")
	return nil
}

// decodeResponses reads a Responses request: instructions, and input items
// (messages, function calls and their outputs).
func decodeResponses(body []byte, r *Request) error {
	var req struct {
		Model        string          `json:"model"`
		Stream       bool            `json:"stream"`
		Instructions string          `json:"instructions"`
		Input        json.RawMessage `json:"input"`
		Tools        []struct {
			responsesTool
			// Tools are a namespace's own (codex offers its MCP servers'
			// tools so, each server a namespace).
			Tools []responsesTool `json:"tools"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return fmt.Errorf("not a Responses request: %w", err)
	}
	r.Model, r.Stream, r.System = req.Model, req.Stream, req.Instructions
	for _, t := range req.Tools {
		if t.Type == "namespace" {
			for _, u := range t.Tools {
				if u.Name != "" {
					r.Tools = append(r.Tools, Tool{Name: r.namespaced(t.Name, u.Name), Description: u.Description, Schema: u.Parameters})
				}
			}
			continue
		}
		if t.Name != "" {
			r.Tools = append(r.Tools, Tool{Name: t.Name, Description: t.Description, Schema: t.Parameters})
		}
	}
	var s string
	if json.Unmarshal(req.Input, &s) == nil {
		r.Prompt = s
		return nil
	}
	var items []struct {
		Type      string          `json:"type"`
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		CallID    string          `json:"call_id"`
		Name      string          `json:"name"`
		Namespace string          `json:"namespace"`
		Output    json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(req.Input, &items); err != nil {
		return fmt.Errorf("input: neither a string nor a list of items: %w", err)
	}
	names := map[string]string{}
	var system []string
	if r.System != "" {
		system = append(system, r.System)
	}
	for _, it := range items {
		switch {
		case it.Type == "function_call":
			r.ToolResults = nil
			names[it.CallID] = r.namespaced(it.Namespace, it.Name)
		case it.Type == "function_call_output":
			r.ToolResults = append(r.ToolResults, ToolResult{CallID: it.CallID, Name: names[it.CallID], Text: strings.Join(textOf(it.Output), "\n")})
		case it.Role == "system" || it.Role == "developer":
			system = append(system, textOf(it.Content)...)
		case it.Role == "user":
			r.ToolResults = nil
			if p := promptText(textOf(it.Content)); p != "" {
				r.Prompt = p
			}
		case it.Role == "assistant":
			r.ToolResults = nil
		}
	}
	r.System = strings.Join(system, "\n")
	return nil
}

// responsesTool is a tool of a Responses request.
type responsesTool struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// namespaced is a namespace's tool by one name, as codex named MCP tools
// before namespaces (mcp__zooid + zooid_x: mcp__zooid__zooid_x), which is
// what the script and the steps see; a tool of no namespace keeps its name.
// The request remembers the pair, so a call of it is answered in the
// namespace (see unnamespaced).
func (r *Request) namespaced(namespace, name string) string {
	if namespace == "" {
		return name
	}
	joined := namespace + "__" + name
	if r.namespaces == nil {
		r.namespaces = map[string][2]string{}
	}
	r.namespaces[joined] = [2]string{namespace, name}
	return joined
}

// unnamespaced splits a tool's one name back into namespace and own name
// ("" and the name for a tool of no namespace).
func (r *Request) unnamespaced(tool string) (namespace, name string) {
	if p, ok := r.namespaces[tool]; ok {
		return p[0], p[1]
	}
	return "", tool
}

func (o openai) write(w http.ResponseWriter, endpoint string, r *Request, a reply, delay time.Duration, cut bool) {
	if endpoint == endpointResponses {
		o.writeResponses(w, r, a, delay, cut)
		return
	}
	id := fmt.Sprintf("chatcmpl-%d", time.Now().UnixNano())
	created := time.Now().Unix()
	finish := "stop"
	msg := map[string]any{"role": "assistant", "content": a.text}
	var calls []any
	if a.call != "" {
		finish = "tool_calls"
		calls = []any{map[string]any{"index": 0, "id": a.callID, "type": "function",
			"function": map[string]any{"name": a.call, "arguments": string(a.args)}}}
		msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": calls}
	}
	usage := map[string]int{"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
	if !r.Stream {
		writeBody(w, map[string]any{"id": id, "object": "chat.completion", "created": created, "model": r.Model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage}, delay, cut)
		return
	}
	chunk := func(delta map[string]any, finish any) sse {
		return sse{data: map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": r.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}}}
	}
	events := []sse{chunk(map[string]any{"role": "assistant", "content": ""}, nil)}
	if a.call != "" {
		events = append(events, chunk(map[string]any{"tool_calls": calls}, nil))
	} else {
		for _, c := range chunks(a.text) {
			events = append(events, chunk(map[string]any{"content": c}, nil))
		}
	}
	events = append(events, chunk(map[string]any{}, finish),
		sse{data: map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": r.Model, "choices": []any{}, "usage": usage}},
		sse{data: "[DONE]"})
	writeSSE(w, events, delay, cut)
}

func (openai) writeResponses(w http.ResponseWriter, r *Request, a reply, delay time.Duration, cut bool) {
	respID := fmt.Sprintf("resp_%d", time.Now().UnixNano())
	itemID := "item_" + respID
	var item map[string]any
	if a.call != "" {
		ns, name := r.unnamespaced(a.call)
		item = map[string]any{"type": "function_call", "id": itemID, "call_id": a.callID, "name": name,
			"arguments": string(a.args), "status": "completed"}
		if ns != "" {
			item["namespace"] = ns
		}
	} else {
		item = map[string]any{"type": "message", "id": itemID, "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": a.text, "annotations": []any{}}}}
	}
	usage := map[string]any{"input_tokens": 1, "output_tokens": 1, "total_tokens": 2,
		"input_tokens_details": map[string]int{"cached_tokens": 0}, "output_tokens_details": map[string]int{"reasoning_tokens": 0}}
	response := func(status string, output []any) map[string]any {
		m := map[string]any{"id": respID, "object": "response", "created_at": time.Now().Unix(), "status": status,
			"model": r.Model, "output": output}
		if status == "completed" {
			m["usage"] = usage
		}
		return m
	}
	if !r.Stream {
		writeBody(w, response("completed", []any{item}), delay, cut)
		return
	}
	seq := 0
	ev := func(name string, m map[string]any) sse {
		m["type"] = name
		m["sequence_number"] = seq
		seq++
		return sse{name: name, data: m}
	}
	events := []sse{
		ev("response.created", map[string]any{"response": response("in_progress", []any{})}),
		ev("response.in_progress", map[string]any{"response": response("in_progress", []any{})}),
	}
	if a.call != "" {
		added := map[string]any{}
		for k, v := range item {
			added[k] = v
		}
		added["arguments"], added["status"] = "", "in_progress"
		events = append(events,
			ev("response.output_item.added", map[string]any{"output_index": 0, "item": added}),
			ev("response.function_call_arguments.delta", map[string]any{"output_index": 0, "item_id": itemID, "delta": string(a.args)}),
			ev("response.function_call_arguments.done", map[string]any{"output_index": 0, "item_id": itemID, "arguments": string(a.args)}))
	} else {
		events = append(events,
			ev("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{
				"type": "message", "id": itemID, "role": "assistant", "status": "in_progress", "content": []any{}}}),
			ev("response.content_part.added", map[string]any{"output_index": 0, "item_id": itemID, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}}))
		for _, c := range chunks(a.text) {
			events = append(events, ev("response.output_text.delta", map[string]any{"output_index": 0, "item_id": itemID, "content_index": 0, "delta": c}))
		}
		events = append(events,
			ev("response.output_text.done", map[string]any{"output_index": 0, "item_id": itemID, "content_index": 0, "text": a.text}),
			ev("response.content_part.done", map[string]any{"output_index": 0, "item_id": itemID, "content_index": 0,
				"part": map[string]any{"type": "output_text", "text": a.text, "annotations": []any{}}}))
	}
	events = append(events,
		ev("response.output_item.done", map[string]any{"output_index": 0, "item": item}),
		ev("response.completed", map[string]any{"response": response("completed", []any{item})}))
	writeSSE(w, events, delay, cut)
}

func (openai) errorBody(status int, msg string) any {
	kind := map[int]string{http.StatusBadRequest: "invalid_request_error", http.StatusNotFound: "not_found",
		http.StatusTooManyRequests: "rate_limit_exceeded"}[status]
	if kind == "" {
		kind = "server_error"
	}
	return map[string]any{"error": map[string]any{"message": msg, "type": kind, "code": kind}}
}

func (openai) countBody() any { return map[string]int{"input_tokens": 1} }
