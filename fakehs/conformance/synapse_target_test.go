package conformance

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"regexp"
	"testing"

	"maunium.net/go/mautrix/appservice"

	"github.com/zooid-dev/zooid/docker/synapse"
)

// synapseTarget starts a real Synapse in a container (docker/synapse) with an appservice
// registered, and stops it when the test ends. Without a Docker engine it fails: this target
// is only chosen when ZOOID_TEST_HOMESERVER=synapse asks for it.
func synapseTarget(t *testing.T) Target {
	t.Helper()
	// The push listener is opened first: its port goes into the registration, and the
	// suite serves on this very listener, so no other process can take the port between.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("reserving the appservice push port: %v", err)
	}
	served := false
	defer func() {
		// On success the suite owns the listener; on a failure or skip before that,
		// close it here.
		if !served {
			ln.Close()
		}
	}()

	suffix := synapseRandomHex(t, 4)
	const serverName = "localhost"
	prefix := "zooidconf_" + suffix + "_"
	reg := &appservice.Registration{
		ID:              "zooid-conformance-" + suffix,
		URL:             "http://" + ln.Addr().String(),
		AppToken:        "as_" + synapseRandomHex(t, 24),
		ServerToken:     "hs_" + synapseRandomHex(t, 24),
		SenderLocalpart: prefix + "bot",
		// What an appservice needs to run its users' devices (AppService.Devices).
		EphemeralEvents: true,
		MSC3202:         true,
		MSC4190:         true,
	}
	reg.Namespaces.UserIDs.Register(regexp.MustCompile(
		fmt.Sprintf("@%s.*:%s", regexp.QuoteMeta(prefix), regexp.QuoteMeta(serverName))), true)
	// Non-exclusive, like the daemon's registration lists its configured aliases.
	reg.Namespaces.RoomAliases.Register(regexp.MustCompile(
		fmt.Sprintf("#%s.*:%s", regexp.QuoteMeta(prefix), regexp.QuoteMeta(serverName))), false)

	hs := synapse.RunForTest(t, synapse.WithServerName(serverName), synapse.WithAppservice(reg))
	served = true
	return Target{
		Name:       "synapse",
		BaseURL:    hs.BaseURL(),
		ServerName: hs.ServerName(),
		AppService: &AppService{
			ID:              reg.ID,
			ASToken:         reg.AppToken,
			HSToken:         reg.ServerToken,
			SenderLocalpart: reg.SenderLocalpart,
			UserPrefix:      prefix,
			AliasPrefix:     prefix,
			PushAddr:        ln.Addr().String(),
			Listener:        ln,
			Devices:         true,
		},
	}
}

func synapseRandomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatalf("reading random bytes: %v", err)
	}
	return hex.EncodeToString(b)
}
