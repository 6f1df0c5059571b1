package modeldouble

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// anthropic is the Messages API (docs.anthropic.com, "Messages" and
// "Streaming Messages"): what Claude Code calls.
type anthropic struct{}

func (anthropic) endpoint(method, rest string) string {
	if method != http.MethodPost {
		return ""
	}
	switch {
	case strings.HasSuffix(rest, "/messages/count_tokens"):
		return endpointCount
	case strings.HasSuffix(rest, "/messages"):
		return endpointTurn
	}
	return ""
}

type anthropicBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

func (anthropic) decode(_, _ string, body []byte, r *Request) error {
	var req struct {
		Model    string          `json:"model"`
		Stream   bool            `json:"stream"`
		System   json.RawMessage `json:"system"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return fmt.Errorf("not a Messages request: %w", err)
	}
	if len(req.Messages) == 0 {
		return fmt.Errorf("messages: at least one message is required")
	}
	r.Model, r.Stream = req.Model, req.Stream
	r.System = strings.Join(textOf(req.System), "\n")
	for _, t := range req.Tools {
		r.Tools = append(r.Tools, Tool{Name: t.Name, Description: t.Description, Schema: t.InputSchema})
	}
	names := map[string]string{} // tool_use id → tool name
	for i, m := range req.Messages {
		var blocks []anthropicBlock
		if json.Unmarshal(m.Content, &blocks) != nil {
			// A plain string content is one text block.
			blocks = []anthropicBlock{{Type: "text", Text: strings.Join(textOf(m.Content), "")}}
		}
		last := i == len(req.Messages)-1
		var texts []string
		var results []ToolResult
		for _, b := range blocks {
			switch b.Type {
			case "text":
				texts = append(texts, b.Text)
			case "tool_use":
				names[b.ID] = b.Name
			case "tool_result":
				results = append(results, ToolResult{CallID: b.ToolUseID, Name: names[b.ToolUseID], Text: strings.Join(textOf(b.Content), "\n"), IsError: b.IsError})
			}
		}
		if m.Role != "user" {
			continue
		}
		if last {
			r.ToolResults = results
		}
		if p := promptText(texts); p != "" && len(results) == 0 {
			r.Prompt = p
		}
	}
	return nil
}

func (anthropic) write(w http.ResponseWriter, _ string, r *Request, a reply, delay time.Duration, cut bool) {
	msgID := fmt.Sprintf("msg_%d", time.Now().UnixNano())
	model := r.Model
	if model == "" {
		model = "modeldouble"
	}
	var block map[string]any
	stop := "end_turn"
	if a.call != "" {
		block = map[string]any{"type": "tool_use", "id": a.callID, "name": a.call, "input": a.args}
		stop = "tool_use"
	} else {
		block = map[string]any{"type": "text", "text": a.text}
	}
	usage := map[string]int{"input_tokens": 1, "output_tokens": 1}
	if !r.Stream {
		writeBody(w, map[string]any{
			"id": msgID, "type": "message", "role": "assistant", "model": model,
			"content": []any{block}, "stop_reason": stop, "stop_sequence": nil, "usage": usage,
		}, delay, cut)
		return
	}
	events := []sse{{"message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": msgID, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": usage,
	}}}}
	if a.call != "" {
		events = append(events,
			sse{"content_block_start", map[string]any{"type": "content_block_start", "index": 0,
				"content_block": map[string]any{"type": "tool_use", "id": a.callID, "name": a.call, "input": map[string]any{}}}},
			sse{"content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": string(a.args)}}})
	} else {
		events = append(events, sse{"content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "text", "text": ""}}})
		for _, c := range chunks(a.text) {
			events = append(events, sse{"content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
				"delta": map[string]any{"type": "text_delta", "text": c}}})
		}
	}
	events = append(events,
		sse{"content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}},
		sse{"message_delta", map[string]any{"type": "message_delta",
			"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]int{"output_tokens": 1}}},
		sse{"message_stop", map[string]any{"type": "message_stop"}})
	writeSSE(w, events, delay, cut)
}

func (anthropic) errorBody(status int, msg string) any {
	kind := map[int]string{
		http.StatusBadRequest: "invalid_request_error", http.StatusNotFound: "not_found_error",
		http.StatusTooManyRequests: "rate_limit_error", 529: "overloaded_error",
	}[status]
	if kind == "" {
		kind = "api_error"
	}
	return map[string]any{"type": "error", "error": map[string]string{"type": kind, "message": msg}}
}

func (anthropic) countBody() any { return map[string]int{"input_tokens": 1} }
