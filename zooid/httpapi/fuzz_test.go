package httpapi

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/zooid-dev/zooid/zooid/acpagent"
)

// FuzzSessionBody posts arbitrary request bodies to POST /agents/{name}/sessions.
// The agent's command does not exist, so a body that passes decoding reaches
// the agent start and gets 502 agent_unavailable; anything else is 400
// bad_request, never a panic. A body is accepted exactly when it is one JSON
// object whose only field is a non-blank prompt.
func FuzzSessionBody(f *testing.F) {
	for _, s := range []string{`{"prompt":"hi"}`, `{"prompt":""}`, `{"prompt":"  "}`, `{}`, ``, `null`, `[]`, `{"prompt":1}`,
		`{"prompt":"a","x":1}`, `{"prompt":"a"} trailing`, `{"prompt":"\u0000"}`, `{"PROMPT":"case"}`} {
		f.Add(s)
	}
	s := &Server{
		opts: Options{
			Agents:      map[string]Agent{"a": {Name: "a", Spec: acpagent.Spec{Command: "/nonexistent/zooid-fuzz-agent", Dir: f.TempDir()}}},
			TurnTimeout: 5 * time.Second,
		},
		log: slog.New(slog.DiscardHandler),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /agents/{name}/sessions", s.handleSession)
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest(http.MethodPost, "/agents/a/sessions", strings.NewReader(body))
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		var e map[string]string
		raw, _ := io.ReadAll(rec.Body)
		_ = json.Unmarshal(raw, &e)
		code := e["error"]
		switch rec.Code {
		case http.StatusBadRequest:
			if code != "bad_request" {
				t.Fatalf("body %q: 400 with %s", body, raw)
			}
			if acceptable(body) {
				t.Fatalf("body %q is one JSON object whose only field is a non-blank prompt, yet was refused: %s", body, raw)
			}
		case http.StatusBadGateway:
			if code != "agent_unavailable" {
				t.Fatalf("body %q: 502 with %s", body, raw)
			}
			if !acceptable(body) {
				t.Fatalf("body %q was accepted, but it is not one JSON object whose only field is a non-blank prompt", body)
			}
		default:
			t.Fatalf("body %q answered %d %s", body, rec.Code, raw)
		}
	})
}

// acceptable is the contract's rule for a session body, read independently of
// the handler's decoder (token by token rather than into its struct): exactly
// one JSON value, an object, whose every key is "prompt" (in any case, as
// encoding/json matches fields) and whose prompt is a string that is not
// blank. As encoding/json does, a later key overrides an earlier one and a
// null leaves the value as it was.
func acceptable(body string) bool {
	if !json.Valid([]byte(body)) {
		return false
	}
	dec := json.NewDecoder(strings.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return false
	}
	prompt := ""
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return false
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return false
		}
		if key, _ := k.(string); !strings.EqualFold(key, "prompt") {
			return false
		}
		if string(v) == "null" {
			continue
		}
		if err := json.Unmarshal(v, &prompt); err != nil {
			return false
		}
	}
	return strings.TrimSpace(prompt) != ""
}
