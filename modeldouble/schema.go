package modeldouble

import (
	"encoding/json"
	"strings"
)

// exampleOf makes the smallest value a JSON schema accepts, for housekeeping
// requests that ask for structured output: each required property (every
// property when none is marked), the first of an enum, a minimum where one
// is set. Gemini's uppercase type names (OBJECT, STRING) read as JSON
// Schema's.
func exampleOf(raw json.RawMessage) any {
	var s struct {
		Type       any                        `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
		Required   []string                   `json:"required"`
		Items      json.RawMessage            `json:"items"`
		MinItems   int                        `json:"minItems"`
		Enum       []any                      `json:"enum"`
		Minimum    *float64                   `json:"minimum"`
		AnyOf      []json.RawMessage          `json:"anyOf"`
	}
	if json.Unmarshal(raw, &s) != nil {
		return map[string]any{}
	}
	if len(s.Enum) > 0 {
		return s.Enum[0]
	}
	if len(s.AnyOf) > 0 {
		return exampleOf(s.AnyOf[0])
	}
	typ, _ := s.Type.(string)
	if list, ok := s.Type.([]any); ok && len(list) > 0 {
		typ, _ = list[0].(string)
	}
	switch strings.ToLower(typ) {
	case "string":
		return ""
	case "integer", "number":
		if s.Minimum != nil {
			return *s.Minimum
		}
		return 0
	case "boolean":
		return false
	case "array":
		out := []any{}
		for range s.MinItems {
			out = append(out, exampleOf(s.Items))
		}
		return out
	case "null":
		return nil
	}
	out := map[string]any{}
	names := s.Required
	if len(names) == 0 {
		for n := range s.Properties {
			names = append(names, n)
		}
	}
	for _, n := range names {
		out[n] = exampleOf(s.Properties[n])
	}
	return out
}
