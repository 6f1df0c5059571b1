package modeldouble

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// config collects what the Options set before the server starts.
type config struct {
	addr   string
	logger *slog.Logger
}

// Option configures a Server before it starts.
type Option func(*config)

// WithAddr sets the listen address (default "127.0.0.1:0", a free port).
func WithAddr(addr string) Option { return func(c *config) { c.addr = addr } }

// WithLogger sets the logger for request diagnostics (default: discard).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// Server is one model double: a script and a request log per agent.
type Server struct {
	log  *slog.Logger
	ln   net.Listener
	http *http.Server
	url  string
	done chan struct{} // closed when the serve loop has returned

	mu      sync.Mutex
	scripts map[string]*Script
	reqs    []Request
	once    sync.Once
}

// New starts a server for a test and closes it when the test ends.
func New(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s, err := Start(opts...)
	if err != nil {
		t.Fatalf("modeldouble: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("modeldouble close: %v", err)
		}
	})
	return s
}

// Start starts a server; the caller must Close it.
func Start(opts ...Option) (*Server, error) {
	cfg := config{addr: "127.0.0.1:0"}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.logger == nil {
		cfg.logger = slog.New(slog.DiscardHandler)
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", cfg.addr, err)
	}
	s := &Server{
		log: cfg.logger, ln: ln, url: "http://" + ln.Addr().String(), done: make(chan struct{}),
		scripts: map[string]*Script{},
	}
	s.http = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(s.done)
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("modeldouble serve", "err", err)
		}
	}()
	return s, nil
}

// URL is the server's root URL, like "http://127.0.0.1:PORT".
func (s *Server) URL() string { return s.url }

// BaseURL is the base URL to give an agent for one API: the agent's requests
// under it are answered by its script and recorded under its name. Anthropic
// clients append /v1/messages to it, OpenAI clients are given it with /v1
// (…/openai/v1), Gemini clients append /v1beta/models/….
func (s *Server) BaseURL(agent string, api API) string {
	u := s.url + "/agents/" + agent + "/" + string(api)
	if api == OpenAI {
		u += "/v1"
	}
	return u
}

// Script is the agent's script, made empty on first use.
func (s *Server) Script(agent string) *Script {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc, ok := s.scripts[agent]
	if !ok {
		sc = &Script{}
		s.scripts[agent] = sc
	}
	return sc
}

// Requests lists the requests recorded for an agent, oldest first; "" lists
// those that named no agent.
func (s *Server) Requests(agent string) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for _, r := range s.reqs {
		if r.Agent == agent {
			out = append(out, r)
		}
	}
	return out
}

// Close stops the server, cutting open streams. It is idempotent.
func (s *Server) Close() error {
	var err error
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err = s.http.Shutdown(ctx); err != nil {
			err = s.http.Close()
		}
		<-s.done
	})
	return err
}

func (s *Server) record(r Request) {
	s.mu.Lock()
	s.reqs = append(s.reqs, r)
	s.mu.Unlock()
	s.log.Debug("model request", "agent", r.Agent, "api", r.API, "path", r.Path, "stream", r.Stream, "tools", len(r.Tools), "answer", r.Answer)
}

// maxBody bounds a request body: agents send whole conversations, and a
// long one with many tool results is megabytes, not more.
const maxBody = 64 << 20

func (s *Server) serve(w http.ResponseWriter, hr *http.Request) {
	agent, api, rest, ok := splitPath(hr.URL.Path)
	rec := Request{Agent: agent, API: api, Path: hr.URL.Path, At: time.Now().UTC(), Step: -1}
	d, known := dialects[api]
	if !ok || !known {
		rec.Answer = "404 not a model API path"
		s.record(rec)
		http.Error(w, "modeldouble: paths are /agents/{name}/{anthropic|openai|gemini}/…", http.StatusNotFound)
		return
	}
	if rest == "/" && (hr.Method == http.MethodHead || hr.Method == http.MethodGet) {
		// Claude Code probes its base URL before its first request.
		rec.Answer = "root probe"
		s.record(rec)
		w.WriteHeader(http.StatusOK)
		return
	}
	if strings.EqualFold(hr.Header.Get("Upgrade"), "websocket") {
		// The double serves HTTP only. codex on its built-in provider tries
		// the Responses API over a WebSocket first and takes 426 as "use
		// HTTPS" at once; any other refusal it retries five times, then
		// tells the user (the Matrix thread) it is "Falling back from
		// WebSockets to HTTPS". The harness's codex has WebSockets off
		// (sim/steps/real_codex.go): a client that tries one hears 426, and
		// the script records a miss, so the test that wired it fails.
		rec.Answer = "426 no WebSocket transport"
		s.record(rec)
		s.Script(agent).miss(fmt.Sprintf("%s asked for the %s API over a WebSocket: the double serves HTTP only (give the agent a provider without WebSockets)", agent, api))
		writeJSON(w, http.StatusUpgradeRequired, d.errorBody(http.StatusUpgradeRequired, "modeldouble serves no WebSocket transport; use HTTPS"))
		return
	}
	endpoint := d.endpoint(hr.Method, rest)
	if endpoint == "" {
		rec.Answer = fmt.Sprintf("404 %s %s", hr.Method, rest)
		s.record(rec)
		writeJSON(w, http.StatusNotFound, d.errorBody(http.StatusNotFound, "modeldouble does not serve "+hr.Method+" "+rest))
		return
	}
	body, err := io.ReadAll(io.LimitReader(hr.Body, maxBody))
	if err != nil {
		return // the client went away; nothing to answer
	}
	if endpoint == endpointCount {
		rec.Answer = "token count"
		s.record(rec)
		writeJSON(w, http.StatusOK, d.countBody())
		return
	}
	if err := d.decode(endpoint, rest, body, &rec); err != nil {
		rec.Answer = "400 " + err.Error()
		s.record(rec)
		writeJSON(w, http.StatusBadRequest, d.errorBody(http.StatusBadRequest, err.Error()))
		return
	}
	// Recorded on the way out also when a cut stream aborts the handler.
	defer func() { s.record(rec) }()
	s.answer(w, hr, d, endpoint, &rec)
}

// answer takes the script's next step for a turn's request and writes it.
func (s *Server) answer(w http.ResponseWriter, hr *http.Request, d dialect, endpoint string, rec *Request) {
	if len(rec.Tools) == 0 {
		rec.Answer = "housekeeping"
		text := "ok"
		if rec.jsonSchema != nil {
			b, _ := json.Marshal(exampleOf(rec.jsonSchema))
			text = string(b)
		}
		d.write(w, endpoint, rec, reply{text: text}, 0, false)
		return
	}
	sc := s.Script(rec.Agent)
	st, idx, ok := sc.take()
	if !ok {
		why := fmt.Sprintf("%s's model was asked for a turn with no step left in its script (prompt %q)", rec.Agent, clip(rec.Prompt, 200))
		sc.miss(why)
		rec.Answer = "no step left"
		d.write(w, endpoint, rec, reply{text: "[modeldouble] " + why}, 0, false)
		return
	}
	rec.Step = idx
	rec.Answer = st.String()
	if st.Fault != nil && st.Fault.Kind == FaultStatus {
		if st.Fault.RetryAfter > 0 {
			w.Header().Set("Retry-After", fmt.Sprint(st.Fault.RetryAfter))
		}
		writeJSON(w, st.Fault.Status, d.errorBody(st.Fault.Status, "injected by modeldouble"))
		return
	}
	cut := st.Fault != nil && st.Fault.Kind == FaultCut
	var r reply
	switch {
	case cut:
		r = reply{text: "this answer is cut off before it ends"}
	case st.Call != "":
		name, err := resolveTool(st.Call, rec.Tools)
		if err != nil {
			why := fmt.Sprintf("%s's model, step %d: %v", rec.Agent, idx, err)
			sc.miss(why)
			rec.Answer = "tool not offered"
			d.write(w, endpoint, rec, reply{text: "[modeldouble] " + why}, 0, false)
			return
		}
		args := st.Args
		if len(args) == 0 {
			args = json.RawMessage("{}")
		}
		r = reply{callID: fmt.Sprintf("call_%s_%d", rec.Agent, idx), call: name, args: args}
	default:
		r = reply{text: fill(st.Say, rec)}
		sc.sayDone(r.text)
	}
	select {
	case <-hr.Context().Done():
		return
	default:
	}
	d.write(w, endpoint, rec, r, st.Delay, cut)
}

// splitPath reads /agents/{name}/{api}/rest.
func splitPath(p string) (agent string, api API, rest string, ok bool) {
	const prefix = "/agents/"
	if !strings.HasPrefix(p, prefix) {
		return "", "", "", false
	}
	parts := strings.SplitN(strings.TrimPrefix(p, prefix), "/", 3)
	if len(parts) == 2 && parts[0] != "" {
		return parts[0], API(parts[1]), "/", true
	}
	if len(parts) < 3 || parts[0] == "" {
		return "", "", "", false
	}
	return parts[0], API(parts[1]), "/" + parts[2], true
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
