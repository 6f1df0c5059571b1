package steps

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// httpToken is the bearer token of the scenario's HTTP transport.
const httpToken = "scenario-http-token"

// httpSteps cover agents reached over the plain HTTP transport (behaviour §7).
func httpSteps(w *world) []stepDef {
	return []stepDef{
		{area: "setup", pattern: `^agent "([a-z0-9-]+)" is bound to HTTP$`,
			example: `agent "hook" is bound to HTTP`,
			doc:     "Configures an agent on the HTTP transport (POST /agents/{name}/sessions, answered as server-sent events) instead of Matrix.",
			fn:      w.stepHTTPAgent},
		{area: "humans", pattern: `^([a-z0-9-]+) is asked over HTTP: "([^"]*)"$`,
			example: `hook is asked over HTTP: "how is the build?"`,
			doc:     "POSTs the prompt with the transport's bearer token and reads the event stream to its end.",
			fn:      w.stepAskHTTP},
		{area: "posts", pattern: `^the HTTP answer streams "([^"]*)" and ends with (end_turn|cancelled|max_tokens|refusal)$`,
			example: `the HTTP answer streams "build is green" and ends with end_turn`,
			doc:     "The last HTTP answer's chunk events join to the text, and its done event carries the stop reason.",
			fn:      w.stepHTTPAnswer},
		{area: "prompts", pattern: `^([a-z0-9-]+)'s session/new has no MCP server$`,
			example: `hook's session/new has no MCP server`,
			doc:     "The agent's latest session/new carried an empty mcpServers list.",
			fn:      w.stepNoMCP},
	}
}

func (w *world) stepHTTPAgent(ctx context.Context, name string) error {
	if w.started {
		return fmt.Errorf("agents must be declared before the first action (the daemon is already running)")
	}
	if err := checkName(name); err != nil {
		return err
	}
	if _, ok := w.agents[name]; ok {
		return fmt.Errorf("agent %q is already declared", name)
	}
	w.agents[name] = &agentDecl{name: name, http: true}
	w.agentSeq = append(w.agentSeq, name)
	return nil
}

// httpAnswer is one HTTP session's event stream as read.
type httpAnswer struct {
	status int
	events []httpEvent
}

type httpEvent struct {
	name string
	data map[string]any
}

func (w *world) stepAskHTTP(ctx context.Context, agent, prompt string) error {
	if err := w.start(ctx); err != nil {
		return err
	}
	if a, err := w.agent(agent); err != nil {
		return err
	} else if !a.http {
		return fmt.Errorf("%s is bound to Matrix; declare it with: agent %q is bound to HTTP", agent, agent)
	}
	urls := w.d.HTTPURLs()
	if len(urls) != 1 {
		return fmt.Errorf("the daemon serves %d HTTP transports, want 1", len(urls))
	}
	body, _ := json.Marshal(map[string]string{"prompt": prompt})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, urls[0]+"/agents/"+agent+"/sessions", strings.NewReader(string(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+httpToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("asking %s over HTTP: %w", agent, err)
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
				return fmt.Errorf("event %q carries bad JSON: %w", name, err)
			}
			ans.events = append(ans.events, httpEvent{name, data})
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading %s's event stream: %w", agent, err)
	}
	w.http = ans
	return nil
}

func (w *world) stepHTTPAnswer(text, stop string) error {
	a := w.http
	if a == nil {
		return fmt.Errorf("nobody was asked over HTTP yet")
	}
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

func (w *world) stepNoMCP(ctx context.Context, agent string) error {
	ss, err := w.ctl.WaitSessions(ctx, agent, 1)
	if err != nil {
		return fmt.Errorf("%s never got a session/new: %w", agent, err)
	}
	if got := ss[len(ss)-1].McpServers; len(got) != 0 {
		return fmt.Errorf("%s's session/new carried %d MCP servers: %v", agent, len(got), got)
	}
	return nil
}
