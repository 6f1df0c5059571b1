package matrix

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/zooid-dev/zooid/zooid/config"
)

// TestAgentsReuseTheirConnectionsToTheHomeserver pins that the agents'
// requests, many at once, reuse connections instead of opening one each:
// 160 reads, eight in flight at a time, must open no more than twice eight
// connections (one per request in flight, with room for one handed back to
// the pool a moment after its next request looked). net/http's default of two
// idle connections a host opens about six more each round, 122 in all.
func TestAgentsReuseTheirConnectionsToTheHomeserver(t *testing.T) {
	const inFlight, rounds = 8, 20
	arrived := make(chan struct{}, inFlight)
	var gate atomic.Pointer[chan struct{}]
	var opened atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		// Hold each request until the round's eight are all in flight, so
		// each round needs eight connections at once.
		release := *gate.Load()
		arrived <- struct{}{}
		<-release
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"user_id":"@agent-a:localhost"}`)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)

	tr, err := New(Options{Homeserver: srv.URL, ASToken: testAS, StateDir: t.TempDir(), Logger: testLogger(t),
		Agents: []Agent{{Name: "agent-a", UserID: userA, Rooms: []config.RoomRef{"#general:localhost"}}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Close() })
	cli := tr.Client(userA)

	ctx := context.Background()
	for range rounds {
		release := make(chan struct{})
		gate.Store(&release)
		var wg sync.WaitGroup
		errs := make(chan error, inFlight)
		for range inFlight {
			wg.Go(func() {
				if _, err := cli.Whoami(ctx); err != nil {
					errs <- err
				}
			})
		}
		for range inFlight {
			<-arrived
		}
		close(release)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("whoami: %v", err)
		}
	}
	if n := opened.Load(); n > 2*inFlight {
		t.Fatalf("%d reads, %d at a time, opened %d connections to the homeserver, want at most %d", rounds*inFlight, inFlight, n, 2*inFlight)
	}
}
