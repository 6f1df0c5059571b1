package fakehs

import (
	"net"
	"net/http"
	"testing"

	"maunium.net/go/mautrix/appservice"
)

// TestPingAppserviceUnreachable: the failures the conformance suite cannot cause on a shared
// Synapse. M_CONNECTION_FAILED is what Synapse 1.160 answered for a registration whose URL had
// nothing listening; M_URL_NOT_SET is the spec's errcode for a registration without a URL.
func TestPingAppserviceUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	for _, tc := range []struct {
		url     string
		status  int
		errcode string
	}{
		{closed, http.StatusBadGateway, "M_CONNECTION_FAILED"},
		{"", http.StatusBadRequest, "M_URL_NOT_SET"},
	} {
		reg := &appservice.Registration{ID: "pinged", URL: tc.url, AppToken: "as-ping", ServerToken: "hs-ping", SenderLocalpart: "pingbot"}
		s := New(t, WithAppservice(reg))
		var body struct {
			Errcode string `json:"errcode"`
		}
		decode(t, rawDo(t, s, http.MethodPost, "as-ping", "/_matrix/client/v1/appservice/pinged/ping", `{"transaction_id":"t1"}`), tc.status, &body)
		if body.Errcode != tc.errcode {
			t.Errorf("ping of an appservice at %q: errcode %q, want %s", tc.url, body.Errcode, tc.errcode)
		}
	}
}
