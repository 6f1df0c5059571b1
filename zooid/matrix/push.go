package matrix

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"
)

// maxTxnBody bounds a pushed transaction; Synapse batches at most a few hundred events.
const maxTxnBody = 32 << 20

func (t *Transport) pushHandler() http.Handler {
	mux := http.NewServeMux()
	for _, prefix := range []string{"/_matrix/app/v1", ""} {
		mux.HandleFunc("PUT "+prefix+"/transactions/{txnId}", t.authed(t.handleTransaction))
		mux.HandleFunc("GET "+prefix+"/users/{userId}", t.authed(notFound))
		mux.HandleFunc("GET "+prefix+"/rooms/{alias}", t.authed(notFound))
	}
	mux.HandleFunc("POST /_matrix/app/v1/ping", t.authed(t.handlePing))
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "M_UNRECOGNIZED", "unrecognized request")
	})
	return mux
}

// authed checks the homeserver's token: missing → 401, wrong → 403, as the spec asks.
// Each refusal is counted and logged once per distinct cause (see refusals).
func (t *Transport) authed(next http.HandlerFunc) http.HandlerFunc {
	want := sha256.Sum256([]byte(t.opts.HSToken))
	return func(w http.ResponseWriter, r *http.Request) {
		tok := ""
		if h := r.Header.Get("Authorization"); h != "" {
			if v, ok := strings.CutPrefix(h, "Bearer "); ok {
				tok = v
			}
		} else {
			tok = r.URL.Query().Get("access_token")
		}
		if tok == "" {
			t.refused(r, refusalMissing)
			writeError(w, http.StatusUnauthorized, "M_UNAUTHORIZED", "missing homeserver token")
			return
		}
		// Hashing first makes the comparison independent of the token's length too.
		got := sha256.Sum256([]byte(tok))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			t.refused(r, got)
			writeError(w, http.StatusForbidden, "M_FORBIDDEN", "bad homeserver token")
			return
		}
		next(w, r)
	}
}

// refusalMissing is the cause key of a request that carried no token at all.
var refusalMissing = [32]byte{}

// maxRefusalCauses bounds the causes remembered: past it every refusal is
// logged again, which is noisy but never grows memory for whoever sends junk.
const maxRefusalCauses = 16

// refusals counts the push listener's refusals and remembers which causes
// (no token, or the digest of each wrong one) were logged. The homeserver
// retries a refused transaction with backoff for as long as its token is
// wrong, so a log line per request would bury the one that matters, and
// silence would leave an operator guessing why nothing arrives.
type refusals struct {
	mu     sync.Mutex
	n      int
	logged map[[32]byte]bool
}

// count is how many requests were refused so far.
func (r *refusals) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n
}

// add counts a refusal and reports whether its cause is new.
func (r *refusals) add(cause [32]byte) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	if r.logged[cause] {
		return false
	}
	if r.logged == nil {
		r.logged = map[[32]byte]bool{}
	}
	if len(r.logged) < maxRefusalCauses {
		r.logged[cause] = true
	}
	return true
}

// refused counts a request refused for its token and, the first time for its
// cause, says at warn which token to check; the token itself is never logged.
func (t *Transport) refused(r *http.Request, cause [32]byte) {
	if !t.refusals.add(cause) {
		return
	}
	what := "a wrong homeserver token"
	if cause == refusalMissing {
		what = "no homeserver token"
	}
	t.log.Warn("push listener refused a request with "+what+
		"; if the homeserver sent it, its appservice registration's hs_token differs from this daemon's: "+
		"make them equal (regenerate the registration with zooid registration and restart the homeserver)",
		"daemon_token", t.hsTokenFrom(), "id", t.opts.ID, "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr)
}

// hsTokenFrom names where the daemon's hs_token comes from.
func (t *Transport) hsTokenFrom() string {
	if t.opts.HSTokenFrom != "" {
		return t.opts.HSTokenFrom
	}
	return "hs_token"
}

func notFound(w http.ResponseWriter, _ *http.Request) {
	writeError(w, http.StatusNotFound, "M_NOT_FOUND", "not provided by this appservice")
}

// handleTransaction records the pushed events durably, then acknowledges. A replayed txn id
// is acknowledged without recording anything again. Hand-written rather than mautrix's
// appservice package, whose handler acknowledges once the events are queued in memory: a
// daemon killed after that ack would lose them, while here the ack waits for the commit.
func (t *Transport) handleTransaction(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	txnID := r.PathValue("txnId")
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxTxnBody))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "M_TOO_LARGE", fmt.Sprintf("reading transaction: %v", err))
		return
	}
	var txn struct {
		Events []json.RawMessage `json:"events"`
	}
	if err := json.Unmarshal(body, &txn); err != nil {
		writeError(w, http.StatusBadRequest, "M_NOT_JSON", fmt.Sprintf("transaction %s is not valid JSON: %v", txnID, err))
		return
	}
	if err := t.awaitCrypto(r.Context(), body); err != nil {
		// Not acknowledged: its room keys must not be lost.
		writeError(w, http.StatusServiceUnavailable, "M_UNKNOWN", fmt.Sprintf("transaction %s: %v", txnID, err))
		return
	}
	b := batch{txnID: txnID}
	for _, ev := range txn.Events {
		b.events = append(b.events, inboxRecord{Event: ev})
	}
	n, replayed, err := t.store.record(b)
	if err != nil {
		// Not acknowledged: the homeserver retries the transaction later.
		t.log.Error("recording pushed transaction", "txn", txnID, "err", err)
		writeError(w, http.StatusInternalServerError, "M_UNKNOWN", "could not record transaction")
		return
	}
	t.log.Debug("pushed transaction", "txn", txnID, "events", len(txn.Events), "new", len(n), "replayed", replayed)
	t.handOver(n)
	if t.opts.Received != nil {
		t.opts.Received(eventIDs(txn.Events), arrived)
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

// eventIDs are the ids of raw events; an event without one is left out.
func eventIDs(events []json.RawMessage) []id.EventID {
	ids := make([]id.EventID, 0, len(events))
	for _, raw := range events {
		var e struct {
			ID id.EventID `json:"event_id"`
		}
		if json.Unmarshal(raw, &e) == nil && e.ID != "" {
			ids = append(ids, e.ID)
		}
	}
	return ids
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers with a Matrix error body, mautrix's RespError.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	mautrix.RespError{StatusCode: status, ErrCode: code, Err: msg}.Write(w)
}
