package fakehs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// pingTimeout bounds the forwarded ping; Synapse answers 504
// M_CONNECTION_TIMEOUT when the appservice takes longer.
const pingTimeout = 30 * time.Second

// handlePing serves POST /_matrix/client/v1/appservice/{appserviceId}/ping
// as Synapse's AppservicePingRestServlet: only the appservice itself may
// ping (403 M_FORBIDDEN for a user's token or another appservice's id); the
// server forwards {"transaction_id": …} (null when the request had none) to
// the appservice's /_matrix/app/v1/ping with the hs_token and answers
// {"duration_ms"} on a 2xx, 502 M_BAD_STATUS (with the appservice's status
// and body), 502 M_CONNECTION_FAILED or 504 M_CONNECTION_TIMEOUT otherwise.
// The server lock is not held while the appservice answers, so an
// appservice may call the server back from its ping handler.
func (s *Server) handlePing(w http.ResponseWriter, r *http.Request) {
	unlock := s.lock(false)
	noPing := s.cfg.profile.NoPing
	c, err := s.authenticate(r)
	unlock()
	if noPing {
		writeError(w, mErr(http.StatusNotFound, "M_UNRECOGNIZED", "Unrecognized request"))
		return
	}
	if err != nil {
		writeError(w, err)
		return
	}
	switch {
	case c.AS == nil:
		writeError(w, errForbidden("Only application services can use the /appservice/ping endpoint"))
		return
	case c.AS.reg.ID != r.PathValue("appserviceId"):
		writeError(w, errForbidden("Mismatching application service ID in path"))
		return
	}
	var req struct {
		TxnID json.RawMessage `json:"transaction_id"`
	}
	if err := readJSON(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if c.AS.reg.URL == "" {
		writeError(w, mErr(http.StatusBadRequest, "M_URL_NOT_SET", "Application service URL is not configured."))
		return
	}
	txnID := req.TxnID
	if len(txnID) == 0 {
		txnID = json.RawMessage("null")
	}
	start := time.Now()
	if err := s.forwardPing(r.Context(), c.AS, txnID); err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]int64{"duration_ms": time.Since(start).Milliseconds()})
}

// forwardPing posts the ping to the appservice and maps its failure to the
// error Synapse answers the client with.
func (s *Server) forwardPing(ctx context.Context, as *asState, txnID json.RawMessage) error {
	ctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	u := strings.TrimRight(as.reg.URL, "/") + "/_matrix/app/v1/ping"
	body := mustJSON(map[string]json.RawMessage{"transaction_id": txnID})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("building ping request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+as.reg.ServerToken)
	req.Header.Set("Content-Type", "application/json")
	client := &http.Client{}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return mErr(http.StatusGatewayTimeout, "M_CONNECTION_TIMEOUT", "Timed out while pinging application service")
		}
		return mErr(http.StatusBadGateway, "M_CONNECTION_FAILED", "%v", err)
	}
	defer resp.Body.Close()
	got, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return mErr(http.StatusBadGateway, "M_BAD_STATUS", "HTTP %d %s", resp.StatusCode, http.StatusText(resp.StatusCode)).
			WithExtraData(map[string]any{"status": resp.StatusCode, "body": string(got)})
	}
	return nil
}
