package steps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"maunium.net/go/mautrix/id"
)

// drain answers a shared homeserver's appservice pushes while no daemon
// holds a slot's push port. A real homeserver queues every event of the
// appservice's rooms and retries with growing backoff while nobody listens,
// so without it a scenario's daemon would be handed the generated history
// (and the previous scenario's leftovers) as if they were new, and
// would start late behind the backoff.
type drain struct {
	srv     *http.Server
	token   string
	done    chan struct{}
	mu      sync.Mutex
	seen    map[id.EventID]bool
	changed chan struct{}
}

// pushSocket is an appservice push port, bound once and held by the harness
// for as long as a homeserver may push to it. The drain and the daemon (in
// this process, or a child that inherits the descriptor) each serve on a
// duplicate of the socket, so between them the port is never unbound: no
// other scenario, and nothing else on the machine, can take it meanwhile.
type pushSocket struct {
	addr string   // host:port the registration's url names
	file *os.File // the bound socket; duplicates of it are handed out
}

// bindPush binds addr ("127.0.0.1:0" picks a port) and keeps it bound.
func bindPush(addr string) (*pushSocket, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("binding the appservice push port %s: %w", addr, err)
	}
	defer ln.Close()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		return nil, fmt.Errorf("holding the appservice push port %s: %w", addr, err)
	}
	return &pushSocket{addr: ln.Addr().String(), file: f}, nil
}

// listener is a new listener on the held socket; closing it leaves the
// port bound. Connections that arrive while nobody accepts wait in the
// socket's backlog for the next listener.
func (p *pushSocket) listener() (net.Listener, error) {
	ln, err := net.FileListener(p.file)
	if err != nil {
		return nil, fmt.Errorf("listening on the held push port %s: %w", p.addr, err)
	}
	return ln, nil
}

// close unbinds the port (once every listener on it is closed too).
func (p *pushSocket) close() error { return p.file.Close() }

// startDrain serves pushes on a listener of the held socket.
func startDrain(sock *pushSocket, hsToken string) (*drain, error) {
	ln, err := sock.listener()
	if err != nil {
		return nil, fmt.Errorf("draining pushes: %w", err)
	}
	d := &drain{token: hsToken, done: make(chan struct{}), seen: map[id.EventID]bool{}, changed: make(chan struct{})}
	d.srv = &http.Server{Handler: http.HandlerFunc(d.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		defer close(d.done)
		if err := d.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return
		}
	}()
	return d, nil
}

func (d *drain) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+d.token && r.URL.Query().Get("access_token") != d.token {
		http.Error(w, `{"errcode":"M_FORBIDDEN"}`, http.StatusForbidden)
		return
	}
	var txn struct {
		Events []struct {
			ID id.EventID `json:"event_id"`
		} `json:"events"`
	}
	_ = json.NewDecoder(r.Body).Decode(&txn)
	d.mu.Lock()
	for _, e := range txn.Events {
		d.seen[e.ID] = true
	}
	close(d.changed)
	d.changed = make(chan struct{})
	d.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte("{}"))
}

// waitFor blocks until the homeserver has pushed the event here.
func (d *drain) waitFor(ctx context.Context, e id.EventID) error {
	for {
		d.mu.Lock()
		ok, ch := d.seen[e], d.changed
		d.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for the homeserver to push %s before the daemon starts: %w", e, ctx.Err())
		}
	}
}

// stop stops serving; the socket stays bound for the daemon.
func (d *drain) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := d.srv.Shutdown(ctx)
	<-d.done
	if err != nil {
		return fmt.Errorf("stopping the push drain: %w", err)
	}
	return nil
}
