package fakehs

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"maunium.net/go/mautrix/id"
)

// maxTxnEvents bounds one appservice transaction, as Synapse batches at 100.
const maxTxnEvents = 100

// runPusher is the one goroutine per appservice that delivers its queue in
// order. A failed transaction is retried with the same txn id and the same
// events until the appservice answers 2xx, backing off between attempts.
func (s *Server) runPusher(as *asState) {
	defer s.wg.Done()
	client := &http.Client{Timeout: 30 * time.Second}
	defer client.CloseIdleConnections()
	for {
		if s.restart.paused.Load() {
			// Stopped: nothing is pushed until Restart wakes the pusher.
			as.heldBackOnce()
			select {
			case <-as.signal:
				continue
			case <-s.ctx.Done():
				return
			}
		}
		if again, ok := as.nextRepush(); ok {
			if !s.deliver(client, as, again.id, s.transactionBody(as, again.events, again.extras)) {
				return // closed
			}
			as.popRepush()
			continue
		}
		batch, extras := as.peek()
		if len(batch) == 0 && extras.empty() {
			select {
			case <-as.signal:
				continue
			case <-s.ctx.Done():
				return
			}
		}
		as.txnSeq++
		txnID := strconv.FormatInt(as.txnSeq, 10)
		body := s.transactionBody(as, batch, extras)
		if len(batch) > 0 {
			s.notePush(as, txnID, batch)
		}
		if !s.deliver(client, as, txnID, body) {
			return // closed
		}
		as.pop(len(batch), extras, txnID)
	}
}

// Push is one appservice transaction as fakehs sends it the first time.
type Push struct {
	Appservice string
	TxnID      string
	Events     []id.EventID
	// At is just before the transaction's first PUT: where the appservice's
	// part of an event's way begins.
	At time.Time
}

// WatchPushes has f hear of every transaction fakehs pushes from now on,
// before its first attempt (a retry is not heard again), on the pusher's
// goroutine: f must be quick. A benchmark times an event from here to what
// the appservice does with it. nil stops it.
func (s *Server) WatchPushes(f func(Push)) {
	if f == nil {
		s.pushWatch.Store(nil)
		return
	}
	s.pushWatch.Store(&f)
}

func (s *Server) notePush(as *asState, txnID string, batch []*evt) {
	f := s.pushWatch.Load()
	if f == nil {
		return
	}
	ids := make([]id.EventID, len(batch))
	for i, e := range batch {
		ids[i] = e.ID
	}
	(*f)(Push{Appservice: as.reg.ID, TxnID: txnID, Events: ids, At: time.Now()})
}

// heldBackOnce counts a look at the queues while stopped, so a test can
// wait for the pusher to have held back.
func (as *asState) heldBackOnce() {
	as.qmu.Lock()
	defer as.qmu.Unlock()
	as.heldBack++
}

func (as *asState) heldBackCount() int {
	as.qmu.Lock()
	defer as.qmu.Unlock()
	return as.heldBack
}

// nextRepush is the next transaction Repush queued, if any.
func (as *asState) nextRepush() (pushedTxn, bool) {
	as.qmu.Lock()
	defer as.qmu.Unlock()
	if len(as.repush) == 0 {
		return pushedTxn{}, false
	}
	return as.repush[0], true
}

func (as *asState) popRepush() {
	as.qmu.Lock()
	defer as.qmu.Unlock()
	as.repush = as.repush[1:]
	as.repushed++
}

// peek is the next transaction's events and what goes with them, as Synapse
// batches them: at most 100 events and 100 to-device messages, and every
// device list change waiting.
func (as *asState) peek() ([]*evt, txnExtras) {
	as.qmu.Lock()
	defer as.qmu.Unlock()
	n := min(len(as.queue), maxTxnEvents)
	m := min(len(as.toDevice), maxTxnToDeviceMessages)
	return append([]*evt(nil), as.queue[:n]...), txnExtras{
		toDevice: append([]map[string]any(nil), as.toDevice[:m]...),
		changed:  append([]id.UserID(nil), as.devChanged...),
	}
}

// pop drops the n events and the extras delivered as transaction txnID from
// the queues and keeps the transaction for Repush. What was queued after
// peek stays for the next transaction.
func (as *asState) pop(n int, x txnExtras, txnID string) {
	as.qmu.Lock()
	defer as.qmu.Unlock()
	as.pushed = append(as.pushed, pushedTxn{id: txnID, events: as.queue[:n:n], extras: x})
	as.queue = append(as.queue[:0:0], as.queue[n:]...)
	as.toDevice = append(as.toDevice[:0:0], as.toDevice[len(x.toDevice):]...)
	as.devChanged = append(as.devChanged[:0:0], as.devChanged[len(x.changed):]...)
}

// Pending returns how many events wait to be pushed to the appservice with
// this id, those Repush queued again included.
func (s *Server) Pending(asID string) int {
	for _, as := range s.asList {
		if as.reg.ID == asID {
			as.qmu.Lock()
			defer as.qmu.Unlock()
			n := len(as.queue)
			for _, t := range as.repush {
				n += len(t.events)
			}
			return n
		}
	}
	return 0
}

func (s *Server) transactionBody(as *asState, batch []*evt, x txnExtras) []byte {
	s.mu.RLock()
	defer s.mu.RUnlock()
	body := map[string]any{"events": s.renderAll(batch, nil)}
	// Synapse sends "ephemeral" and the rest only to appservices that opted
	// in (asdevices.go).
	s.addTxnExtensions(as, body, batch, x)
	return mustJSON(body)
}

// deliver retries one transaction until a 2xx; false means the server closed.
func (s *Server) deliver(client *http.Client, as *asState, txnID string, body []byte) bool {
	wait := s.cfg.pushBackoff
	for attempt := 1; ; attempt++ {
		err := s.putTransaction(client, as, txnID, body)
		if err == nil {
			return true
		}
		s.log.Warn("fakehs: appservice push failed", "appservice", as.reg.ID, "txn", txnID, "attempt", attempt, "err", err)
		select {
		case <-time.After(wait):
		case <-s.ctx.Done():
			return false
		}
		wait = min(wait*2, s.cfg.pushMaxWait)
	}
}

// putTransaction sends the hs_token both as a Bearer header and as
// ?access_token=, as Synapse does for appservices that predate the header.
func (s *Server) putTransaction(client *http.Client, as *asState, txnID string, body []byte) error {
	if as.reg.URL == "" {
		return nil // Synapse skips appservices without a URL
	}
	u := strings.TrimRight(as.reg.URL, "/") + "/_matrix/app/v1/transactions/" + url.PathEscape(txnID) +
		"?access_token=" + url.QueryEscape(as.reg.ServerToken)
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, u, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("building transaction request: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+as.reg.ServerToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("pushing transaction %s: %w", txnID, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("pushing transaction %s: status %d", txnID, resp.StatusCode)
	}
	return nil
}
