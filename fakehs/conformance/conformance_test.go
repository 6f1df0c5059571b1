package conformance

import (
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"maunium.net/go/mautrix/appservice"

	"github.com/zooid-dev/zooid/fakehs"
)

// TestConformance runs the suite against the homeserver chosen by ZOOID_TEST_HOMESERVER:
// "fake" (default) for an in-process fakehs, "synapse" for the container, or a base URL. For a
// base URL, ZOOID_TEST_SERVER_NAME (default localhost) names the server, and the appservice
// tests need ZOOID_TEST_AS_TOKEN, ZOOID_TEST_HS_TOKEN, ZOOID_TEST_AS_PUSH_ADDR (where the
// homeserver pushes; the suite listens there), ZOOID_TEST_AS_USER_PREFIX and optionally
// ZOOID_TEST_AS_SENDER_LOCALPART (default zooidbot) and ZOOID_TEST_AS_ID (the registration's id,
// default zooid, which the ping test pings); without them those tests are skipped.
// ZOOID_TEST_AS_ALIAS_PREFIX names the registration's non-exclusive alias namespace
// (#PREFIX.*:server) for the alias namespace tests. ZOOID_TEST_AS_DEVICES=1 says the
// registration has receive_ephemeral, org.matrix.msc3202 and io.element.msc4190 and the server
// MSC2409's and MSC3202's transaction extensions, for the AppserviceDevices area.
func TestConformance(t *testing.T) {
	switch hs := os.Getenv("ZOOID_TEST_HOMESERVER"); hs {
	case "", "fake":
		Run(t, fakeTarget(t))
	case "synapse":
		Run(t, synapseTarget(t))
	default:
		Run(t, urlTarget(t, hs))
	}
}

// fakeTarget starts fakehs with an appservice whose pushes go to a port reserved here and kept
// open, so nothing else can take it between reservation and use.
func fakeTarget(t *testing.T) Target {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("reserving the appservice push port: %v", err)
	}
	as := &AppService{
		ID:              "zooid-conformance",
		ASToken:         "as-" + randomID(16),
		HSToken:         "hs-" + randomID(16),
		SenderLocalpart: "zooidbot",
		UserPrefix:      "zooid_",
		AliasPrefix:     "zooid_",
		PushAddr:        ln.Addr().String(),
		Listener:        ln,
		Devices:         true,
	}
	const serverName = "localhost"
	reg := &appservice.Registration{
		ID:              as.ID,
		URL:             "http://" + as.PushAddr,
		AppToken:        as.ASToken,
		ServerToken:     as.HSToken,
		SenderLocalpart: as.SenderLocalpart,
		EphemeralEvents: true,
		MSC3202:         true,
		MSC4190:         true,
		Namespaces: appservice.Namespaces{
			UserIDs: appservice.NamespaceList{{
				Regex:     "@" + regexp.QuoteMeta(as.UserPrefix) + ".*:" + regexp.QuoteMeta(serverName),
				Exclusive: true,
			}},
			// Non-exclusive, like the daemon's: the appservice may create these, anyone else too.
			RoomAliases: appservice.NamespaceList{{
				Regex: "#" + regexp.QuoteMeta(as.AliasPrefix) + ".*:" + regexp.QuoteMeta(serverName),
			}},
		},
	}
	srv := fakehs.New(t, fakehs.WithServerName(serverName), fakehs.WithAppservice(reg))
	return Target{Name: "fake", BaseURL: srv.URL(), ServerName: srv.ServerName(), AppService: as}
}

// urlTarget points the suite at an already running homeserver; its appservice comes from env.
func urlTarget(t *testing.T, baseURL string) Target {
	t.Helper()
	serverName := os.Getenv("ZOOID_TEST_SERVER_NAME")
	if serverName == "" {
		serverName = "localhost"
	}
	// A server known by URL may show new events a moment after their send returns.
	target := Target{Name: baseURL, BaseURL: baseURL, ServerName: serverName, VisibilityWait: 10 * time.Second}
	// The features take several registrations as comma-separated lists
	// (sim/steps/homeserver_url.go); the suite uses the first.
	first := func(k string) string { v, _, _ := strings.Cut(os.Getenv(k), ","); return v }
	asToken, hsToken := first("ZOOID_TEST_AS_TOKEN"), first("ZOOID_TEST_HS_TOKEN")
	pushAddr, prefix := first("ZOOID_TEST_AS_PUSH_ADDR"), first("ZOOID_TEST_AS_USER_PREFIX")
	if asToken != "" && hsToken != "" && pushAddr != "" && prefix != "" {
		sender := first("ZOOID_TEST_AS_SENDER_LOCALPART")
		if sender == "" {
			sender = "zooidbot"
		}
		asID := first("ZOOID_TEST_AS_ID")
		if asID == "" {
			asID = "zooid"
		}
		target.AppService = &AppService{ID: asID, ASToken: asToken, HSToken: hsToken, SenderLocalpart: sender, UserPrefix: prefix,
			AliasPrefix: os.Getenv("ZOOID_TEST_AS_ALIAS_PREFIX"), PushAddr: pushAddr, Devices: os.Getenv("ZOOID_TEST_AS_DEVICES") == "1"}
	} else {
		t.Logf("no appservice for %s: the AppService tests will be skipped", baseURL)
	}
	return target
}

// TestSendWaitsForVisibility: against a server that shows events a moment
// after their send, a target with VisibilityWait reads its own send at once,
// and one without would not (the delay is real).
func TestSendWaitsForVisibility(t *testing.T) {
	hs := fakehs.New(t, fakehs.WithProfile(fakehs.Profile{VisibilityDelay: 300 * time.Millisecond}))
	for _, wait := range []time.Duration{0, 5 * time.Second} {
		s := &suite{target: Target{Name: "delayed", BaseURL: hs.URL(), ServerName: hs.ServerName(), VisibilityWait: wait}, runID: randomID(4), http: &http.Client{}}
		alice, room := s.aliceAlone(t, "alice")
		time.Sleep(300 * time.Millisecond) // the room's own events
		evt := s.sendText(t, alice, room, "hello")
		got := alice.Do(t, "GET", CS("v3", "rooms", string(room), "event", string(evt)), nil).StatusCode
		if wait > 0 && got != http.StatusOK {
			t.Fatalf("with VisibilityWait the send returned before the event was readable (%d)", got)
		}
		if wait == 0 && got != http.StatusNotFound {
			t.Fatalf("without VisibilityWait the event was readable at once (%d): the delay is not in force", got)
		}
		s.http.CloseIdleConnections()
	}
}
