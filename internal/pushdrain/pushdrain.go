// Package pushdrain answers a homeserver's appservice pushes while no daemon
// listens on the push port, and tells which events arrived, so a daemon
// started afterwards is not handed set-up events as live ones. The steps'
// shared homeservers and `zooid replay` use it.
package pushdrain

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"sync"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"
)

// Drain serves appservice pushes (any transaction path) and records their
// event ids.
type Drain struct {
	srv     *http.Server
	token   string
	done    chan struct{}
	once    sync.Once
	stopErr error
	mu      sync.Mutex
	seen    map[id.EventID]bool
	changed chan struct{}
}

// Start serves pushes on ln until Stop. With a non-empty hsToken a push that
// does not carry it (Authorization header or access_token) is refused with
// M_FORBIDDEN and not recorded; with "" every push is taken.
func Start(ln net.Listener, hsToken string) *Drain {
	d := &Drain{token: hsToken, done: make(chan struct{}), seen: map[id.EventID]bool{}, changed: make(chan struct{})}
	d.srv = &http.Server{Handler: http.HandlerFunc(d.serve), ReadHeaderTimeout: 5 * time.Second}
	// Every answer closes its connection. A daemon takes the port over when
	// the drain stops, which closes the drain's idle connections; Synapse
	// sends its next push over one it has not yet seen closed, fails it, holds
	// the appservice's transactions for a retry seconds later and drops the
	// to-device messages of those transactions (element-hq/synapse#14710):
	// room keys for the scenario that just began.
	d.srv.SetKeepAlivesEnabled(false)
	go func() {
		defer close(d.done)
		_ = d.srv.Serve(ln)
	}()
	return d
}

func (d *Drain) serve(w http.ResponseWriter, r *http.Request) {
	if d.token != "" && r.Header.Get("Authorization") != "Bearer "+d.token && r.URL.Query().Get("access_token") != d.token {
		mautrix.RespError{StatusCode: http.StatusForbidden, ErrCode: "M_FORBIDDEN", Err: "bad hs_token"}.Write(w)
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

// Wait blocks until every event of evs was pushed here. When ctx ends first it
// returns the first event still missing with ctx's error.
func (d *Drain) Wait(ctx context.Context, evs ...id.EventID) (id.EventID, error) {
	for {
		d.mu.Lock()
		var missing id.EventID
		for _, e := range evs {
			if !d.seen[e] {
				missing = e
				break
			}
		}
		ch := d.changed
		d.mu.Unlock()
		if missing == "" {
			return "", nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return missing, ctx.Err()
		}
	}
}

// Stop stops serving and waits for the server to end; the listener is closed,
// the socket it was taken from stays bound. Later calls return the first's
// result.
func (d *Drain) Stop() error {
	d.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d.stopErr = d.srv.Shutdown(ctx)
		<-d.done
	})
	return d.stopErr
}
