package fakehs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"maunium.net/go/mautrix/id"
)

// TurnedAway is one request a stopped server read and closed unanswered.
type TurnedAway struct {
	Method string
	Path   string // escaped, without the query
	User   id.UserID
	At     time.Time
}

// restartState is a Server's Stop/Restart bookkeeping, apart from the rest so
// that a server never stopped runs exactly as before.
type restartState struct {
	mu     sync.Mutex // guards Server.http and Server.listener while an outage starts or ends, and out and closed
	out    *outage    // the outage in progress; nil while serving
	closed bool       // Close ran: nothing serves again

	tmu    sync.Mutex
	turned []TurnedAway

	paused atomic.Bool // appservice pushes wait while set
}

// outage is one stop: the listener on the kept address that reads each
// request and closes its connection unanswered.
type outage struct {
	ln    net.Listener
	wg    sync.WaitGroup // the accept loop and a goroutine per connection
	mu    sync.Mutex     // guards the fields below; never held while waiting
	over  bool           // set once the outage ends: what is read then is not recorded
	conns map[net.Conn]bool

	// until, when set, ends the outage by itself after its n-th match.
	until   *Fault
	n       int
	matched int

	ended chan struct{} // closed when the server serves again (or was closed)
	err   error         // the restart's error, once ended
}

// Stop stops serving as a homeserver process that went down would: the HTTP
// server is closed (requests in flight lose their connections; a handler
// already running may still make its change, as a server killed after a
// write would) and, until Restart, the same address takes each new connection,
// reads its request and closes it unanswered, recorded in TurnedAway. (A port
// nobody listened on would refuse connections without a trace a test could
// wait on.) Appservice pushes pause after the transaction on its way. All
// state (rooms, events, tokens, transaction ids seen, the push queues) is
// kept for Restart.
func (s *Server) Stop() error { return s.stop(nil, 0) }

// StopUntil stops the server as Stop does and starts it again by itself, as
// Restart does, right after it turned away the n-th request matching m (its
// Method, PathPattern and User, as for a Fault; the rest of m is ignored). So
// exactly n matching requests are turned away however slow the test is.
// AwaitRestart waits for it.
func (s *Server) StopUntil(m Fault, n int) error {
	if n < 1 {
		return fmt.Errorf("fakehs: StopUntil needs at least one request to turn away, got %d", n)
	}
	return s.stop(&m, n)
}

func (s *Server) stop(until *Fault, n int) error {
	rs := &s.restart
	rs.mu.Lock()
	defer rs.mu.Unlock()
	switch {
	case rs.closed:
		return errors.New("fakehs: stopping a closed server")
	case rs.out != nil:
		return errors.New("fakehs: already stopped")
	}
	rs.paused.Store(true)
	addr := s.listener.Addr().String()
	// Close, not Shutdown: a process going down does not finish its requests.
	// It closes the listener too, so the address is free to listen on again.
	closeErr := s.http.Close()
	s.closeFreshConns()
	ln, err := listenAgain(addr)
	if err != nil {
		return fmt.Errorf("fakehs: stopped, but can't keep %s to turn requests away: %w", addr, err)
	}
	o := &outage{ln: ln, conns: map[net.Conn]bool{}, until: until, n: n, ended: make(chan struct{})}
	rs.out = o
	s.listener = ln
	o.wg.Add(1)
	go s.turnAway(o)
	if closeErr != nil {
		return fmt.Errorf("fakehs: stopping: %w", closeErr)
	}
	return nil
}

// listenAgain listens on an address just closed. Go listens with
// SO_REUSEADDR, so connections of the old listener in TIME_WAIT don't block
// it; a few tries cover a dialer that took the port as its own for a moment.
func listenAgain(addr string) (net.Listener, error) {
	var err error
	for range 20 {
		var ln net.Listener
		if ln, err = net.Listen("tcp", addr); err == nil {
			return ln, nil
		}
		time.Sleep(25 * time.Millisecond)
	}
	return nil, err
}

// turnAway is a stopped server's accept loop.
func (s *Server) turnAway(o *outage) {
	defer o.wg.Done()
	for {
		c, err := o.ln.Accept()
		if err != nil {
			return // Restart or Close closed the listener
		}
		o.mu.Lock()
		if o.over {
			o.mu.Unlock()
			_ = c.Close()
			return
		}
		o.conns[c] = true
		o.wg.Add(1)
		o.mu.Unlock()
		go s.turnAwayConn(o, c)
	}
}

// turnAwayConn reads one request and closes its connection unanswered. A
// connection that sends nothing (a client's spare) is closed at the restart,
// or after a while, and not recorded.
func (s *Server) turnAwayConn(o *outage, c net.Conn) {
	defer o.wg.Done()
	defer func() {
		o.mu.Lock()
		delete(o.conns, c)
		o.mu.Unlock()
		_ = c.Close()
	}()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	r, err := http.ReadRequest(bufio.NewReader(c))
	if err != nil {
		return
	}
	t := TurnedAway{Method: r.Method, Path: r.URL.EscapedPath(), User: s.peekUser(r), At: time.Now()}
	o.mu.Lock()
	if o.over {
		o.mu.Unlock()
		return // the outage ended while this request was read
	}
	s.restart.tmu.Lock()
	s.restart.turned = append(s.restart.turned, t)
	s.restart.tmu.Unlock()
	end := false
	if o.until != nil && t.Matches(*o.until) {
		o.matched++
		end = o.matched == o.n
	}
	o.mu.Unlock()
	if end {
		// Not in o.wg: restarting waits for it.
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := s.restartFrom(o); err != nil && !errors.Is(err, errOutageOver) {
				s.log.Error("fakehs: restart after the outage", "err", err)
			}
		}()
	}
}

// Matches says whether the request fits m's Method, PathPattern (on the
// escaped path) and User, as a Fault would; the rest of m is ignored.
func (t TurnedAway) Matches(m Fault) bool {
	if m.Method != "" && m.Method != t.Method {
		return false
	}
	if m.PathPattern != "" {
		if ok, _ := path.Match(m.PathPattern, t.Path); !ok {
			return false
		}
	}
	return m.User == "" || m.User == t.User
}

// TurnedAwayRequests is every request a stopped server turned away, over all
// its stops, in order.
func (s *Server) TurnedAwayRequests() []TurnedAway {
	s.restart.tmu.Lock()
	defer s.restart.tmu.Unlock()
	return append([]TurnedAway(nil), s.restart.turned...)
}

var errOutageOver = errors.New("fakehs: not stopped")

// Restart serves again on the address Stop kept, with all the state, and
// resumes appservice pushes.
func (s *Server) Restart() error {
	s.restart.mu.Lock()
	o := s.restart.out
	s.restart.mu.Unlock()
	if o == nil {
		return errOutageOver
	}
	return s.restartFrom(o)
}

// restartFrom ends the outage o, if it is still the current one.
func (s *Server) restartFrom(o *outage) error {
	rs := &s.restart
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.out != o {
		return errOutageOver
	}
	addr := o.ln.Addr().String()
	o.end()
	rs.out = nil
	ln, err := listenAgain(addr)
	if err != nil {
		o.err = fmt.Errorf("fakehs: restarting on %s: %w", addr, err)
		close(o.ended)
		return o.err
	}
	s.listener = ln
	s.http = s.newHTTPServer()
	srv := s.http
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("fakehs serve", "err", err)
		}
	}()
	rs.paused.Store(false)
	for _, as := range s.asList {
		as.wake()
	}
	close(o.ended)
	return nil
}

// end closes the outage's listener and connections and waits for its goroutines.
func (o *outage) end() {
	_ = o.ln.Close()
	o.mu.Lock()
	o.over = true
	for c := range o.conns {
		_ = c.Close()
	}
	o.mu.Unlock()
	o.wg.Wait()
}

// AwaitRestart waits until a stopped server serves again and returns its
// restart's error; it returns at once when the server is serving.
func (s *Server) AwaitRestart(ctx context.Context) error {
	s.restart.mu.Lock()
	o := s.restart.out
	s.restart.mu.Unlock()
	if o == nil {
		return nil
	}
	select {
	case <-o.ended:
		return o.err
	case <-ctx.Done():
		return fmt.Errorf("fakehs: waiting for the restart: %w", ctx.Err())
	}
}

// closeOutage ends an outage in progress for good, for Close, and returns
// the HTTP server to shut down.
func (s *Server) closeOutage() *http.Server {
	rs := &s.restart
	rs.mu.Lock()
	defer rs.mu.Unlock()
	rs.closed = true
	if o := rs.out; o != nil {
		o.end()
		rs.out = nil
		o.err = errors.New("fakehs: closed while stopped")
		close(o.ended)
	}
	return s.http
}

// Repush queues again, each with its own txn id, every transaction already
// delivered to the appservice with this id from the one that carried the
// event since on, as a homeserver that lost the acknowledgements would (it
// re-sends unacknowledged transactions as they were). They go before anything
// not yet pushed. It returns how many transactions; Repushed counts those
// acknowledged. The appservice must act on none of their events again.
func (s *Server) Repush(asID string, since id.EventID) (int, error) {
	as := s.appservice(asID)
	if as == nil {
		return 0, fmt.Errorf("fakehs: no appservice %q", asID)
	}
	as.qmu.Lock()
	from := -1
	for i, t := range as.pushed {
		for _, e := range t.events {
			if e.ID == since {
				from = i
				break
			}
		}
		if from >= 0 {
			break
		}
	}
	if from < 0 {
		as.qmu.Unlock()
		return 0, fmt.Errorf("fakehs: no transaction pushed to %q carried %s", asID, since)
	}
	again := as.pushed[from:]
	as.repush = append(as.repush, again...)
	as.qmu.Unlock()
	as.wake()
	return len(again), nil
}

// Repushed is how many re-pushed transactions the appservice with this id
// has acknowledged.
func (s *Server) Repushed(asID string) int {
	as := s.appservice(asID)
	if as == nil {
		return 0
	}
	as.qmu.Lock()
	defer as.qmu.Unlock()
	return as.repushed
}

func (s *Server) appservice(asID string) *asState {
	for _, as := range s.asList {
		if as.reg.ID == asID {
			return as
		}
	}
	return nil
}

// wake tells the pusher to look at its queues again.
func (as *asState) wake() {
	select {
	case as.signal <- struct{}{}:
	default:
	}
}
