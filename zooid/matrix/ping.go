package matrix

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"maunium.net/go/mautrix"

	"github.com/zooid-dev/zooid/zooid/internal/mxcall"
)

// pingTimeout bounds the start-up ping; the homeserver itself gives up on the
// appservice after about 30 s.
const pingTimeout = 45 * time.Second

// pingAttempts bounds the pings tried when the homeserver's connection to
// this daemon dropped, 200 ms apart and doubling (3 s in all). Five, not
// three: a daemon started while Synapse holds its transactions for a retry
// (its pushes failed while no daemon listened) has its ping force that retry,
// and the ping sent beside it may fail on Synapse's side ("AlreadyCalled:
// Tried to cancel an already-called event", seen three times in a row under
// load) until the retry is through.
const pingAttempts = 5

// quickTimeout is how soon an M_CONNECTION_TIMEOUT must come to mean a
// dropped connection rather than an appservice too slow to answer.
const quickTimeout = 5 * time.Second

// droppedPing reports whether a failed ping, answered after took, failed on
// the homeserver's connection to this daemon rather than on the registration,
// so that a fresh attempt can succeed. Synapse may send the ping over a
// kept-alive connection to the push port that whoever listened there before
// this daemon has closed, and does not retry a ping itself: it answers
// M_CONNECTION_FAILED "Connection was closed cleanly" when the close came
// before the request (seen on Synapse 1.160 in 1 of 13 daemon starts on one
// port), and M_CONNECTION_TIMEOUT "Timeout waiting for response from remote
// server" at once when it came after (Twisted's ResponseNeverReceived; seen in
// CI 2 s into a scenario, far inside the bound on a forwarded ping). A timeout that
// took its time is a slow appservice, and trying again would only wait again.
func droppedPing(err error, took time.Duration) bool {
	return errors.Is(err, mautrix.MConnectionFailed) ||
		errors.Is(err, mautrix.MConnectionTimeout) && took < quickTimeout
}

// pings remembers the transaction ids of the pings the homeserver forwarded
// here, so the start-up check knows its ping reached this very listener.
type pings struct {
	mu   sync.Mutex
	seen map[string]bool
}

func (p *pings) add(txnID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.seen == nil {
		p.seen = map[string]bool{}
	}
	p.seen[txnID] = true
}

func (p *pings) has(txnID string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[txnID]
}

// handlePing answers the homeserver's POST /_matrix/app/v1/ping (hs_token
// already checked) and remembers its transaction id.
func (t *Transport) handlePing(w http.ResponseWriter, r *http.Request) {
	var body struct {
		TxnID string `json:"transaction_id"`
	}
	data, err := io.ReadAll(io.LimitReader(r.Body, 64<<10))
	if err == nil && len(data) > 0 {
		// transaction_id is optional and may be null; a body without one is still a ping.
		_ = json.Unmarshal(data, &body)
	}
	if body.TxnID != "" {
		t.pings.add(body.TxnID)
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

// checkRegistration pings the appservice through the homeserver
// (POST /_matrix/client/v1/appservice/{id}/ping, Matrix 1.7) before anything
// else, so a registration that does not match this daemon fails the start
// with what to fix instead of as silence: a wrong id or as_token, or a url
// that does not lead to this push listener. A homeserver without the
// endpoint is warned about and trusted.
func (t *Transport) checkRegistration(ctx context.Context) error {
	if t.opts.ID == "" || t.listener == nil {
		return nil // no push listener: the homeserver is never asked to reach us
	}
	cli, err := mautrix.NewClient(t.opts.Homeserver, "", t.opts.ASToken)
	if err != nil {
		return fmt.Errorf("client for %s: %w", t.opts.Homeserver, err)
	}
	txnID := "zooid-start-" + rand.Text()
	refusedBefore := t.refusals.count()
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	var resp *mautrix.RespAppservicePing
	for attempt := 1; ; attempt++ {
		sent := time.Now()
		resp, err = cli.AppservicePing(pctx, t.opts.ID, txnID)
		if !droppedPing(err, time.Since(sent)) || attempt == pingAttempts {
			break
		}
		wait := 200 * time.Millisecond << (attempt - 1)
		t.log.Info("the homeserver's ping did not reach this daemon; pinging again", "attempt", attempt, "in", wait, "err", err)
		select {
		case <-pctx.Done():
		case <-time.After(wait):
		}
	}
	where := fmt.Sprintf("%s (listening on %s)", t.PushURL(), t.listener.Addr())
	switch {
	case err == nil:
		if !t.pings.has(txnID) {
			return fmt.Errorf("checking the appservice registration %q: the homeserver's ping went to another listener; "+
				"its registration's url must lead to this daemon at %s", t.opts.ID, where)
		}
		t.log.Info("appservice registration checked", "id", t.opts.ID, "ping_ms", resp.DurationMS)
		return nil
	case errors.Is(err, mautrix.MUnrecognized) || mxcall.Status(err) == http.StatusNotFound:
		t.log.Warn("the homeserver has no appservice ping (Matrix 1.7); the registration is not checked", "err", err)
		return nil
	case errors.Is(err, mautrix.MUnknownToken) || errors.Is(err, mautrix.MMissingToken):
		return fmt.Errorf("checking the appservice registration %q: the homeserver does not know this as_token; "+
			"is the registration installed (Synapse: app_service_config_files) and the homeserver restarted? %w", t.opts.ID, err)
	case errors.Is(err, mautrix.MForbidden):
		return fmt.Errorf("checking the appservice registration: the homeserver's registration for this as_token is not %q; "+
			"set the matrix transport's id to the registration's id: %w", t.opts.ID, err)
	case errors.Is(err, mautrix.MBadStatus):
		return t.badStatus(err, where, t.refusals.count() > refusedBefore)
	case errors.Is(err, mautrix.MConnectionFailed) || errors.Is(err, mautrix.MConnectionTimeout):
		return fmt.Errorf("checking the appservice registration %q: the homeserver could not reach this daemon; "+
			"its registration's url must lead to %s: %w", t.opts.ID, where, err)
	case errors.Is(err, mautrix.MURLNotSet):
		return fmt.Errorf("checking the appservice registration %q: the registration has no url; set it to %s: %w", t.opts.ID, where, err)
	default:
		return fmt.Errorf("checking the appservice registration %q at %s: %w", t.opts.ID, t.opts.Homeserver, err)
	}
}

// badStatus explains a ping the homeserver delivered to the registration's
// url and got an error status for (M_BAD_STATUS, the status inside). A 401 or
// 403 that this listener gave (refusedHere) is this daemon refusing the
// homeserver's token, not a url that leads nowhere: naming the url there sent
// an operator to the wrong line of the registration.
func (t *Transport) badStatus(err error, where string, refusedHere bool) error {
	status := pingStatus(err)
	switch {
	case refusedHere && (status == http.StatusUnauthorized || status == http.StatusForbidden):
		return fmt.Errorf("checking the appservice registration %q: the homeserver reached this daemon, but this daemon refused "+
			"the homeserver's token: the registration's hs_token differs from this daemon's (%s); make them equal, e.g. "+
			"regenerate the registration with zooid registration and restart the homeserver: %w", t.opts.ID, t.hsTokenFrom(), err)
	case status != 0:
		return fmt.Errorf("checking the appservice registration %q: the homeserver reached something else at the registration's url, "+
			"which answered HTTP %d; the url must lead to this daemon at %s: %w", t.opts.ID, status, where, err)
	default:
		return fmt.Errorf("checking the appservice registration %q: the homeserver's ping to the registration's url failed; "+
			"the url must lead to this daemon at %s: %w", t.opts.ID, where, err)
	}
}

// pingStatus is the appservice's HTTP status a homeserver reports inside an
// M_BAD_STATUS ping error (Synapse: "status"), 0 when there is none.
func pingStatus(err error) int {
	var he mautrix.HTTPError
	var hp *mautrix.HTTPError
	var re *mautrix.RespError
	switch {
	case errors.As(err, &he):
		re = he.RespError
	case errors.As(err, &hp):
		re = hp.RespError
	}
	if re == nil {
		return 0
	}
	if n, ok := re.ExtraData["status"].(float64); ok {
		return int(n)
	}
	return 0
}
