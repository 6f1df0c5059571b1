// Package httpapi is Zooid's HTTP transport for webhook-style use: one request
// runs one agent turn and streams it back as server-sent events. It owns no
// durable conversation, so its agents get no Zooid MCP server.
package httpapi

import (
	"context"
	"crypto/sha256"
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
	// Timeouts bound slow and idle clients; zero fields take DefaultTimeouts.
	Timeouts Timeouts
	// Logger receives logs; nil discards them.
	Logger *slog.Logger
	// Acquire, if set, is asked for a place before a request starts its
	// agent process (the daemon's process caps); it may wait, and fails only
	// when ctx ends. release runs once the process has exited.
	Acquire func(ctx context.Context, agent string) (release func(), err error)
}

// Timeouts bound what a client may hold open. The turn itself is bounded by
// TurnTimeout, not by these: the event stream extends its write deadline
// before every event, so only a client that stops reading is cut off.
type Timeouts struct {
	// Header bounds reading the request line and headers.
	Header time.Duration
	// Read bounds reading the whole request, body included: a client that
	// dribbles its body is cut off.
	Read time.Duration
	// Write bounds writing one response or one streamed event.
	Write time.Duration
	// Idle bounds a kept-alive connection waiting for its next request.
	Idle time.Duration
}

// DefaultTimeouts are generous for a prompt of up to a megabyte on a slow link
// and short enough that held-open connections don't pile up.
var DefaultTimeouts = Timeouts{Header: 10 * time.Second, Read: 30 * time.Second, Write: 30 * time.Second, Idle: 60 * time.Second}

func (t Timeouts) withDefaults() Timeouts {
	pick := func(v, def time.Duration) time.Duration {
		if v > 0 {
			return v
		}
		return def
	}
	return Timeouts{
		Header: pick(t.Header, DefaultTimeouts.Header),
		Read:   pick(t.Read, DefaultTimeouts.Read),
		Write:  pick(t.Write, DefaultTimeouts.Write),
		Idle:   pick(t.Idle, DefaultTimeouts.Idle),
	}
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
	opts.Timeouts = opts.Timeouts.withDefaults()
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return nil, fmt.Errorf("http transport: listening on %s: %w", opts.Listen, err)
	}
	s := &Server{opts: opts, log: opts.Logger, ln: ln}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /agents/{name}/sessions", s.handleSession)
	s.srv = &http.Server{
		Handler:           s.authenticate(mux),
		ReadHeaderTimeout: opts.Timeouts.Header,
		ReadTimeout:       opts.Timeouts.Read,
		WriteTimeout:      opts.Timeouts.Write,
		IdleTimeout:       opts.Timeouts.Idle,
	}
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
	// Comparing digests keeps the time independent of the token's length as
	// well as its content (ConstantTimeCompare returns early on a length mismatch).
	want := sha256.Sum256([]byte("Bearer " + s.opts.Token))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := sha256.Sum256([]byte(r.Header.Get("Authorization")))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
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
	// Found by FuzzSessionBody: anything after the object was silently ignored.
	if _, err := dec.Token(); err != io.EOF {
		writeError(w, http.StatusBadRequest, "bad_request", "body must be a single JSON object {\"prompt\": \"...\"}")
		return
	}
	if strings.TrimSpace(req.Prompt) == "" {
		writeError(w, http.StatusBadRequest, "bad_request", "prompt must not be empty")
		return
	}
	if _, ok := w.(http.Flusher); !ok {
		writeError(w, http.StatusInternalServerError, "internal", "streaming unsupported")
		return
	}

	// The body is read: from here the turn's own timeout bounds the request.
	// Clearing the read deadline keeps the server's background read (which
	// watches for the client going away) from cancelling a long turn.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})

	// A wait for a place is bounded by the client's patience, not the turn
	// timeout: the turn has not started yet.
	if s.opts.Acquire != nil {
		release, err := s.opts.Acquire(r.Context(), agent.Name)
		if err != nil {
			writeError(w, http.StatusServiceUnavailable, "agent_busy", fmt.Sprintf("no process of %s became free before the request ended: %v", agent.Name, err))
			return
		}
		// Deferred before the process's Close, so it runs after it.
		defer release()
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
	sse := &sseWriter{w: w, rc: rc, write: s.opts.Timeouts.Write, fail: cancel}
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
// goroutine, so writes are serialised. Each event gets its own write deadline,
// so a stream may last the whole turn while a client that stops reading is cut
// off; a failed write ends the turn.
type sseWriter struct {
	mu     sync.Mutex
	w      io.Writer
	rc     *http.ResponseController
	write  time.Duration
	fail   context.CancelFunc
	failed bool
}

func (s *sseWriter) send(name string, data any) {
	b, err := json.Marshal(data)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed {
		return
	}
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.write))
	if _, err := fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, b); err == nil {
		err = s.rc.Flush()
		if err == nil {
			return
		}
	}
	s.failed = true
	s.fail()
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "message": msg})
}
