package modeldouble

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// post sends a body to one of agent's API paths and returns the status, the
// headers and the whole body as text.
func post(t *testing.T, s *Server, agent string, api API, path, body string) (int, http.Header, string) {
	t.Helper()
	base := s.BaseURL(agent, api)
	resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer of %s: %v", path, err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// sseData collects the data lines of an event stream.
func sseData(t *testing.T, body string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || d == "[DONE]" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(d), &m); err != nil {
			t.Fatalf("event data %q: %v", d, err)
		}
		out = append(out, m)
	}
	return out
}

const zooidTools = `[{"name": "Bash", "input_schema": {"type": "object"}},
	{"name": "mcp__zooid__zooid_get_room_info", "description": "room", "input_schema": {"type": "object", "properties": {}}}]`

// TestAnthropicToolCallThenAnswer walks one scripted turn of the Messages
// API as Claude Code makes it: the first request is answered with a streamed
// tool_use under the agent's own name for the tool, the second, carrying the
// result, with the scripted text holding that result.
func TestAnthropicToolCallThenAnswer(t *testing.T) {
	s := New(t)
	s.Script("claude1").Call("zooid_get_room_info", "").Say("room: {result} (asked: {prompt})")

	first := `{"model": "m", "stream": true, "system": [{"type": "text", "text": "you are an agent"}], "tools": ` + zooidTools + `,
		"messages": [{"role": "user", "content": [{"type": "text", "text": "<system-reminder>skills</system-reminder>"}, {"type": "text", "text": "what room is this?"}]}]}`
	status, _, body := post(t, s, "claude1", Anthropic, "/v1/messages", first)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var start map[string]any
	for _, ev := range sseData(t, body) {
		if ev["type"] == "content_block_start" {
			start = ev["content_block"].(map[string]any)
		}
	}
	if start["type"] != "tool_use" || start["name"] != "mcp__zooid__zooid_get_room_info" {
		t.Fatalf("first answer's block is %v, want a tool_use of mcp__zooid__zooid_get_room_info", start)
	}
	second := `{"model": "m", "stream": false, "tools": ` + zooidTools + `, "messages": [
		{"role": "user", "content": "what room is this?"},
		{"role": "assistant", "content": [{"type": "tool_use", "id": "` + start["id"].(string) + `", "name": "mcp__zooid__zooid_get_room_info", "input": {}}]},
		{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "` + start["id"].(string) + `", "content": [{"type": "text", "text": "{\"name\":\"#ops\"}"}]}]}]}`
	status, _, body = post(t, s, "claude1", Anthropic, "/v1/messages", second)
	if status != http.StatusOK {
		t.Fatalf("status %d: %s", status, body)
	}
	var msg struct {
		Content []struct{ Text string } `json:"content"`
		Stop    string                  `json:"stop_reason"`
	}
	if err := json.Unmarshal([]byte(body), &msg); err != nil {
		t.Fatal(err)
	}
	if want := `room: {"name":"#ops"} (asked: what room is this?)`; len(msg.Content) != 1 || msg.Content[0].Text != want || msg.Stop != "end_turn" {
		t.Fatalf("second answer %s, want the text %q ending the turn", body, want)
	}

	reqs := s.Requests("claude1")
	if len(reqs) != 2 {
		t.Fatalf("%d requests recorded, want 2", len(reqs))
	}
	if reqs[0].System != "you are an agent" || reqs[0].Prompt != "what room is this?" || len(reqs[0].Tools) != 2 {
		t.Fatalf("first request recorded as %+v", reqs[0])
	}
	if r := reqs[1].ToolResults; len(r) != 1 || r[0].Name != "mcp__zooid__zooid_get_room_info" || r[0].Text != `{"name":"#ops"}` {
		t.Fatalf("second request's tool results %+v", r)
	}
	if m := s.Script("claude1").Misses(); len(m) != 0 {
		t.Fatalf("misses: %v", m)
	}
}

// TestOpenAIShapes answers Chat Completions (streamed) and Responses (JSON)
// with the same script, and reads their tool results back.
func TestOpenAIShapes(t *testing.T) {
	s := New(t)
	s.Script("codex").Call("zooid_get_members", `{"x": 1}`).Say("got {result}")
	tools := `[{"type": "function", "function": {"name": "zooid_get_members", "parameters": {"type": "object"}}}]`
	status, _, body := post(t, s, "codex", OpenAI, "/chat/completions", `{"model": "m", "stream": true, "tools": `+tools+`,
		"messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": "who?"}]}`)
	if status != http.StatusOK || !strings.Contains(body, `"name":"zooid_get_members"`) || !strings.Contains(body, `"finish_reason":"tool_calls"`) || !strings.HasSuffix(strings.TrimSpace(body), "data: [DONE]") {
		t.Fatalf("chat completion stream: %d %s", status, body)
	}
	rtools := `[{"type": "function", "name": "zooid_get_members", "parameters": {"type": "object"}}]`
	status, _, body = post(t, s, "codex", OpenAI, "/responses", `{"model": "m", "instructions": "sys", "tools": `+rtools+`, "input": [
		{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "who?"}]},
		{"type": "function_call", "call_id": "c1", "name": "zooid_get_members", "arguments": "{}"},
		{"type": "function_call_output", "call_id": "c1", "output": "[\"ori\"]"}]}`)
	if status != http.StatusOK || !strings.Contains(body, `"text":"got [\"ori\"]"`) {
		t.Fatalf("responses answer: %d %s", status, body)
	}
	reqs := s.Requests("codex")
	if reqs[0].System != "sys" || reqs[0].Prompt != "who?" || reqs[1].ToolResults[0].Name != "zooid_get_members" {
		t.Fatalf("recorded %+v", reqs)
	}
}

// TestGeminiShapes answers streamGenerateContent with a function call and
// generateContent with text, and gives housekeeping that asks for JSON a
// value of its schema (gemini-cli's model router retries for a minute and a
// half otherwise).
func TestGeminiShapes(t *testing.T) {
	s := New(t)
	s.Script("gem").Call("zooid_get_room_info", "").Say("{result}")
	tools := `[{"functionDeclarations": [{"name": "zooid_get_room_info", "parametersJsonSchema": {"type": "object"}}]}]`
	status, _, body := post(t, s, "gem", Gemini, "/v1beta/models/g:streamGenerateContent?alt=sse", `{"tools": `+tools+`,
		"contents": [{"role": "user", "parts": [{"text": "which room?"}]}]}`)
	if status != http.StatusOK || !strings.Contains(body, `"functionCall":{"args":{},"id":"call_gem_0","name":"zooid_get_room_info"}`) {
		t.Fatalf("function call: %d %s", status, body)
	}
	status, _, body = post(t, s, "gem", Gemini, "/v1beta/models/g:generateContent", `{"tools": `+tools+`, "contents": [
		{"role": "user", "parts": [{"text": "which room?"}]},
		{"role": "model", "parts": [{"functionCall": {"name": "zooid_get_room_info", "args": {}}}]},
		{"role": "user", "parts": [{"functionResponse": {"name": "zooid_get_room_info", "response": {"output": "ops"}}}]}]}`)
	if status != http.StatusOK || !strings.Contains(body, `"text":"ops"`) {
		t.Fatalf("text answer: %d %s", status, body)
	}
	status, _, body = post(t, s, "gem", Gemini, "/v1beta/models/lite:generateContent", `{"contents": [{"role": "user", "parts": [{"text": "route"}]}],
		"generationConfig": {"responseMimeType": "application/json", "responseJsonSchema": {"type": "object",
			"properties": {"reasoning": {"type": "string"}, "complexity_score": {"type": "integer", "minimum": 1}}, "required": ["reasoning", "complexity_score"]}}}`)
	if status != http.StatusOK || !strings.Contains(body, `"text":"{\"complexity_score\":1,\"reasoning\":\"\"}"`) {
		t.Fatalf("housekeeping JSON: %d %s", status, body)
	}
	if taken, total := s.Script("gem").Taken(); taken != 2 || total != 2 {
		t.Fatalf("housekeeping took a step: %d of %d taken", taken, total)
	}
}

// TestFaults: a status fault answers with the API's error and Retry-After,
// a cut stream ends before its last event, and both count as fired.
func TestFaults(t *testing.T) {
	s := New(t)
	sc := s.Script("a").
		Add(Step{Fault: &Fault{Kind: FaultStatus, Status: 429, RetryAfter: 2}}).
		Add(Step{Fault: &Fault{Kind: FaultCut}}).
		Say("recovered")
	req := `{"stream": true, "tools": [{"name": "t", "input_schema": {}}], "messages": [{"role": "user", "content": "hi"}]}`
	status, h, body := post(t, s, "a", Anthropic, "/v1/messages", req)
	if status != http.StatusTooManyRequests || h.Get("Retry-After") != "2" || !strings.Contains(body, `"rate_limit_error"`) {
		t.Fatalf("429 fault: %d %v %s", status, h, body)
	}
	resp, err := http.Post(s.BaseURL("a", Anthropic)+"/v1/messages", "application/json", strings.NewReader(req))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil || strings.Contains(string(b), "message_stop") {
		t.Fatalf("cut stream read whole (err %v): %s", err, b)
	}
	_, _, body = post(t, s, "a", Anthropic, "/v1/messages", req)
	var text string
	for _, ev := range sseData(t, body) {
		if d, ok := ev["delta"].(map[string]any); ok && d["type"] == "text_delta" {
			text += d["text"].(string)
		}
	}
	if text != "recovered" || !strings.Contains(body, "message_stop") {
		t.Fatalf("after the faults the text is %q in %s", text, body)
	}
	if sc.Fired(FaultStatus) != 1 || sc.Fired(FaultCut) != 1 {
		t.Fatalf("fired: status %d, cut %d", sc.Fired(FaultStatus), sc.Fired(FaultCut))
	}
}

// TestMisses: a turn with no step left and a tool the agent did not offer
// are answered with text that says so, and recorded as misses.
func TestMisses(t *testing.T) {
	s := New(t)
	sc := s.Script("a").Call("zooid_complete_task", "")
	req := `{"tools": [{"name": "mcp__zooid__zooid_get_room_info", "input_schema": {}}], "messages": [{"role": "user", "content": "hi"}]}`
	_, _, body := post(t, s, "a", Anthropic, "/v1/messages", req)
	if !strings.Contains(body, "did not offer") {
		t.Fatalf("unoffered tool answered %s", body)
	}
	_, _, body = post(t, s, "a", Anthropic, "/v1/messages", req)
	if !strings.Contains(body, "no step left") {
		t.Fatalf("exhausted script answered %s", body)
	}
	if m := sc.Misses(); len(m) != 2 {
		t.Fatalf("misses %q, want 2", m)
	}
	if status, _, _ := post(t, s, "a", API("nope"), "/v1/messages", req); status != http.StatusNotFound {
		t.Fatalf("an unknown API answered %d", status)
	}
}

// TestResponsesNamespaces: codex offers its MCP servers' tools inside a
// namespace; the script names the tool by Zooid's name, the call goes back
// in the namespace, and the result is recorded under the one name. A
// WebSocket upgrade is refused with 426, which codex takes as "use HTTPS"
// at once (any other refusal it retries, then posts a notice of it), and
// recorded as a miss: the harness gives codex a provider without WebSockets.
func TestResponsesNamespaces(t *testing.T) {
	s := New(t)
	s.Script("codex").Call("zooid_get_room_info", "").Say("done")
	tools := `[{"type": "function", "name": "shell", "parameters": {}},
		{"type": "namespace", "name": "mcp__zooid", "tools": [{"type": "function", "name": "zooid_get_room_info", "parameters": {"type": "object"}}]}]`
	_, _, body := post(t, s, "codex", OpenAI, "/responses", `{"stream": true, "tools": `+tools+`, "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "room?"}]}]}`)
	if !strings.Contains(body, `"name":"zooid_get_room_info","namespace":"mcp__zooid"`) {
		t.Fatalf("the call is not in its namespace: %s", body)
	}
	post(t, s, "codex", OpenAI, "/responses", `{"tools": `+tools+`, "input": [
		{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "room?"}]},
		{"type": "function_call", "call_id": "c", "namespace": "mcp__zooid", "name": "zooid_get_room_info", "arguments": "{}"},
		{"type": "function_call_output", "call_id": "c", "output": "ops"}]}`)
	reqs := s.Requests("codex")
	if res := reqs[1].ToolResults; len(res) != 1 || res[0].Name != "mcp__zooid__zooid_get_room_info" || res[0].Text != "ops" {
		t.Fatalf("tool results %+v", res)
	}
	req, _ := http.NewRequest(http.MethodGet, s.BaseURL("codex", OpenAI)+"/responses", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUpgradeRequired {
		t.Fatalf("a WebSocket upgrade answered %d, want 426", resp.StatusCode)
	}
	want := []string{"codex asked for the openai API over a WebSocket: the double serves HTTP only (give the agent a provider without WebSockets)"}
	if m := s.Script("codex").Misses(); !slices.Equal(m, want) {
		t.Fatalf("misses %q, want %q", m, want)
	}
}

// TestSlowStream: a delayed step spaces its stream's events out, so the
// whole answer takes at least the delay times the gaps between events.
func TestSlowStream(t *testing.T) {
	s := New(t)
	s.Script("a").Add(Step{Say: "slow words here", Delay: 20 * time.Millisecond})
	start := time.Now()
	_, _, body := post(t, s, "a", Anthropic, "/v1/messages", `{"stream": true, "tools": [{"name": "t", "input_schema": {}}], "messages": [{"role": "user", "content": "hi"}]}`)
	events := sseData(t, body)
	if min := time.Duration(len(events)-1) * 20 * time.Millisecond; time.Since(start) < min {
		t.Fatalf("%d events in %v, want at least %v", len(events), time.Since(start), min)
	}
}
