package steps

import (
	"slices"
	"testing"

	"github.com/zooid-dev/zooid/modeldouble"
)

func TestModelTurns(t *testing.T) {
	tools := []modeldouble.Tool{{Name: "zooid_get_room_info"}}
	reqs := []modeldouble.Request{
		{Prompt: "classify", Answer: "housekeeping"}, // no tools: not a turn
		{Tools: tools, Prompt: "what room?", Answer: "HTTP 429"},
		{Tools: tools, Prompt: "what room?", Answer: "call zooid_get_room_info {}"}, // the retry
		{Tools: tools, Prompt: "what room?", ToolResults: []modeldouble.ToolResult{{Text: "{}"}}, Answer: "cut"},
		{Tools: tools, Prompt: "what room?", ToolResults: []modeldouble.ToolResult{{Text: "{}"}}, Answer: `say "ops"`},
		{Tools: tools, Prompt: "and svc-b?", Answer: `say "fine"`},
		{Tools: tools, Prompt: "what room?", Answer: `say "still ops"`}, // asked again
	}
	if got, want := modelTurns(reqs), []string{"what room?", "and svc-b?", "what room?"}; !slices.Equal(got, want) {
		t.Fatalf("turns %q, want %q", got, want)
	}
}
