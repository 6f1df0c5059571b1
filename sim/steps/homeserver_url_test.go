package steps

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/zooid-dev/zooid/internal/randid"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/appservice"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/docker/synapse"
	"github.com/zooid-dev/zooid/fakehs"
	"github.com/zooid-dev/zooid/internal/freeport"
	"github.com/zooid-dev/zooid/internal/pushdrain"
)

// urlEnvVars is every variable the URL backend reads.
var urlEnvVars = []string{ASTokenEnv, HSTokenEnv, ASPushAddrEnv, ASUserPrefixEnv, ASSenderLocalpartEnv, ServerNameEnv, ASIDEnv, ASAliasPrefixEnv}

func TestURLEnvNamesWhatIsMissing(t *testing.T) {
	env := map[string]string{ASTokenEnv: "as-x", ASUserPrefixEnv: "zt_"}
	_, err := urlEnv("http://127.0.0.1:1", func(k string) string { return env[k] })
	if err == nil {
		t.Fatal("urlEnv accepted a registration without hs_token and push address")
	}
	for _, want := range []string{"missing " + HSTokenEnv + ", " + ASPushAddrEnv, ASTokenEnv, ASUserPrefixEnv, ASSenderLocalpartEnv} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}

	env = map[string]string{ASTokenEnv: "as-x", HSTokenEnv: "hs-x", ASPushAddrEnv: "nowhere", ASUserPrefixEnv: "Bad Prefix"}
	_, err = urlEnv("http://127.0.0.1:1", func(k string) string { return env[k] })
	if err == nil || !strings.Contains(err.Error(), ASPushAddrEnv+`="nowhere"`) || !strings.Contains(err.Error(), ASUserPrefixEnv+`="Bad Prefix"`) {
		t.Fatalf("malformed settings: got %v, want both named", err)
	}

	env = map[string]string{ASTokenEnv: "as-x", HSTokenEnv: "hs-x", ASPushAddrEnv: "127.0.0.1:9", ASUserPrefixEnv: "zt_"}
	ss, err := urlEnv("http://127.0.0.1:1/", func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("complete settings refused: %v", err)
	}
	if s := ss[0]; len(ss) != 1 || s.sender != "zooidbot" || s.baseURL != "http://127.0.0.1:1" {
		t.Fatalf("defaults: %d registrations, sender %q, base %q", len(ss), s.sender, s.baseURL)
	}

	// Several registrations: a list per variable, one item each.
	env = map[string]string{ASTokenEnv: "as-x,as-y", HSTokenEnv: "hs-x,hs-y", ASPushAddrEnv: "127.0.0.1:9,127.0.0.1:10",
		ASUserPrefixEnv: "zt_,zu_", ASSenderLocalpartEnv: "ztbot,zubot"}
	ss, err = urlEnv("http://127.0.0.1:1/", func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("two registrations refused: %v", err)
	}
	if len(ss) != 2 || ss[1].asToken != "as-y" || ss[1].pushAddr != "127.0.0.1:10" || ss[1].userPrefix != "zu_" || ss[1].sender != "zubot" {
		t.Fatalf("two registrations read as %+v", ss)
	}
	env[HSTokenEnv] = "hs-x"
	if _, err := urlEnv("http://127.0.0.1:1/", func(k string) string { return env[k] }); err == nil ||
		!strings.Contains(err.Error(), HSTokenEnv+" has 1 item(s), "+ASTokenEnv+" 2") {
		t.Fatalf("lists of different lengths: got %v, want them named", err)
	}
}

// TestRunRefusesURLWithoutRegistration goes through Run, as `zooid sim
// --homeserver URL` does.
func TestRunRefusesURLWithoutRegistration(t *testing.T) {
	for _, k := range urlEnvVars {
		t.Setenv(k, "")
	}
	var out bytes.Buffer
	status := Run(Options{Homeserver: "http://127.0.0.1:1", Output: &out, Paths: []string{"features/triggers.feature"}})
	if status != 2 {
		t.Fatalf("status %d, want 2; output:\n%s", status, out.String())
	}
	for _, k := range urlRequiredEnv {
		if !strings.Contains(out.String(), k) {
			t.Errorf("output does not name %s:\n%s", k, out.String())
		}
	}
}

// TestURLPingWithoutEndpoint: a server without /appservice/{id}/ping (fakehs
// with the NoPing profile, as before Matrix 1.7) is no sign the
// registration's url is wrong; the run starts. With the ping, a wrong
// appservice id fails the start and names the ping.
func TestURLPingWithoutEndpoint(t *testing.T) {
	push, err := freeport.Addr()
	if err != nil {
		t.Fatal(err)
	}
	n := names{serverName: "localhost", agentPrefix: "zp-"}
	reg := registration(n, push)
	hs := fakehs.New(t, fakehs.WithAppservice(reg), fakehs.WithProfile(fakehs.Profile{NoPing: true}))
	ping, err := mautrix.NewClient(hs.URL(), "", reg.AppToken)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ping.AppservicePing(context.Background(), reg.ID, "probe"); !noEndpoint(err) {
		t.Fatalf("fakehs answered the ping with %v; the test needs a server without the endpoint", err)
	}
	env := map[string]string{
		ASTokenEnv: reg.AppToken, HSTokenEnv: reg.ServerToken, ASPushAddrEnv: push,
		ASUserPrefixEnv: n.agentPrefix, ASSenderLocalpartEnv: reg.SenderLocalpart, ASIDEnv: reg.ID, ServerNameEnv: "",
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	b, err := startURL(context.Background(), hs.URL(), os.Getenv)
	if err != nil {
		t.Fatalf("a URL run on a server without the ping endpoint: %v", err)
	}
	if err := b.close(context.Background()); err != nil {
		t.Fatal(err)
	}

	hs.SetProfile(fakehs.Profile{})
	t.Setenv(ASIDEnv, "not-"+reg.ID)
	if b, err := startURL(context.Background(), hs.URL(), os.Getenv); err == nil || !strings.Contains(err.Error(), "pinging appservice") {
		if err == nil {
			_ = b.close(context.Background())
		}
		t.Fatalf("a URL run with the wrong appservice id on a server with the ping: %v, want the ping named", err)
	}
}

// TestURLHomeserverFeatures runs features against a Synapse known only by
// its URL and an appservice registration described the way an operator
// describes it: in the environment.
func TestURLHomeserverFeatures(t *testing.T) {
	// Two registrations, so two scenarios run at once. The operator names
	// the push addresses; a URL run binds them at start and holds them to
	// the end, but between here and there they are only free.
	const server = "localhost"
	type operatorReg struct {
		reg                     *appservice.Registration
		push, userPrefix, alias string
	}
	var regs []operatorReg
	for range 2 {
		push, err := freeport.Addr()
		if err != nil {
			t.Fatal(err)
		}
		userPrefix, aliasPrefix := "zt"+randid.Hex(2)+"_", "zta"+randid.Hex(2)+"_"
		rateLimited := false
		regs = append(regs, operatorReg{push: push, userPrefix: userPrefix, alias: aliasPrefix, reg: &appservice.Registration{
			ID: "zooid-url-" + randid.Hex(2), URL: "http://" + push,
			AppToken: "as-" + randid.Hex(16), ServerToken: "hs-" + randid.Hex(16),
			SenderLocalpart: "ztbot" + randid.Hex(2), RateLimited: &rateLimited,
			Namespaces: appservice.Namespaces{
				UserIDs:     appservice.NamespaceList{{Regex: "@" + regexp.QuoteMeta(userPrefix) + ".*:" + server, Exclusive: true}},
				RoomAliases: appservice.NamespaceList{{Regex: "#" + regexp.QuoteMeta(aliasPrefix) + ".*:" + server}},
			},
		}})
	}
	c := synapse.RunForTest(t, synapse.WithServerName(server), synapse.WithAppservice(regs[0].reg), synapse.WithAppservice(regs[1].reg))
	join := func(f func(operatorReg) string) string {
		return f(regs[0]) + "," + f(regs[1])
	}
	env := map[string]string{
		ASTokenEnv:           join(func(r operatorReg) string { return r.reg.AppToken }),
		HSTokenEnv:           join(func(r operatorReg) string { return r.reg.ServerToken }),
		ASPushAddrEnv:        join(func(r operatorReg) string { return r.push }),
		ASUserPrefixEnv:      join(func(r operatorReg) string { return r.userPrefix }),
		ASAliasPrefixEnv:     regs[0].alias,
		ASSenderLocalpartEnv: join(func(r operatorReg) string { return r.reg.SenderLocalpart }),
		ASIDEnv:              join(func(r operatorReg) string { return r.reg.ID }),
		ServerNameEnv:        "",
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	reg := regs[0].reg

	t.Run("wrong server name", func(t *testing.T) {
		t.Setenv(ServerNameEnv, "elsewhere.example")
		_, err := startURL(context.Background(), c.BaseURL(), os.Getenv)
		if err == nil || !strings.Contains(err.Error(), `server name is "localhost"`) {
			t.Fatalf("got %v, want the server name mismatch named", err)
		}
	})
	t.Run("wrong appservice id", func(t *testing.T) {
		t.Setenv(ASIDEnv, "not-"+reg.ID+","+regs[1].reg.ID)
		b, err := startURL(context.Background(), c.BaseURL(), os.Getenv)
		if err == nil {
			_ = b.close(context.Background())
			t.Fatal("a ping with the wrong appservice id succeeded")
		}
		if !strings.Contains(err.Error(), "pinging appservice") {
			t.Fatalf("got %v, want the ping named", err)
		}
	})

	var out bytes.Buffer
	paths := []string{"features/triggers.feature", "features/mcp_identity.feature"}
	scenarios := 0
	for _, p := range paths {
		src, err := os.ReadFile(findPath(p))
		if err != nil {
			t.Fatal(err)
		}
		scenarios += len(regexp.MustCompile(`(?m)^\s*Scenario:`).FindAll(src, -1))
	}
	status := Run(Options{
		Homeserver: c.BaseURL(), TestingT: t, Concurrency: 4,
		Output: io.MultiWriter(os.Stdout, &out), Paths: paths,
	})
	if status != 0 {
		t.Fatalf("features failed on %s (godog status %d)", c.BaseURL(), status)
	}
	if !strings.Contains(out.String(), "2 scenario(s) run at once instead of 4") {
		t.Errorf("the run did not say it runs two scenarios at a time (one per registration):\n%s", out.String())
	}
	if want := fmt.Sprintf("%d scenarios (%d passed)", scenarios, scenarios); !strings.Contains(out.String(), want) {
		t.Errorf("expected all %d scenarios of both features to run and pass:\n%s", scenarios, out.String())
	}

	// A second run on the same server must not meet the first one's
	// humans, aliases or agents.
	out.Reset()
	status = Run(Options{
		Homeserver: c.BaseURL(), TestingT: t, Concurrency: 1,
		Output: io.MultiWriter(os.Stdout, &out), Paths: []string{"features/triggers.feature"},
	})
	if status != 0 {
		t.Fatalf("a second run on the same server failed (godog status %d)", status)
	}
	for _, r := range regs {
		assertScenariosShareNoAgent(t, c, r.reg, r.userPrefix)
	}
}

// assertScenariosShareNoAgent checks the isolation of the runs' scenarios:
// every agent they created (found with Synapse's admin API) belongs to one
// scenario (its scope, `<prefix><run>-<n>-`), and no room holds agents of two.
func assertScenariosShareNoAgent(t *testing.T, c *synapse.Container, reg *appservice.Registration, userPrefix string) {
	t.Helper()
	ctx := context.Background()
	admin, tok, err := c.RegisterUser(ctx, "ztadmin"+randid.Hex(2), "pw-"+randid.Hex(8), true)
	if err != nil {
		t.Fatalf("registering an admin: %v", err)
	}
	acli, err := mautrix.NewClient(c.BaseURL(), admin, tok)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Users []struct {
			Name id.UserID `json:"name"`
		} `json:"users"`
	}
	u := acli.BuildURLWithQuery(mautrix.SynapseAdminURLPath{"v2", "users"}, map[string]string{"name": userPrefix, "limit": "1000"})
	if _, err := acli.MakeRequest(ctx, http.MethodGet, u, nil, &list); err != nil {
		t.Fatalf("listing users: %v", err)
	}
	scopeRE := regexp.MustCompile("^" + regexp.QuoteMeta(userPrefix) + `[0-9a-f]+-\d+-`)
	scopeOf := map[id.RoomID]string{}
	agents := 0
	for _, user := range list.Users {
		if !strings.HasPrefix(user.Name.Localpart(), userPrefix) {
			continue
		}
		agents++
		scope := scopeRE.FindString(user.Name.Localpart())
		if scope == "" {
			t.Errorf("%s has no scenario scope (want %s<run>-<n>-name)", user.Name, userPrefix)
			continue
		}
		cli, err := mautrix.NewClient(c.BaseURL(), user.Name, reg.AppToken)
		if err != nil {
			t.Fatal(err)
		}
		cli.SetAppServiceUserID = true
		joined, err := cli.JoinedRooms(ctx)
		if err != nil {
			t.Fatalf("rooms of %s: %v", user.Name, err)
		}
		for _, r := range joined.JoinedRooms {
			if other, ok := scopeOf[r]; ok && other != scope {
				t.Errorf("room %s holds agents of two scenarios: %s… and %s… (%s)", r, other, scope, user.Name)
			}
			scopeOf[r] = scope
		}
	}
	if agents < 2 {
		t.Fatalf("found %d agents under %s; the runs should have created several", agents, userPrefix)
	}
}

// TestURLRegistrationRefusedSaysWhatToEnable serves the answer of a server
// with registration disabled.
func TestURLRegistrationRefusedSaysWhatToEnable(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"errcode":"M_FORBIDDEN","error":"Registration has been disabled"}`))
	}))
	t.Cleanup(srv.Close)
	_, _, err := urlHS{base: srv.URL}.registerHuman(context.Background(), "ori", "ori")
	if err == nil || !strings.Contains(err.Error(), "enable_registration: true") || !strings.Contains(err.Error(), "Registration has been disabled") {
		t.Fatalf("got %v, want the refusal and what to enable", err)
	}
}

// TestSlotPushPortIsNeverFreeBetweenScenarios: a slot's push port is bound
// when the backend takes the slot and stays bound through every hand-over
// (drain to daemon and back), so no one else can take it between scenarios.
func TestSlotPushPortIsNeverFreeBetweenScenarios(t *testing.T) {
	sock, err := pushdrain.Bind("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := &appservice.Registration{ServerToken: "hs-" + randid.Hex(8)}
	b, err := newSharedBackend(context.Background(), "url", urlHS{base: "http://127.0.0.1:1"}, "r",
		[]*slot{{names: names{serverName: "localhost", agentPrefix: "zt-"}, reg: reg, push: sock}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.close(context.Background()) })
	taken := func(when string) {
		t.Helper()
		if ln, err := net.Listen("tcp", sock.Addr); err == nil {
			_ = ln.Close()
			t.Fatalf("%s: %s could be bound by someone else", when, sock.Addr)
		}
	}
	taken("slot idle")
	l, err := b.lease(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if l.names.humanPrefix == "" || l.names.aliasSuffix == "" {
		t.Fatalf("lease names not per scenario: %+v", l.names)
	}
	if err := l.handOver(context.Background(), ""); err != nil {
		t.Fatalf("hand-over: %v", err)
	}
	taken("after the drain handed over")
	ln, err := l.push.Listener()
	if err != nil {
		t.Fatal(err)
	}
	if err := ln.Close(); err != nil { // the daemon stops
		t.Fatal(err)
	}
	taken("after the daemon closed its listener")
	l.release()
	taken("after release")
	l2, err := b.lease(context.Background())
	if err != nil {
		t.Fatalf("lease after release: %v", err)
	}
	if l2.names.aliasSuffix == l.names.aliasSuffix {
		t.Fatalf("two scenarios got the same alias suffix %q", l.names.aliasSuffix)
	}
	l2.release()
}

// TestEachScenarioOnASharedServerHasAgentsOfItsOwn: two leases of one slot
// name agent-a as two users, both in the slot's exclusive namespace, with
// the slot's appservice bot unchanged; so no scenario's agents are in an
// earlier one's rooms and none has to leave them (sharedAgents is false).
func TestEachScenarioOnASharedServerHasAgentsOfItsOwn(t *testing.T) {
	sock, err := pushdrain.Bind("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := names{serverName: "localhost", agentPrefix: "zt-"}
	reg := registration(n, sock.Addr)
	b, err := newSharedBackend(context.Background(), "url", urlHS{base: "http://127.0.0.1:1"}, "r",
		[]*slot{{names: n, reg: reg, push: sock}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.close(context.Background()) })
	namespace := regexp.MustCompile("^" + reg.Namespaces.UserIDs[0].Regex + "$")
	var seen []id.UserID
	for i := range 2 {
		l, err := b.lease(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		a := l.names.agent("agent-a")
		if !namespace.MatchString(string(a)) {
			t.Errorf("lease %d: %s is outside the slot's namespace %s", i, a, namespace)
		}
		if got := l.names.senderLocalpart(); got != reg.SenderLocalpart {
			t.Errorf("lease %d: sender localpart %q, want the slot's %q", i, got, reg.SenderLocalpart)
		}
		if l.sharedAgents {
			t.Errorf("lease %d: sharedAgents set, so its agents would leave their rooms at teardown", i)
		}
		seen = append(seen, a)
		l.release()
	}
	if seen[0] == seen[1] {
		t.Fatalf("both scenarios' agent-a is %s", seen[0])
	}
}
