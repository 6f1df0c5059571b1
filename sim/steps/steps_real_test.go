package steps

import "testing"

// TestResultObject reads a tool's JSON result out of each agent's wrapping
// of it, as their models were sent it in features/real_agents.feature.
func TestResultObject(t *testing.T) {
	cases := map[string]string{
		"claude": `{"has_more":false,"messages":[]}`,
		"gemini": "<untrusted_context>\n{\"has_more\":false,\"messages\":[]}\n</untrusted_context>",
		"codex":  "Wall time: 0.0071 seconds\nOutput:\n[{\"type\":\"text\",\"text\":\"{\\\"has_more\\\":false,\\\"messages\\\":[]}\"}]",
	}
	for agent, text := range cases {
		got, ok := resultObject(text)
		if !ok || got["has_more"] != false {
			t.Errorf("%s: read %v, %v from %q", agent, got, ok, text)
		}
	}
	for _, text := range []string{"User refused permission to run tool", "[1, 2]", `[{"type":"text","text":"plain words"}]`} {
		if got, ok := resultObject(text); ok {
			t.Errorf("read %v out of %q, which holds no JSON object", got, text)
		}
	}
}
