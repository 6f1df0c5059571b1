package tools

import (
	"context"
	"encoding/json"
	"testing"
)

// FuzzToolArguments calls every tool, in every session kind, with arbitrary
// argument bytes: a bad argument is a model mistake, so it must come back as a
// tool *Error with a code, never a panic or an internal error.
func FuzzToolArguments(f *testing.F) {
	for _, s := range []string{``, `null`, `{}`, `[]`, `"x"`, `{"limit": 5}`, `{"limit": -1}`, `{"limit": 1e300}`,
		`{"before": "c"}`, `{"thread_id": "$root"}`, `{"thread_id": ""}`, `{"text": "hi", "thread_id": "$r"}`,
		`{"tasks": [{"agent": "b", "prompt": "p"}]}`, `{"tasks": null}`, `{"summary": "done"}`, `{"x": 1}`, `{} {}`, `{"limit": "5"}`} {
		f.Add(s)
	}
	kinds := []SessionKind{Conversation, TaskAssignee, TaskThreadMember}
	f.Fuzz(func(t *testing.T, args string) {
		b := Backends{Rooms: &recRooms{}, Tasks: &recTasks{}}
		for _, kind := range kinds {
			for _, tool := range Offered(kind) {
				res, terr, err := Call(context.Background(), b, Caller{Agent: "a", Kind: kind}, tool.Name, json.RawMessage(args))
				if err != nil {
					t.Fatalf("%s(%q): internal error %v", tool.Name, args, err)
				}
				if terr != nil {
					if terr.Code == "" {
						t.Fatalf("%s(%q): error without a code: %v", tool.Name, args, terr)
					}
					continue
				}
				if _, err := json.Marshal(res); err != nil {
					t.Fatalf("%s(%q): result does not encode: %v", tool.Name, args, err)
				}
			}
		}
	})
}
