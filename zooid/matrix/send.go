package matrix

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/internal/mxcall"
)

// defaultSendPatience is how long a send keeps retrying a homeserver that is down or
// failing, at the least: longer than Synapse takes to restart. With the backoff capped at
// 10 s that is about a dozen tries.
const defaultSendPatience = time.Minute

// Send posts an event into room as the agent user as, with txnID as the Matrix transaction
// id so that a retry (here or by the caller) can't post twice. A 429 waits the server's
// retry_after_ms (bounded) and retries; 5xx, connection failures and a try left unanswered
// for Options.PostTimeout back off and retry with the same txn id; any other 4xx fails at
// once with the Matrix errcode in the error. It gives up after sendAttempts tries, but not
// before sendPatience has passed since the first: a homeserver restarting (down, or
// answering 502 behind its proxy) for less than that gets the post once it is back. An
// empty txnID gets a random one, shared by the retries of this call.
// Hand-written rather than mautrix's retries, which read only the Retry-After header (Synapse
// gives retry_after_ms in the body), wait up to 10 minutes and log through zerolog, not slog.
func (t *Transport) Send(ctx context.Context, as id.UserID, room id.RoomID, evType event.Type, content any, txnID string) (evID id.EventID, err error) {
	if txnID == "" {
		txnID = "zooid-" + rand.Text()
	}
	defer func() { t.trace.Record(tracePost(t.trace, as, room, evType, content, txnID, evID, err)) }()
	cli := t.Client(as)
	if cli == nil {
		return "", fmt.Errorf("sending %s to %s: no client for %s", evType.Type, room, as)
	}
	// Encrypted once, before the tries: every retry sends the same
	// ciphertext under the same txn id.
	sendType, sendContent, err := t.sealed(ctx, as, room, evType, content)
	if err != nil {
		return "", err
	}
	var lastErr error
	began := time.Now()
	for attempt := 1; ; attempt++ {
		// mautrix's own retries are off: this loop owns the policy and the txn id.
		// Each try has a deadline of its own: a homeserver that accepted the
		// request and never answers would otherwise hold it for the client's
		// whole timeout (mautrix: 3 minutes), and the retry with the same txn
		// id is what gets the answer once it is back.
		tctx, cancel := context.WithTimeout(mautrix.WithMaxRetries(ctx, 0), t.sendTryLimit)
		resp, err := cli.SendMessageEvent(tctx, room, sendType, sendContent, mautrix.ReqSendEvent{TransactionID: txnID})
		cancel()
		if err == nil {
			return resp.EventID, nil
		}
		lastErr = err
		if ctx.Err() != nil {
			return "", fmt.Errorf("sending %s to %s as %s: %w", evType.Type, room, as, ctx.Err())
		}
		wait, retry := t.retryPolicy(err, attempt)
		if !retry || (attempt >= t.sendAttempts && time.Since(began)+wait > t.sendPatience) {
			break
		}
		t.log.Warn("send failed, retrying", "user", as, "room", room, "txn", txnID, "attempt", attempt, "retry_in", wait, "err", err)
		if !mxcall.Sleep(ctx, wait) {
			return "", fmt.Errorf("sending %s to %s as %s: %w", evType.Type, room, as, ctx.Err())
		}
	}
	var httpErr mautrix.HTTPError
	if errors.As(lastErr, &httpErr) && httpErr.RespError != nil {
		return "", fmt.Errorf("sending %s to %s as %s: %s: %w", evType.Type, room, as, httpErr.RespError.ErrCode, lastErr)
	}
	return "", fmt.Errorf("sending %s to %s as %s: %w", evType.Type, room, as, lastErr)
}

// retryPolicy says whether a failed send is worth retrying and after how long.
func (t *Transport) retryPolicy(err error, attempt int) (time.Duration, bool) {
	var httpErr mautrix.HTTPError
	if !errors.As(err, &httpErr) || httpErr.Response == nil {
		// No HTTP response: the connection failed, the event may or may not have landed;
		// the same txn id makes the retry safe either way.
		return backoff(t.backoffBase, attempt, 10*time.Second), true
	}
	status := httpErr.Response.StatusCode
	switch {
	case status == http.StatusTooManyRequests:
		wait := t.backoffBase
		if httpErr.RespError != nil {
			if ms, ok := httpErr.RespError.ExtraData["retry_after_ms"].(float64); ok && ms > 0 {
				wait = time.Duration(ms) * time.Millisecond
			}
		}
		if s := httpErr.Response.Header.Get("Retry-After"); s != "" {
			if secs, err := strconv.Atoi(s); err == nil && secs > 0 && wait == t.backoffBase {
				wait = time.Duration(secs) * time.Second
			}
		}
		return min(wait, t.maxRetryAfter), true
	case status >= 500:
		return backoff(t.backoffBase, attempt, 10*time.Second), true
	default:
		return 0, false
	}
}
