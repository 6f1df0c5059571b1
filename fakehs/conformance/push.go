package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"
)

// pushedTxn is one transaction the homeserver PUT to the appservice, as received.
type pushedTxn struct {
	ID       string
	Events   []gjson.Result
	AuthOK   bool
	Answered int // the status the suite answered with
	// HasEphemeral is whether the body had an "ephemeral" key at all.
	HasEphemeral bool
	// Body is the whole transaction, for the fields beside "events" (MSC2409's to-device
	// messages, MSC3202's key counts and device lists).
	Body gjson.Result
}

// failRule answers 500 to the first transaction containing an event that matches.
type failRule struct {
	match func(ev gjson.Result) bool
	used  bool
}

// pushRecorder plays the appservice side: it records every transaction in arrival order and can
// be told to fail one, to see the homeserver retry it.
type pushRecorder struct {
	hsToken string
	srv     *http.Server
	done    chan struct{}

	mu      sync.Mutex
	txns    []pushedTxn
	badAuth []string
	rules   []*failRule
	pings   []pushedPing
}

// pushedPing is one ping the homeserver forwarded to the appservice (POST /_matrix/app/v1/ping).
type pushedPing struct {
	Body   string // the request body as received
	AuthOK bool
}

// failPingPrefix makes the suite's appservice refuse a ping whose transaction_id starts with it
// (403 M_FORBIDDEN), to see what the homeserver tells the pinging client.
const failPingPrefix = "refuse-"

func startPushRecorder(as *AppService) (*pushRecorder, error) {
	ln := as.Listener
	if ln == nil {
		var err error
		ln, err = net.Listen("tcp", as.PushAddr)
		if err != nil {
			return nil, fmt.Errorf("listening on %s for appservice pushes: %w", as.PushAddr, err)
		}
	}
	r := &pushRecorder{hsToken: as.HSToken, done: make(chan struct{})}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(r.done)
		if err := r.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error("conformance push listener stopped", "err", err)
		}
	}()
	return r, nil
}

// Close stops the listener and waits for its goroutine.
func (r *pushRecorder) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := r.srv.Shutdown(ctx); err != nil {
		_ = r.srv.Close()
	}
	<-r.done
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body)
}

func (r *pushRecorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	authOK := req.Header.Get("Authorization") == "Bearer "+r.hsToken
	const txnPrefix = "/_matrix/app/v1/transactions/"
	if req.Method == http.MethodPost && req.URL.Path == "/_matrix/app/v1/ping" {
		r.servePing(w, req, authOK)
		return
	}
	if req.Method != http.MethodPut || !strings.HasPrefix(req.URL.Path, txnPrefix) {
		// User and alias queries: this appservice knows of nothing it has not registered.
		writeJSON(w, http.StatusNotFound, `{"errcode":"M_NOT_FOUND","error":"unknown to the conformance appservice"}`)
		return
	}
	if !authOK {
		r.mu.Lock()
		r.badAuth = append(r.badAuth, fmt.Sprintf("%s %s Authorization=%q", req.Method, req.URL, req.Header.Get("Authorization")))
		r.mu.Unlock()
		writeJSON(w, http.StatusForbidden, `{"errcode":"M_FORBIDDEN","error":"bad hs_token"}`)
		return
	}
	data, err := io.ReadAll(req.Body)
	if err != nil || !gjson.ValidBytes(data) {
		writeJSON(w, http.StatusBadRequest, `{"errcode":"M_NOT_JSON","error":"transaction body is not JSON"}`)
		return
	}
	txn := pushedTxn{ID: strings.TrimPrefix(req.URL.Path, txnPrefix), Events: gjson.GetBytes(data, "events").Array(), AuthOK: authOK,
		Answered: http.StatusOK, HasEphemeral: gjson.GetBytes(data, "ephemeral").Exists(), Body: gjson.ParseBytes(data)}
	r.mu.Lock()
	for _, rule := range r.rules {
		if rule.used {
			continue
		}
		for _, ev := range txn.Events {
			if rule.match(ev) {
				rule.used = true
				txn.Answered = http.StatusInternalServerError
				break
			}
		}
	}
	r.txns = append(r.txns, txn)
	r.mu.Unlock()
	if txn.Answered != http.StatusOK {
		writeJSON(w, txn.Answered, `{"errcode":"M_UNKNOWN","error":"conformance suite refuses this transaction once"}`)
		return
	}
	writeJSON(w, http.StatusOK, `{}`)
}

// failFirst makes the first transaction that carries an event matching match be answered 500.
func (r *pushRecorder) failFirst(match func(ev gjson.Result) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rules = append(r.rules, &failRule{match: match})
}

// snapshot returns the transactions received so far and the rejected authorisations.
func (r *pushRecorder) snapshot() ([]pushedTxn, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]pushedTxn(nil), r.txns...), append([]string(nil), r.badAuth...)
}

// accepted returns the events of transactions the suite answered 200, in delivery order, with
// redelivered transaction ids counted once.
func (r *pushRecorder) accepted() []gjson.Result {
	var out []gjson.Result
	for _, tx := range r.acceptedTxns() {
		out = append(out, tx.Events...)
	}
	return out
}

// acceptedTxns returns the transactions the suite answered 200, in delivery order, a
// redelivered transaction id once.
func (r *pushRecorder) acceptedTxns() []pushedTxn {
	txns, _ := r.snapshot()
	seen := map[string]bool{}
	var out []pushedTxn
	for _, tx := range txns {
		if tx.Answered != http.StatusOK || seen[tx.ID] {
			continue
		}
		seen[tx.ID] = true
		out = append(out, tx)
	}
	return out
}

// servePing records a forwarded ping and answers it: {} unless the hs_token is wrong (403) or
// the transaction id asks for a refusal (failPingPrefix).
func (r *pushRecorder) servePing(w http.ResponseWriter, req *http.Request, authOK bool) {
	data, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.pings = append(r.pings, pushedPing{Body: string(data), AuthOK: authOK})
	r.mu.Unlock()
	switch {
	case !authOK:
		writeJSON(w, http.StatusForbidden, `{"errcode":"M_FORBIDDEN","error":"bad hs_token"}`)
	case strings.HasPrefix(gjson.GetBytes(data, "transaction_id").String(), failPingPrefix):
		writeJSON(w, http.StatusForbidden, `{"errcode":"M_FORBIDDEN","error":"the conformance appservice refuses this ping"}`)
	default:
		writeJSON(w, http.StatusOK, `{}`)
	}
}

// pingsWith returns the forwarded pings whose transaction_id is txnID.
func (r *pushRecorder) pingsWith(txnID string) []pushedPing {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []pushedPing
	for _, p := range r.pings {
		if gjson.Get(p.Body, "transaction_id").String() == txnID {
			out = append(out, p)
		}
	}
	return out
}

// acceptedBodies returns the whole bodies of transactions the suite answered 200, in delivery
// order, with redelivered transaction ids counted once.
func (r *pushRecorder) acceptedBodies() []gjson.Result {
	var out []gjson.Result
	for _, tx := range r.acceptedTxns() {
		out = append(out, tx.Body)
	}
	return out
}
