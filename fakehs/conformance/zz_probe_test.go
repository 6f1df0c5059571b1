package conformance

// TEMPORARY probe harness; deleted before the report.

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"sync"
	"testing"
	"time"

	"maunium.net/go/mautrix/appservice"

	"github.com/zooid-dev/zooid/docker/synapse"
)

func TestZZProbe(t *testing.T) {
	if os.Getenv("ZOOID_PROBE") == "" {
		t.Skip("probe only")
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	var mu sync.Mutex
	f, _ := os.Create("/tmp/probe/pushes.log")
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		fmt.Fprintf(f, "%s %s %s\n", r.Method, r.URL, b)
		mu.Unlock()
		if r.Method == "PUT" {
			w.Write([]byte("{}"))
			return
		}
		w.WriteHeader(404)
		w.Write([]byte(`{"errcode":"M_NOT_FOUND"}`))
	})}
	go srv.Serve(ln)
	defer srv.Close()
	reg := &appservice.Registration{ID: "probe", URL: "http://" + ln.Addr().String(), AppToken: "as_probe", ServerToken: "hs_probe", SenderLocalpart: "probe_bot"}
	reg.Namespaces.UserIDs.Register(regexp.MustCompile(`@probe_.*:localhost`), true)
	reg.Namespaces.RoomAliases.Register(regexp.MustCompile(`#probealias_.*:localhost`), false)
	reg.Namespaces.RoomAliases.Register(regexp.MustCompile(`#probeexcl_.*:localhost`), true)
	hs := synapse.RunForTest(t, synapse.WithServerName("localhost"), synapse.WithAppservice(reg))
	os.WriteFile("/tmp/probe/url", []byte(hs.BaseURL()), 0o644)
	for {
		if _, err := os.Stat("/tmp/probe/stop"); err == nil {
			return
		}
		time.Sleep(time.Second)
	}
}
