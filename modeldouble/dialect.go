package modeldouble

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// The kinds of endpoint a dialect serves.
const (
	endpointTurn      = "turn"      // a model answer (Messages, Chat Completions, generateContent)
	endpointResponses = "responses" // OpenAI Responses, a turn in another shape
	endpointCount     = "count"     // a token count, answered without the script
)

// reply is what the double answers a turn's request with: text, or one tool
// call.
type reply struct {
	text   string
	callID string
	call   string
	args   json.RawMessage
}

// dialect is one API's shapes: its paths, how its requests read, how its
// answers and errors look.
type dialect interface {
	// endpoint names the endpoint of method and path (below the API's base
	// URL), or "" for one the double does not serve.
	endpoint(method, rest string) string
	// decode reads a request body into r.
	decode(endpoint, rest string, body []byte, r *Request) error
	// write answers r with a (streamed when r.Stream), each streamed event
	// held back by delay, and cut in the middle when cut is set.
	write(w http.ResponseWriter, endpoint string, r *Request, a reply, delay time.Duration, cut bool)
	errorBody(status int, msg string) any
	countBody() any
}

var dialects = map[API]dialect{Anthropic: anthropic{}, OpenAI: openai{}, Gemini: gemini{}}

// sse is one server-sent event; an empty name writes a data-only event.
type sse struct {
	name string
	data any // marshalled as JSON; a string is written as it is
}

// writeSSE streams events, each after delay, and aborts the connection
// halfway through when cut is set, as a dropped stream looks to a client.
func writeSSE(w http.ResponseWriter, events []sse, delay time.Duration, cut bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	for i, ev := range events {
		if cut && i == len(events)/2 {
			if fl != nil {
				fl.Flush()
			}
			panic(http.ErrAbortHandler)
		}
		if i > 0 && delay > 0 {
			time.Sleep(delay)
		}
		var data []byte
		if s, ok := ev.data.(string); ok {
			data = []byte(s)
		} else {
			data, _ = json.Marshal(ev.data)
		}
		if ev.name != "" {
			fmt.Fprintf(w, "event: %s\n", ev.name)
		}
		fmt.Fprintf(w, "data: %s\n\n", data)
		if fl != nil {
			fl.Flush()
		}
	}
}

// writeBody answers with one JSON body after delay; cut sends half of it and
// drops the connection.
func writeBody(w http.ResponseWriter, v any, delay time.Duration, cut bool) {
	if delay > 0 {
		time.Sleep(delay)
	}
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	if cut {
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(b[:len(b)/2])
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
		panic(http.ErrAbortHandler)
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// chunks splits an answer's text into a few stream deltas, as a model
// streams words rather than whole answers.
func chunks(text string) []string {
	const n = 3
	if len(text) < 2*n {
		return []string{text}
	}
	var out []string
	step := (len(text) + n - 1) / n
	for i := 0; i < len(text); {
		j := min(i+step, len(text))
		for j < len(text) && (text[j]&0xC0) == 0x80 { // keep UTF-8 sequences whole
			j++
		}
		out = append(out, text[i:j])
		i = j
	}
	return out
}
