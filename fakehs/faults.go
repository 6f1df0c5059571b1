package fakehs

import (
	"math/rand"
	"net/http"
	"path"
	"slices"
	"strconv"
	"sync"
	"time"

	"maunium.net/go/mautrix/id"
)

// Fault is a programmed misbehaviour for matching requests. A request
// matches when Method (empty: any), PathPattern (path.Match syntax on the
// escaped path, "*" is one segment; empty: any) and User (empty: any) fit.
// The fault applies to the next Count matching requests, or, with Count 0,
// to a Fraction of them chosen by a rand seeded with Seed (deterministic);
// with neither, to every matching request until ClearFaults.
// Latency is added first; then Drop hijacks and closes the connection, or
// DropResponse handles the request and closes the connection instead of
// answering (the change is made, the client never hears of it), or Hold
// keeps the request open without ever answering until the client gives up
// (or the server closes), or HoldResponse handles it first and then holds
// (the change is made, the answer never comes), or Status answers with
// Errcode (429 adds retry_after_ms from RetryAfter); with none, the request
// proceeds after the latency.
type Fault struct {
	Method       string
	PathPattern  string
	User         id.UserID
	Latency      time.Duration
	Status       int
	Errcode      string
	RetryAfter   time.Duration
	Drop         bool
	DropResponse bool
	Hold         bool
	HoldResponse bool
	Count        int
	Fraction     float64
	Seed         int64
}

type activeFault struct {
	Fault
	remaining int
	hits      int // guarded by faultSet.mu
	rng       *rand.Rand
	// log holds every hit, with when the same request came again; pending
	// indexes the hits still waiting for that, by method and escaped path.
	log     []FaultHit
	pending map[string]int
}

// FaultHit is one request a fault applied to, and the first later request
// with the same method and escaped path: for a client that retries, its retry.
type FaultHit struct {
	Method string
	Path   string // escaped, without the query
	At     time.Time
	// RetriedAt is zero while no request with the same method and path
	// came after this one.
	RetriedAt time.Time
}

// FaultHandle observes one injected fault, so a test can assert it fired:
// a fault that never matched a request proves nothing.
type FaultHandle struct {
	set *faultSet
	f   *activeFault
}

// Hits is how many requests the fault has applied to so far.
func (h *FaultHandle) Hits() int {
	h.set.mu.Lock()
	defer h.set.mu.Unlock()
	return h.f.hits
}

// Fault is the fault as injected.
func (h *FaultHandle) Fault() Fault { return h.f.Fault }

// Log is every request the fault applied to, in order, each with the time the
// same method and path was asked again (so a test can check a client waited
// the retry_after_ms it was told before retrying).
func (h *FaultHandle) Log() []FaultHit {
	h.set.mu.Lock()
	defer h.set.mu.Unlock()
	return append([]FaultHit(nil), h.f.log...)
}

type faultSet struct {
	mu     sync.Mutex
	faults []*activeFault
	// watched are the faults with hits not yet asked again, kept after a
	// Count fault is used up or ClearFaults removed it.
	watched []*activeFault
}

func newFaultSet() *faultSet { return &faultSet{} }

// InjectFault adds a fault; faults are checked in the order added and the
// first that fires applies. The handle counts the requests it applied to,
// also after a Count fault is used up or ClearFaults removed it.
func (s *Server) InjectFault(f Fault) *FaultHandle {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	a := &activeFault{Fault: f, remaining: f.Count, rng: rand.New(rand.NewSource(f.Seed)), pending: map[string]int{}}
	s.faults.faults = append(s.faults.faults, a)
	return &FaultHandle{set: s.faults, f: a}
}

// Clear removes this fault; its hits stay counted.
func (h *FaultHandle) Clear() {
	h.set.mu.Lock()
	defer h.set.mu.Unlock()
	h.set.faults = slices.DeleteFunc(h.set.faults, func(f *activeFault) bool { return f == h.f })
}

// ClearFaults removes every fault.
func (s *Server) ClearFaults() {
	s.faults.mu.Lock()
	defer s.faults.mu.Unlock()
	s.faults.faults = nil
}

// pick returns the fault that fires for this request, consuming one use.
func (fs *faultSet) pick(r *http.Request, userOf func() id.UserID) *Fault {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	now := time.Now()
	key := r.Method + " " + r.URL.EscapedPath()
	fs.noteRetry(key, now)
	if len(fs.faults) == 0 {
		return nil
	}
	var who id.UserID
	resolved := false
	for i, f := range fs.faults {
		if f.Method != "" && f.Method != r.Method {
			continue
		}
		if f.PathPattern != "" {
			if ok, _ := path.Match(f.PathPattern, r.URL.EscapedPath()); !ok {
				if ok2, _ := path.Match(f.PathPattern, r.URL.Path); !ok2 {
					continue
				}
			}
		}
		if f.User != "" {
			if !resolved {
				who, resolved = userOf(), true
			}
			if who != f.User {
				continue
			}
		}
		if f.Count > 0 {
			fs.hit(f, r, key, now)
			f.remaining--
			if f.remaining <= 0 {
				fs.faults = append(fs.faults[:i:i], fs.faults[i+1:]...)
			}
			return &f.Fault
		}
		if f.Fraction == 0 || f.rng.Float64() < f.Fraction {
			fs.hit(f, r, key, now)
			return &f.Fault
		}
	}
	return nil
}

// hit counts a request the fault applies to and watches for its retry.
func (fs *faultSet) hit(f *activeFault, r *http.Request, key string, now time.Time) {
	f.hits++
	f.log = append(f.log, FaultHit{Method: r.Method, Path: r.URL.EscapedPath(), At: now})
	if _, waiting := f.pending[key]; !waiting {
		if len(f.pending) == 0 {
			fs.watched = append(fs.watched, f)
		}
		f.pending[key] = len(f.log) - 1
	}
}

// noteRetry stamps the hits with this method and path as retried now.
func (fs *faultSet) noteRetry(key string, now time.Time) {
	kept := fs.watched[:0]
	for _, f := range fs.watched {
		if i, ok := f.pending[key]; ok {
			f.log[i].RetriedAt = now
			delete(f.pending, key)
		}
		if len(f.pending) > 0 {
			kept = append(kept, f)
		}
	}
	clear(fs.watched[len(kept):])
	fs.watched = kept
}

// faultMiddleware applies injected faults before routing.
func (s *Server) faultMiddleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.reqs.add(r)
		f := s.faults.pick(r, func() id.UserID { return s.peekUser(r) })
		if f == nil {
			next.ServeHTTP(w, r)
			return
		}
		if f.Latency > 0 {
			t := time.NewTimer(f.Latency)
			select {
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
		}
		switch {
		case f.Drop:
			dropConnection(w)
		case f.DropResponse:
			// The handler runs to the end against a discarded response, so its
			// change is made; the client only sees the connection close.
			next.ServeHTTP(discardResponse{h: http.Header{}}, r)
			dropConnection(w)
		case f.Hold:
			holdConnection(w, r)
		case f.HoldResponse:
			next.ServeHTTP(discardResponse{h: http.Header{}}, r)
			holdConnection(w, r)
		case f.Status != 0:
			writeFault(w, f)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

func writeFault(w http.ResponseWriter, f *Fault) {
	code := f.Errcode
	if code == "" {
		code = "M_UNKNOWN"
		if f.Status == http.StatusTooManyRequests {
			code = "M_LIMIT_EXCEEDED"
		}
	}
	me := mErr(f.Status, code, "injected fault")
	if f.Status == http.StatusTooManyRequests {
		ms := f.RetryAfter.Milliseconds()
		me = me.WithExtraField("retry_after_ms", ms)
		w.Header().Set("Retry-After", strconv.FormatInt((ms+999)/1000, 10))
	}
	writeError(w, me)
}

// dropConnection closes the TCP connection without a response.
func dropConnection(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}

// holdConnection answers nothing until the client gives up or the server
// closes, and then closes the connection: a handler that merely returned
// would answer 200.
func holdConnection(w http.ResponseWriter, r *http.Request) {
	<-r.Context().Done()
	dropConnection(w)
}

// discardResponse is a ResponseWriter that keeps nothing.
type discardResponse struct{ h http.Header }

func (d discardResponse) Header() http.Header         { return d.h }
func (d discardResponse) Write(b []byte) (int, error) { return len(b), nil }
func (d discardResponse) WriteHeader(int)             {}
