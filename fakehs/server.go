package fakehs

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"maunium.net/go/mautrix/appservice"
	"maunium.net/go/mautrix/id"
)

// config collects what the Options set before the server starts.
type config struct {
	serverName  string
	addr        string
	appservices []*appservice.Registration
	logger      *slog.Logger
	pushBackoff time.Duration
	pushMaxWait time.Duration
	profile     Profile
}

// Option configures a Server before it starts.
type Option func(*config)

// WithServerName sets the server name in user, room and alias ids (default "localhost").
func WithServerName(name string) Option { return func(c *config) { c.serverName = name } }

// WithAddr sets the listen address (default "127.0.0.1:0", a free port).
func WithAddr(addr string) Option { return func(c *config) { c.addr = addr } }

// WithAppservice registers an application service; it may be given several times.
func WithAppservice(reg *appservice.Registration) Option {
	return func(c *config) { c.appservices = append(c.appservices, reg) }
}

// WithLogger sets the logger for request and pusher diagnostics (default: discard).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithPushBackoff sets the first and the largest delay between retries of a
// failed appservice transaction (defaults 100ms and 5s; Synapse starts at
// seconds, which is too slow for tests).
func WithPushBackoff(first, max time.Duration) Option {
	return func(c *config) { c.pushBackoff, c.pushMaxWait = first, max }
}

// Server is one fake homeserver. All state is in memory and guarded by mu.
type Server struct {
	cfg      config
	log      *slog.Logger
	listener net.Listener
	http     *http.Server
	url      string
	secret   []byte // keys pagination-token MACs so tokens can't be forged

	ctx      context.Context // cancelled by Close; ends long-polls and pushers
	cancel   context.CancelFunc
	wg       sync.WaitGroup // pushers and the HTTP serve loop
	once     sync.Once
	closeErr error

	// fresh holds connections accepted but not yet used for a request; see Close.
	connMu sync.Mutex
	fresh  map[net.Conn]bool

	// restart is Stop and Restart's bookkeeping (restart.go).
	restart restartState

	mu     sync.RWMutex
	state  *store
	faults *faultSet
	asList []*asState
	reqs   requestLog

	// pushWatch, when set, hears of each transaction as it is first sent.
	pushWatch atomic.Pointer[func(Push)]
}

// New starts a server for a test and closes it when the test ends.
func New(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s, err := Start(opts...)
	if err != nil {
		t.Fatalf("fakehs: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("fakehs close: %v", err)
		}
	})
	return s
}

// Start starts a server; the caller must Close it.
func Start(opts ...Option) (*Server, error) {
	cfg := config{
		serverName:  "localhost",
		addr:        "127.0.0.1:0",
		pushBackoff: 100 * time.Millisecond,
		pushMaxWait: 5 * time.Second,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.logger == nil {
		cfg.logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, log: cfg.logger, secret: make([]byte, 32), faults: newFaultSet()}
	if _, err := rand.Read(s.secret); err != nil {
		return nil, fmt.Errorf("making token secret: %w", err)
	}
	s.state = newStore(cfg.serverName)
	for _, reg := range cfg.appservices {
		as, err := newASState(reg, cfg.serverName)
		if err != nil {
			return nil, err
		}
		s.asList = append(s.asList, as)
		s.state.registerASSender(as)
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", cfg.addr, err)
	}
	s.listener = ln
	s.url = "http://" + ln.Addr().String()
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.http = s.newHTTPServer()
	s.fresh = map[net.Conn]bool{}
	for _, as := range s.asList {
		s.wg.Add(1)
		go s.runPusher(as)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("fakehs serve", "err", err)
		}
	}()
	return s, nil
}

// newHTTPServer is the HTTP server Start and Restart serve with.
func (s *Server) newHTTPServer() *http.Server {
	return &http.Server{
		Handler:           s.handler(),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return s.ctx },
		ConnState:         s.trackConn,
	}
}

// URL is the server's base URL, like "http://127.0.0.1:PORT".
func (s *Server) URL() string { return s.url }

// ServerName is the name in the server's ids, like "localhost".
func (s *Server) ServerName() string { return s.cfg.serverName }

// Close stops HTTP, wakes and ends long-polls and stops the pushers. It is idempotent.
func (s *Server) Close() error {
	s.once.Do(func() {
		s.cancel()
		srv := s.closeOutage() // a stopped server's is already closed
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- srv.Shutdown(ctx) }()
		s.closeFreshConns()
		if err := <-done; err != nil {
			_ = srv.Close()
			s.closeErr = fmt.Errorf("shutting down fakehs: %w", err)
		}
		s.wg.Wait()
	})
	return s.closeErr
}

// RoomIDForAlias resolves a local alias like "#name:localhost".
func (s *Server) RoomIDForAlias(alias id.RoomAlias) (id.RoomID, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	r, ok := s.state.aliases[alias]
	return r, ok
}

// trackConn remembers connections that have not carried a request yet.
func (s *Server) trackConn(c net.Conn, state http.ConnState) {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	if state == http.StateNew {
		s.fresh[c] = true
	} else {
		delete(s.fresh, c)
	}
}

// closeFreshConns closes connections no request ever used. Go's HTTP client
// may dial a spare connection and park it unused; http.Server.Shutdown only
// counts such a connection idle after 5 s, which would make every Close
// after a burst of concurrent requests wait and fail.
func (s *Server) closeFreshConns() {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	for c := range s.fresh {
		_ = c.Close()
		delete(s.fresh, c)
	}
}
