// Package httpapi is Zooid's HTTP transport for webhook-style use: one request
// runs one agent turn and streams it back as server-sent events. It owns no
// durable conversation, so its agents get no Zooid MCP server.
package httpapi

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	acp "github.com/coder/acp-go-sdk"

	"github.com/zooid-dev/zooid/zooid/acpagent"
)

// maxBody bounds a request body; a prompt is prose, not an upload.
const maxBody = 1 << 20

// Agent is an agent reachable over HTTP.
type Agent struct {
	// Name is the agent's zooid.yaml name, the {name} of the URL.
	Name string
	// Spec starts its process; Spec.Dir is also the session's working directory.
	Spec acpagent.Spec
}

// Options configures a Server.
type Options struct {
	// Listen is the address to serve on, e.g. "127.0.0.1:3000".
	Listen string
	// Token is the bearer token every request must carry; empty disables
	// authentication (the config allows it for loopback-only set-ups).
	Token string
	// Agents are the HTTP-bound agents by name.
	Agents map[string]Agent
	// TurnTimeout bounds one turn.
	TurnTimeout time.Duration
	// Logger receives logs; nil discards them.
	Logger *slog.Logger
}

// Server serves the HTTP transport.
type Server struct {
	opts Options
	log  *slog.Logger
	ln   net.Listener
	srv  *http.Server
	wg   sync.WaitGroup
}

// Start listens and serves in the background until Close.
func Start(opts Options) (*Server, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Token == "" {
		opts.Logger.Warn("http transport has no token: every local client may run agents", "listen", opts.Listen)
	}
	if opts.TurnTimeout <= 0 {
		opts.TurnTimeout = 30 * time.Minute
	}
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("http transport: listening on %s: %w", opts.Listen, err)
	}
	s := &Server{opts: opts, log: opts.Logger, ln: ln}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /agents/{name}/sessions", s.handleSession)
	s.srv = &http.Server{Handler: s.authenticate(mux), ReadHeaderTimeout: 10 * time.Second}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http transport stopped", "err", err)
		}
	}()
	return s, nil
}

// URL is the base URL the server answers on.
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Close stops serving; turns in flight are cancelled with their requests.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if err != nil {
		err = s.srv.Close()
	}
	s.wg.Wait()
	return err
}

func (s *Server) authenticate(next http.Handler) http.Handler {
	if s.opts.Token == "" {
		return next
	}
	want := []byte("Bearer " + s.opts.Token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			writeError(w, http.StatusUnauthorized, "unauthorized", "a valid bearer token is required")
			return
		}
		next.ServeHTTP(w, r)
	})
}

type sessionRequest struct {
	Prompt string `json:"prompt"`
}

func (s *Server) handleSession(w http.ResponseWriter, r *http.Request) {
	agent, ok := s.opts.Agents[r.PathValue("name")]
	if !ok {
		writeError(w, http.StatusNotFound, "unknown_agent", fmt.Sprintf("no HTTP-bound agent named %q", r.PathValue("name")))
		return
	}
	var req sessionRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "body must be JSON {\"prompt\": \"...\"}: "+err.Error())
		return
	}
	if strings.TrimSpace(req.Prompt) == "" {
		writeError(w, http.StatusBadRequest, "bad_request", "prompt must not be empty")
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "internal", "streaming unsupported")
		return
	}

	ctx, cancel := context.WithTimeout(r.Context(), s.opts.TurnTimeout)
	defer cancel()
	conn, err := acpagent.Start(ctx, agent.Spec, acpagent.Options{Logger: s.log.With("agent", agent.Name)})
	if err != nil {
		writeError(w, http.StatusBadGateway, "agent_unavailable", err.Error())
		return
	}
	defer conn.Close()
	// No Zooid MCP server: an HTTP session has no room to read.
	sess, err := conn.NewSession(ctx, agent.Spec.Dir, []acp.McpServer{})
	if err != nil {
		writeError(w, http.StatusBadGateway, "agent_unavailable", err.Error())
		return
	}

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	sse := &sseWriter{w: w, f: flusher}
	sse.send("session", map[string]any{"agent": agent.Name, "session_id": sess.ID()})
	stop, err := sess.Prompt(ctx, req.Prompt, func(u acpagent.Update) {
		if u.Text != "" {
			sse.send("chunk", map[string]any{"text": u.Text})
		}
	})
	if err != nil {
		sse.send("error", map[string]any{"error": err.Error()})
		return
	}
	sse.send("done", map[string]any{"stop_reason": stop})
}

// sseWriter writes server-sent events; updates arrive from the ACP connection's
// goroutine, so writes are serialised.
type sseWriter struct {
	mu sync.Mutex
	w  io.Writer
	f  http.Flusher
}

func (s *sseWriter) send(name string, data any) {
	b, err := json.Marshal(data)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, b)
	s.f.Flush()
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "message": msg})
}
