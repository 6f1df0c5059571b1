package fakehs

import (
	"fmt"
	"net/http"
	"path"
	"slices"
	"sync"
	"time"

	"maunium.net/go/mautrix/id"
)

// Profile is a set of ways the server does less than Synapse, for testing
// clients against homeservers that lack optional features or are
// eventually consistent. The zero Profile is Synapse's behaviour.
type Profile struct {
	// NoThreads removes GET /rooms/{id}/threads (404 M_UNRECOGNIZED).
	NoThreads bool
	// NoPing removes the appservice ping, POST
	// /_matrix/client/v1/appservice/{id}/ping (404 M_UNRECOGNIZED), as on
	// servers older than Matrix 1.7.
	NoPing bool
	// NoBundles leaves unsigned.m.relations out: no bundled m.thread
	// aggregation and no bundled m.replace.
	NoBundles bool
	// IgnoreRelationFilters ignores relation filters: rel_types,
	// not_rel_types and related_by_* in event filters, and the relType and
	// eventType path segments of /relations.
	IgnoreRelationFilters bool
	// FilterAfterLimit applies a /messages event filter after the page
	// limit: a page is `limit` events of any kind, then filtered, and a page
	// left empty has no `end` token (a client sees the start of the room).
	FilterAfterLimit bool
	// NonMembersRead lets any user read /messages and /relations of any
	// room, as servers that serve shared history to non-members do.
	NonMembersRead bool
	// VisibilityDelay makes an event sent by a client visible to
	// /messages, /event and /relations only this long after its send
	// returned (sync and appservice pushes see it at once). Imported
	// history is visible at once.
	VisibilityDelay time.Duration
}

// Degraded is every degradation at once: the profile of a homeserver
// without /threads, the appservice ping, bundled aggregations or relation
// filters, that filters
// after the limit, serves history to non-members and shows new events
// 200 ms after their send returns.
var Degraded = Profile{
	NoThreads: true, NoPing: true, NoBundles: true, IgnoreRelationFilters: true,
	FilterAfterLimit: true, NonMembersRead: true, VisibilityDelay: 200 * time.Millisecond,
}

// ProfileNames are the profiles the standalone server and the harness select by name.
var ProfileNames = map[string]Profile{"synapse": {}, "degraded": Degraded}

// ProfileByName returns a profile of ProfileNames.
func ProfileByName(name string) (Profile, error) {
	p, ok := ProfileNames[name]
	if !ok {
		return Profile{}, fmt.Errorf("unknown homeserver profile %q (want synapse or degraded)", name)
	}
	return p, nil
}

// WithProfile makes the server behave as the profile says.
func WithProfile(p Profile) Option { return func(c *config) { c.profile = p } }

// Profile is the profile the server runs with.
func (s *Server) Profile() Profile {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.cfg.profile
}

// SetProfile changes the profile of a running server; requests after it
// see the new behaviour. Events sent before keep the visibility they had.
func (s *Server) SetProfile(p Profile) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cfg.profile = p
}

// visibleUpto caps a read at the last event of rm that is already visible:
// with a visibility delay, the newest events stay hidden for a moment.
// Events are appended in stream order with a growing visibleAt, so the
// hidden ones are a suffix of the timeline.
func (s *Server) visibleUpto(rm *room, upto int64) int64 {
	if s.cfg.profile.VisibilityDelay <= 0 {
		return upto
	}
	now := time.Now()
	for i := len(rm.events) - 1; i >= 0; i-- {
		e := rm.events[i]
		if !e.visibleAt.After(now) {
			break
		}
		upto = min(upto, e.Stream-1)
	}
	return upto
}

// requestLog counts requests by method and escaped path.
type requestLog struct {
	mu     sync.Mutex
	counts map[requestKey]int
}

// requestKey is what a request is counted by: its method, its escaped path,
// and the user an appservice asked as (its user_id parameter; "" without one).
type requestKey struct {
	method, path string
	as           id.UserID
}

func (l *requestLog) add(r *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.counts == nil {
		l.counts = map[requestKey]int{}
	}
	l.counts[requestKey{r.Method, r.URL.EscapedPath(), id.UserID(r.URL.Query().Get("user_id"))}]++
}

// Requests counts the requests received so far whose method is method
// (empty: any) and whose escaped path matches pattern (path.Match syntax,
// "*" is one segment; empty: any), faulted ones included.
func (s *Server) Requests(method, pattern string) int {
	return s.countRequests(method, pattern, nil)
}

// RequestsAs is Requests for the requests an appservice made as one of users
// (its user_id parameter): what a bridge or bot asked, apart from the people
// in the room.
func (s *Server) RequestsAs(method, pattern string, users ...id.UserID) int {
	return s.countRequests(method, pattern, func(u id.UserID) bool { return slices.Contains(users, u) })
}

func (s *Server) countRequests(method, pattern string, as func(id.UserID) bool) int {
	s.reqs.mu.Lock()
	defer s.reqs.mu.Unlock()
	n := 0
	for k, c := range s.reqs.counts {
		if method != "" && k.method != method || as != nil && !as(k.as) {
			continue
		}
		if ok, _ := path.Match(pattern, k.path); ok || pattern == "" {
			n += c
		}
	}
	return n
}
