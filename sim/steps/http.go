package steps

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// The scenario's plain HTTP transport: its token, and one session's prompt and
// event stream as a client reads them.

// httpToken is the bearer token of the scenario's HTTP transport.
const httpToken = "scenario-http-token"

// httpAnswer is one HTTP session's event stream as read.
type httpAnswer struct {
	status int
	events []httpEvent
}

type httpEvent struct {
	name string
	data map[string]any
}

func (w *world) httpSessionURL(ctx context.Context, agent string) (string, error) {
	if err := w.start(ctx); err != nil {
		return "", err
	}
	if a, err := w.agent(agent); err != nil {
		return "", err
	} else if !a.http {
		return "", fmt.Errorf("%s is bound to Matrix; declare it with: agent %q is bound to HTTP", agent, agent)
	}
	urls := w.d.HTTPURLs()
	if len(urls) != 1 {
		return "", fmt.Errorf("the daemon serves %d HTTP transports, want 1", len(urls))
	}
	return urls[0] + "/agents/" + agent + "/sessions", nil
}

// askHTTP posts one prompt and reads its event stream to the end.
func askHTTP(ctx context.Context, url, agent, prompt string) (*httpAnswer, error) {
	body, _ := json.Marshal(map[string]string{"prompt": prompt})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(body)))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+httpToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("asking %s over HTTP: %w", agent, err)
	}
	defer resp.Body.Close()
	ans := &httpAnswer{status: resp.StatusCode}
	var name string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var data map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &data); err != nil {
				return nil, fmt.Errorf("event %q carries bad JSON: %w", name, err)
			}
			ans.events = append(ans.events, httpEvent{name, data})
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s's event stream: %w", agent, err)
	}
	return ans, nil
}

func checkHTTPAnswer(a *httpAnswer, text, stop string) error {
	if a.status != http.StatusOK {
		return fmt.Errorf("the HTTP answer had status %d: %v", a.status, a.events)
	}
	var got strings.Builder
	var done map[string]any
	for _, e := range a.events {
		switch e.name {
		case "chunk":
			s, _ := e.data["text"].(string)
			got.WriteString(s)
		case "done":
			done = e.data
		}
	}
	if got.String() != text {
		return fmt.Errorf("the HTTP answer streamed %q, want %q (events %v)", got.String(), text, a.events)
	}
	if done == nil || done["stop_reason"] != stop {
		return fmt.Errorf("the HTTP answer ended with %v, want stop_reason %s", done, stop)
	}
	return nil
}
