package matrix

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"

	"maunium.net/go/mautrix"
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
			writeError(w, http.StatusUnauthorized, "M_UNAUTHORIZED", "missing homeserver token")
			return
		}
		// Hashing first makes the comparison independent of the token's length too.
		got := sha256.Sum256([]byte(tok))
		if subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
			writeError(w, http.StatusForbidden, "M_FORBIDDEN", "bad homeserver token")
			return
		}
		next(w, r)
	}
}

func notFound(w http.ResponseWriter, _ *http.Request) {
	writeError(w, http.StatusNotFound, "M_NOT_FOUND", "not provided by this appservice")
}

// handleTransaction records the pushed events durably, then acknowledges. A replayed txn id
// is acknowledged without recording anything again. Hand-written rather than mautrix's
// appservice package, whose handler acknowledges once the events are queued in memory: a
// daemon killed after that ack would lose them, while here the ack waits for the commit.
func (t *Transport) handleTransaction(w http.ResponseWriter, r *http.Request) {
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
	t.log.Debug("pushed transaction", "txn", txnID, "events", len(txn.Events), "new", n, "replayed", replayed)
	if n > 0 {
		t.notify()
	}
	writeJSON(w, http.StatusOK, struct{}{})
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
