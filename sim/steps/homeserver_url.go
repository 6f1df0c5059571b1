package steps

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/zooid-dev/zooid/internal/randid"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/appservice"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/fakehs"
	"github.com/zooid-dev/zooid/internal/pushdrain"
)

// The environment variables that describe the appservice registration an
// operator installed on a homeserver given by URL. They are the ones the
// conformance suite (fakehs/conformance) reads, so one setup serves both.
const (
	// ASTokenEnv is the registration's as_token.
	ASTokenEnv = "ZOOID_TEST_AS_TOKEN"
	// HSTokenEnv is the registration's hs_token.
	HSTokenEnv = "ZOOID_TEST_HS_TOKEN"
	// ASPushAddrEnv is host:port of the registration's url, where the run
	// listens for the homeserver's pushes.
	ASPushAddrEnv = "ZOOID_TEST_AS_PUSH_ADDR"
	// ASUserPrefixEnv is the localpart prefix of the registration's
	// exclusive user namespace (@PREFIX.*:server).
	ASUserPrefixEnv = "ZOOID_TEST_AS_USER_PREFIX"
	// ASSenderLocalpartEnv is the registration's sender_localpart
	// (default zooidbot).
	ASSenderLocalpartEnv = "ZOOID_TEST_AS_SENDER_LOCALPART"
	// ServerNameEnv is the homeserver's server_name (default: asked of the
	// server, as the domain of the appservice sender).
	ServerNameEnv = "ZOOID_TEST_SERVER_NAME"
	// ASIDEnv is the registration's id (default zooid); when set, the run
	// pings the appservice through the homeserver at start, which proves
	// pushes arrive and makes Synapse retry pushes it was backing off. Each
	// daemon pings under this id too (matrix.Transport checks its
	// registration), so with another id unset the daemons refuse to start.
	ASIDEnv = "ZOOID_TEST_AS_ID"
	// ASAliasPrefixEnv is the registration's alias namespace prefix; only the
	// conformance suite uses it (features' aliases are created by humans).
	ASAliasPrefixEnv = "ZOOID_TEST_AS_ALIAS_PREFIX"
)

// urlRequiredEnv lists what a URL homeserver can't run without.
var urlRequiredEnv = []string{ASTokenEnv, HSTokenEnv, ASPushAddrEnv, ASUserPrefixEnv}

// urlSettings is the appservice registration of a URL homeserver.
type urlSettings struct {
	baseURL, serverName, id string
	asToken, hsToken        string
	pushAddr                string
	userPrefix, sender      string
}

// urlEnv reads and checks the registrations of the homeserver at baseURL
// from getenv; the error lists every missing or malformed variable. Each
// variable but the server name may hold a comma-separated list, one item per
// registration (the token lists set how many); a server with several
// registrations runs that many scenarios at once.
func urlEnv(baseURL string, getenv func(string) string) ([]urlSettings, error) {
	var missing []string
	for _, k := range urlRequiredEnv {
		if getenv(k) == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("homeserver %s: the run needs the appservice registration installed there; missing %s "+
			"(required: %s = the registration's as_token, hs_token, host:port of its url, and the prefix of its exclusive "+
			"user namespace @PREFIX.*:server; optional: %s (default zooidbot), %s (default: asked of the server), %s (enables a push check); "+
			"for several registrations give comma-separated lists, one item each)",
			baseURL, strings.Join(missing, ", "), strings.Join(urlRequiredEnv, ", "), ASSenderLocalpartEnv, ServerNameEnv, ASIDEnv)
	}
	n := len(strings.Split(getenv(ASTokenEnv), ","))
	var bad []string
	// list splits a variable into n items; an optional one may be empty.
	list := func(k, def string) []string {
		v := getenv(k)
		if v == "" {
			return slices.Repeat([]string{def}, n)
		}
		items := strings.Split(v, ",")
		if len(items) != n {
			bad = append(bad, fmt.Sprintf("%s has %d item(s), %s %d", k, len(items), ASTokenEnv, n))
			return slices.Repeat([]string{def}, n)
		}
		return items
	}
	as, hs, push, prefix := list(ASTokenEnv, ""), list(HSTokenEnv, ""), list(ASPushAddrEnv, ""), list(ASUserPrefixEnv, "")
	sender, ids := list(ASSenderLocalpartEnv, "zooidbot"), list(ASIDEnv, "")
	out := make([]urlSettings, n)
	for i := range n {
		s := urlSettings{
			baseURL: strings.TrimRight(baseURL, "/"), serverName: getenv(ServerNameEnv), id: ids[i],
			asToken: as[i], hsToken: hs[i], pushAddr: push[i], userPrefix: prefix[i], sender: sender[i],
		}
		if _, port, err := net.SplitHostPort(s.pushAddr); err != nil || port == "" || port == "0" {
			bad = append(bad, fmt.Sprintf("%s=%q is not host:port", ASPushAddrEnv, s.pushAddr))
		}
		if id.ValidateUserLocalpart(s.userPrefix) != nil {
			bad = append(bad, fmt.Sprintf("%s=%q is not a localpart prefix (want %s)", ASUserPrefixEnv, s.userPrefix, id.ValidLocalpartRegex))
		}
		if id.ValidateUserLocalpart(s.sender) != nil {
			bad = append(bad, fmt.Sprintf("%s=%q is not a localpart (want %s)", ASSenderLocalpartEnv, s.sender, id.ValidLocalpartRegex))
		}
		out[i] = s
	}
	if len(bad) > 0 {
		return nil, fmt.Errorf("homeserver %s: %s", baseURL, strings.Join(slices.Compact(bad), "; "))
	}
	return out, nil
}

// startURL serves a run from the homeserver at baseURL with the appservice
// registrations the environment describes: one slot each, so as many
// scenarios run at once.
func startURL(ctx context.Context, baseURL string, getenv func(string) string) (*sharedBackend, error) {
	all, err := urlEnv(baseURL, getenv)
	if err != nil {
		return nil, err
	}
	run := randid.Hex(3)
	var slots []*slot
	for i := range all {
		s := &all[i]
		if err := s.check(ctx); err != nil {
			closeSlots(slots)
			return nil, err
		}
		// Agents get a per-run prefix inside the namespace, so a run never
		// meets agents (and their rooms) left by an earlier, interrupted one.
		n := names{serverName: s.serverName, agentPrefix: s.userPrefix + run + "-"}
		rateLimited := false
		reg := &appservice.Registration{
			ID:              s.id,
			URL:             "http://" + s.pushAddr,
			AppToken:        s.asToken,
			ServerToken:     s.hsToken,
			SenderLocalpart: s.sender,
			RateLimited:     &rateLimited,
			Namespaces: appservice.Namespaces{UserIDs: appservice.NamespaceList{{
				Regex: "@" + regexp.QuoteMeta(s.userPrefix) + ".*:" + regexp.QuoteMeta(s.serverName), Exclusive: true,
			}}},
		}
		if reg.ID == "" {
			reg.ID = "zooid"
		}
		// Bound for the whole run, so the port is never free between a drain
		// and a daemon.
		sock, err := pushdrain.Bind(s.pushAddr)
		if err != nil {
			closeSlots(slots)
			return nil, fmt.Errorf("homeserver %s: %w (%s must be free on this machine)", baseURL, err, ASPushAddrEnv)
		}
		slots = append(slots, &slot{names: n, reg: reg, push: sock})
	}
	b, err := newSharedBackend(ctx, "url", urlHS{base: all[0].baseURL}, run, slots, nil)
	if err != nil {
		return nil, fmt.Errorf("homeserver %s: %w (%s must be free on this machine)", baseURL, err, ASPushAddrEnv)
	}
	for _, s := range all {
		if s.id != "" {
			if err := s.ping(ctx); err != nil {
				_ = b.close(ctx)
				return nil, err
			}
		}
	}
	return b, nil
}

// check asks the server who the appservice sender is: that proves the URL
// answers, the as_token is registered and the server name is right.
func (s *urlSettings) check(ctx context.Context) error {
	cli, err := mautrix.NewClient(s.baseURL, "", s.asToken)
	if err != nil {
		return fmt.Errorf("homeserver %s: %w", s.baseURL, err)
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	who, err := cli.Whoami(cctx)
	if err != nil {
		return fmt.Errorf("homeserver %s: asking who %s belongs to (is the URL right and the registration installed?): %w", s.baseURL, ASTokenEnv, err)
	}
	if who.UserID.Localpart() != s.sender {
		return fmt.Errorf("homeserver %s: %s belongs to %s, but %s is %q", s.baseURL, ASTokenEnv, who.UserID, ASSenderLocalpartEnv, s.sender)
	}
	switch server := who.UserID.Homeserver(); {
	case s.serverName == "":
		s.serverName = server
	case s.serverName != server:
		return fmt.Errorf("homeserver %s: its server name is %q, but %s is %q", s.baseURL, server, ServerNameEnv, s.serverName)
	}
	return nil
}

// ping has the homeserver push to the drain once.
func (s *urlSettings) ping(ctx context.Context) error {
	cli, err := mautrix.NewClient(s.baseURL, "", s.asToken)
	if err != nil {
		return fmt.Errorf("homeserver %s: %w", s.baseURL, err)
	}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if _, err := cli.AppservicePing(cctx, s.id, "zooid-steps-"+randid.Hex(4)); err != nil {
		if noEndpoint(err) {
			// A server without the ping endpoint (Matrix 1.7) says nothing
			// about the registration's url; the scenarios' pushes will.
			return nil
		}
		return fmt.Errorf("homeserver %s: pinging appservice %q (does its url point at %s?): %w", s.baseURL, s.id, s.pushAddr, err)
	}
	return nil
}

// noEndpoint says a request failed because the server lacks the endpoint:
// 404 or 405 M_UNRECOGNIZED, or a 404 without a Matrix error body.
func noEndpoint(err error) bool {
	if errors.Is(err, mautrix.MUnrecognized) {
		return true
	}
	var he mautrix.HTTPError
	return errors.As(err, &he) && he.Response != nil && he.RespError == nil &&
		(he.Response.StatusCode == 404 || he.Response.StatusCode == 405)
}

// urlHS is a homeserver known only by its client-server API.
type urlHS struct{ base string }

func (u urlHS) baseURL() string { return u.base }

// registerHuman signs a human up with m.login.dummy, which needs the server's
// open registration.
func (u urlHS) registerHuman(ctx context.Context, localpart, displayName string) (id.UserID, string, error) {
	cli, err := mautrix.NewClient(u.base, "", "")
	if err != nil {
		return "", "", fmt.Errorf("client for %s: %w", u.base, err)
	}
	resp, err := cli.RegisterDummy(ctx, &mautrix.ReqRegister[any]{Username: localpart, Password: "pw-" + randid.Hex(8)})
	if err != nil {
		if errors.Is(err, mautrix.MForbidden) || strings.Contains(err.Error(), "m.login.dummy") || strings.Contains(err.Error(), "auth flows") {
			return "", "", fmt.Errorf("registering %s on %s: the server refuses open registration, which the features use for their humans; "+
				"enable it (Synapse: enable_registration: true and enable_registration_without_verification: true): %w", localpart, u.base, err)
		}
		return "", "", fmt.Errorf("registering %s on %s: %w", localpart, u.base, err)
	}
	if err := setDisplayName(ctx, u.base, resp.UserID, resp.AccessToken, displayName); err != nil {
		return "", "", err
	}
	return resp.UserID, resp.AccessToken, nil
}

func (urlHS) importRoom(roomSeed) (id.RoomID, []id.EventID, bool, error) {
	return "", nil, false, nil
}

func (urlHS) degrade(func(*fakehs.Profile)) error {
	return errors.New("only the fake homeserver changes its profile; tag the scenario " + FakeOnlyTag)
}

func (urlHS) requests(string, string, []id.UserID) (int, error) {
	return 0, errors.New("only the fake homeserver counts requests; tag the scenario " + FakeOnlyTag)
}

func (urlHS) injectFault(fakehs.Fault) (*fakehs.FaultHandle, error) {
	return nil, errors.New("only the fake homeserver injects faults; tag the scenario " + FakeOnlyTag)
}

// concurrencyFor is how many scenarios b can run at once given asked, and
// a note saying why when that is fewer.
func concurrencyFor(b backend, asked int) (int, string) {
	c, ok := b.(interface{ capacity() int })
	if !ok || asked <= c.capacity() {
		return asked, ""
	}
	return c.capacity(), fmt.Sprintf("the %s homeserver has %d appservice registration(s) to lease, so %d scenario(s) run at once instead of %d",
		b.kind(), c.capacity(), c.capacity(), asked)
}
