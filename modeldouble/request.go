package modeldouble

import (
	"encoding/json"
	"strings"
	"time"
)

// API names a model API the double speaks; it is the last element of an
// agent's base URL.
type API string

// The APIs, as they appear in base URLs.
const (
	Anthropic API = "anthropic" // Messages: …/v1/messages
	OpenAI    API = "openai"    // Chat Completions and Responses: …/v1/chat/completions, …/v1/responses
	Gemini    API = "gemini"    // …/v1beta/models/{model}:generateContent
)

// Tool is a tool as the agent offered it to the model.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
}

// ToolResult is a tool's result as the agent sent it back to the model.
type ToolResult struct {
	// CallID is the id the double gave the call (empty where the API has
	// none, as Gemini's).
	CallID  string `json:"call_id,omitempty"`
	Name    string `json:"name,omitempty"`
	Text    string `json:"text"`
	IsError bool   `json:"is_error,omitempty"`
}

// Request is one model request as the double understood it, the same shape
// whatever API carried it.
type Request struct {
	Agent  string    `json:"agent"`
	API    API       `json:"api"`
	Path   string    `json:"path"`
	Model  string    `json:"model,omitempty"`
	Stream bool      `json:"stream"`
	At     time.Time `json:"at"`
	// System is the system prompt (instructions), its parts joined by newlines.
	System string `json:"system,omitempty"`
	// Tools are the tools offered to the model; a request offering none is
	// housekeeping and takes no step.
	Tools []Tool `json:"tools,omitempty"`
	// Prompt is the text of the conversation's last user prompt (not a tool
	// result), without the agent's own <system-reminder> blocks.
	Prompt string `json:"prompt,omitempty"`
	// ToolResults are the tool results that follow the last model answer in
	// the conversation: what the model is told its last calls returned.
	ToolResults []ToolResult `json:"tool_results,omitempty"`
	// Step is the index of the script step that answered, or -1.
	Step int `json:"step"`
	// jsonSchema is the schema of the JSON answer the request asks for, if
	// it asks for one: housekeeping is answered with a value of it.
	jsonSchema json.RawMessage
	// namespaces maps an offered tool's one name to the namespace and name
	// the agent gave it (OpenAI Responses namespaces: codex's MCP servers).
	namespaces map[string][2]string
	// Answer says what the double answered ("call …", "say …", "HTTP 429",
	// "housekeeping", "no step left").
	Answer string `json:"answer"`
}

// promptText keeps what a human or the daemon wrote of a user message:
// Claude Code prepends <system-reminder> blocks of its own.
func promptText(parts []string) string {
	var keep []string
	for _, p := range parts {
		t := strings.TrimSpace(p)
		if t == "" || strings.HasPrefix(t, "<system-reminder>") {
			continue
		}
		keep = append(keep, p)
	}
	return strings.Join(keep, "\n")
}

// textOf reads content that is a string or a list of {type: text, text}
// parts (Anthropic's and OpenAI's shapes for the same thing).
func textOf(raw json.RawMessage) []string {
	if len(raw) == 0 {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []string{s}
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return nil
	}
	var out []string
	for _, p := range parts {
		if p.Text != "" {
			out = append(out, p.Text)
		}
	}
	return out
}
