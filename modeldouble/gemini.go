package modeldouble

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// gemini is the Gemini API's generateContent and streamGenerateContent
// (ai.google.dev API reference): what gemini-cli calls with an API key.
type gemini struct{}

func (gemini) endpoint(method, rest string) string {
	if method != http.MethodPost {
		return ""
	}
	switch {
	case strings.HasSuffix(rest, ":generateContent"), strings.HasSuffix(rest, ":streamGenerateContent"):
		return endpointTurn
	case strings.HasSuffix(rest, ":countTokens"):
		return endpointCount
	}
	return ""
}

type geminiPart struct {
	Text         string `json:"text"`
	FunctionCall *struct {
		Name string `json:"name"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		ID       string          `json:"id"`
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
}

func (gemini) decode(_, rest string, body []byte, r *Request) error {
	var req struct {
		Contents []struct {
			Role  string       `json:"role"`
			Parts []geminiPart `json:"parts"`
		} `json:"contents"`
		SystemInstruction *struct {
			Parts []geminiPart `json:"parts"`
		} `json:"systemInstruction"`
		GenerationConfig struct {
			ResponseMimeType   string          `json:"responseMimeType"`
			ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
			ResponseSchema     json.RawMessage `json:"responseSchema"`
		} `json:"generationConfig"`
		Tools []struct {
			FunctionDeclarations []struct {
				Name                 string          `json:"name"`
				Description          string          `json:"description"`
				Parameters           json.RawMessage `json:"parameters"`
				ParametersJSONSchema json.RawMessage `json:"parametersJsonSchema"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return fmt.Errorf("not a generateContent request: %w", err)
	}
	if len(req.Contents) == 0 {
		return fmt.Errorf("contents: at least one content is required")
	}
	r.Stream = strings.HasSuffix(rest, ":streamGenerateContent")
	if gc := req.GenerationConfig; gc.ResponseMimeType == "application/json" {
		// gemini-cli's housekeeping (its model router's classifier) asks for
		// JSON of a schema and retries for a minute and a half until it gets it.
		r.jsonSchema = json.RawMessage("{}")
		for _, sc := range []json.RawMessage{gc.ResponseJSONSchema, gc.ResponseSchema} {
			if len(sc) > 0 {
				r.jsonSchema = sc
				break
			}
		}
	}
	if i := strings.LastIndex(rest, "/models/"); i >= 0 {
		r.Model = strings.SplitN(rest[i+len("/models/"):], ":", 2)[0]
	}
	if si := req.SystemInstruction; si != nil {
		var sys []string
		for _, p := range si.Parts {
			sys = append(sys, p.Text)
		}
		r.System = strings.Join(sys, "\n")
	}
	for _, t := range req.Tools {
		for _, f := range t.FunctionDeclarations {
			schema := f.ParametersJSONSchema
			if len(schema) == 0 {
				schema = f.Parameters
			}
			r.Tools = append(r.Tools, Tool{Name: f.Name, Description: f.Description, Schema: schema})
		}
	}
	for _, c := range req.Contents {
		var texts []string
		var results []ToolResult
		for _, p := range c.Parts {
			switch {
			case p.FunctionResponse != nil:
				text, isErr := geminiResultText(p.FunctionResponse.Response)
				results = append(results, ToolResult{CallID: p.FunctionResponse.ID, Name: p.FunctionResponse.Name, Text: text, IsError: isErr})
			case p.Text != "":
				texts = append(texts, p.Text)
			}
		}
		if c.Role == "model" {
			r.ToolResults = nil
			continue
		}
		if len(results) > 0 {
			r.ToolResults = append(r.ToolResults, results...)
			continue
		}
		r.ToolResults = nil
		if p := promptText(texts); p != "" {
			r.Prompt = p
		}
	}
	return nil
}

// geminiResultText reads a functionResponse's response: gemini-cli wraps a
// tool's text as {"output": "…"}, or a failed one's as {"error": "…"};
// anything else is kept as its JSON.
func geminiResultText(raw json.RawMessage) (text string, isError bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) == nil {
		for _, k := range []string{"output", "error", "content"} {
			if v, ok := m[k]; ok {
				if t := textOf(v); len(t) > 0 {
					return strings.Join(t, "\n"), k == "error"
				}
			}
		}
	}
	return string(raw), false
}

func (gemini) write(w http.ResponseWriter, _ string, r *Request, a reply, delay time.Duration, cut bool) {
	usage := map[string]int{"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2}
	chunk := func(parts []any, finish string) map[string]any {
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
		if finish != "" {
			cand["finishReason"] = finish
		}
		return map[string]any{"candidates": []any{cand}, "usageMetadata": usage, "modelVersion": r.Model}
	}
	var parts []any
	if a.call != "" {
		var args map[string]any
		_ = json.Unmarshal(a.args, &args)
		parts = []any{map[string]any{"functionCall": map[string]any{"id": a.callID, "name": a.call, "args": args}}}
	} else {
		parts = []any{map[string]any{"text": a.text}}
	}
	if !r.Stream {
		writeBody(w, chunk(parts, "STOP"), delay, cut)
		return
	}
	var events []sse
	if a.call != "" {
		events = []sse{{data: chunk(parts, "STOP")}}
	} else {
		cs := chunks(a.text)
		for i, c := range cs {
			finish := ""
			if i == len(cs)-1 {
				finish = "STOP"
			}
			events = append(events, sse{data: chunk([]any{map[string]any{"text": c}}, finish)})
		}
	}
	if cut && len(events) < 2 {
		// Something must be sent before the cut for it to be a cut stream.
		events = append([]sse{{data: chunk([]any{map[string]any{"text": ""}}, "")}}, events...)
	}
	writeSSE(w, events, delay, cut)
}

func (gemini) errorBody(status int, msg string) any {
	st := map[int]string{http.StatusBadRequest: "INVALID_ARGUMENT", http.StatusNotFound: "NOT_FOUND",
		http.StatusTooManyRequests: "RESOURCE_EXHAUSTED", http.StatusServiceUnavailable: "UNAVAILABLE"}[status]
	if st == "" {
		st = "INTERNAL"
	}
	return map[string]any{"error": map[string]any{"code": status, "message": msg, "status": st}}
}

func (gemini) countBody() any { return map[string]int{"totalTokens": 1} }
