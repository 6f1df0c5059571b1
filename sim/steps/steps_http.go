package steps

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
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
		{area: "humans", pattern: `^([a-z0-9-]+) is asked over HTTP (\d+) times at once: "([^"]*)"$`,
			example: `hook is asked over HTTP 10 times at once: "how is the build?"`,
			doc:     "Sends that many POSTs at the same time, in the background; \"every HTTP answer streams …\" waits for them all.",
			fn:      w.stepAskHTTPAtOnce},
		{area: "posts", pattern: `^every HTTP answer streams "([^"]*)" and ends with (end_turn|cancelled|max_tokens|refusal)$`,
			example: `every HTTP answer streams "ok" and ends with end_turn`,
			doc:     "Waits for every answer of the last \"asked over HTTP N times at once\" step and checks each as the single-answer step does.",
			fn:      w.stepEveryHTTPAnswer},
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
	url, err := w.httpSessionURL(ctx, agent)
	if err != nil {
		return err
	}
	ans, err := askHTTP(ctx, url, agent, prompt)
	if err != nil {
		return err
	}
	w.http = ans
	return nil
}

// stepAskHTTPAtOnce sends n requests at the same time in the background; the
// step "every HTTP answer streams …" waits for them. The scenario's close
// cancels and waits for requests still out.
func (w *world) stepAskHTTPAtOnce(ctx context.Context, agent, count, prompt string) error {
	url, err := w.httpSessionURL(ctx, agent)
	if err != nil {
		return err
	}
	n, _ := strconv.Atoi(count)
	rctx, cancel := context.WithCancel(context.Background())
	answers := make([]*httpAnswer, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { answers[i], errs[i] = askHTTP(rctx, url, agent, prompt) })
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	w.closers = append(w.closers, func() error { cancel(); <-done; return nil })
	w.httpWait = func(ctx context.Context) ([]*httpAnswer, error) {
		// Answers served one process at a time take long in all.
		t := time.NewTimer(time.Duration(n) * w.run.wait)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			return nil, fmt.Errorf("%d requests to %s not all answered within %s", n, agent, time.Duration(n)*w.run.wait)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return answers, errors.Join(errs...)
	}
	return nil
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

func (w *world) stepHTTPAnswer(text, stop string) error {
	if w.http == nil {
		return fmt.Errorf("nobody was asked over HTTP yet")
	}
	return checkHTTPAnswer(w.http, text, stop)
}

func (w *world) stepEveryHTTPAnswer(ctx context.Context, text, stop string) error {
	if w.httpWait == nil {
		return fmt.Errorf("no step asked over HTTP several times at once")
	}
	all, err := w.httpWait(ctx)
	if err != nil {
		return err
	}
	for i, a := range all {
		if err := checkHTTPAnswer(a, text, stop); err != nil {
			return fmt.Errorf("answer %d of %d: %w", i+1, len(all), err)
		}
	}
	return nil
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
