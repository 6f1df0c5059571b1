package steps

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
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

func startDrain(addr, hsToken string) (*drain, error) {
	var ln net.Listener
	var err error
	// The daemon that held the port may have only just let go of it.
	for range 50 {
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return nil, fmt.Errorf("draining pushes on %s: %w", addr, err)
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

// stop frees the port for the daemon.
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
