package steps

import (
	"context"
	"fmt"
	"net"
	"os"

	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/internal/pushdrain"
)

// drain answers a shared homeserver's appservice pushes while no daemon
// holds a slot's push port. A real homeserver queues every event of the
// appservice's rooms and retries with growing backoff while nobody listens,
// so without it a scenario's daemon would be handed the generated history
// (and the previous scenario's leftovers) as if they were new, and
// would start late behind the backoff.
type drain struct{ *pushdrain.Drain }

// pushSocket is an appservice push port, bound once and held by the harness
// for as long as a homeserver may push to it. The drain and the daemon (in
// this process, or a child that inherits the descriptor) each serve on a
// duplicate of the socket, so between them the port is never unbound: no
// other scenario, and nothing else on the machine, can take it meanwhile.
type pushSocket struct {
	addr string   // host:port the registration's url names
	file *os.File // the bound socket; duplicates of it are handed out
}

// bindPush binds addr ("127.0.0.1:0" picks a port) and keeps it bound.
func bindPush(addr string) (*pushSocket, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("binding the appservice push port %s: %w", addr, err)
	}
	defer ln.Close()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		return nil, fmt.Errorf("holding the appservice push port %s: %w", addr, err)
	}
	return &pushSocket{addr: ln.Addr().String(), file: f}, nil
}

// listener is a new listener on the held socket; closing it leaves the
// port bound. Connections that arrive while nobody accepts wait in the
// socket's backlog for the next listener.
func (p *pushSocket) listener() (net.Listener, error) {
	ln, err := net.FileListener(p.file)
	if err != nil {
		return nil, fmt.Errorf("listening on the held push port %s: %w", p.addr, err)
	}
	return ln, nil
}

// close unbinds the port (once every listener on it is closed too).
func (p *pushSocket) close() error { return p.file.Close() }

// startDrain serves pushes on a listener of the held socket, refusing any
// without the registration's hs_token.
func startDrain(sock *pushSocket, hsToken string) (*drain, error) {
	ln, err := sock.listener()
	if err != nil {
		return nil, fmt.Errorf("draining pushes: %w", err)
	}
	return &drain{pushdrain.Start(ln, hsToken)}, nil
}

// waitFor blocks until the homeserver has pushed the event here.
func (d *drain) waitFor(ctx context.Context, e id.EventID) error {
	if _, err := d.Wait(ctx, e); err != nil {
		return fmt.Errorf("waiting for the homeserver to push %s before the daemon starts: %w", e, err)
	}
	return nil
}

// stop stops serving; the socket stays bound for the daemon.
func (d *drain) stop() error {
	if err := d.Stop(); err != nil {
		return fmt.Errorf("stopping the push drain: %w", err)
	}
	return nil
}
