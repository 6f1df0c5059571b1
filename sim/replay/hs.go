package replay

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/internal/pushdrain"
)

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return hex.EncodeToString(b)
}

// pushSocket is the appservice push port, bound before the homeserver is
// told of it and held for the whole replay: the drain and each daemon run
// (a recorded restart makes two) take listeners on it in turn, and pushes
// in between wait in its backlog.
type pushSocket struct {
	addr string
	file *os.File
}

func bindPush() (*pushSocket, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("binding the appservice push port: %w", err)
	}
	defer ln.Close()
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		return nil, fmt.Errorf("holding the appservice push port: %w", err)
	}
	return &pushSocket{addr: ln.Addr().String(), file: f}, nil
}

func (p *pushSocket) listener() (net.Listener, error) {
	ln, err := net.FileListener(p.file)
	if err != nil {
		return nil, fmt.Errorf("listening on the held push port %s: %w", p.addr, err)
	}
	return ln, nil
}

func (p *pushSocket) close() error { return p.file.Close() }

// drain takes the pushes of the set-up (room creation, joins, history) so
// the daemon never sees them as live events. Unlike the steps' drain it
// does not check the hs_token.
type drain struct{ *pushdrain.Drain }

func startDrain(sock *pushSocket) (*drain, error) {
	ln, err := sock.listener()
	if err != nil {
		return nil, fmt.Errorf("draining pushes: %w", err)
	}
	return &drain{pushdrain.Start(ln, "")}, nil
}

// waitFor blocks until every event was pushed to the drain.
func (d *drain) waitFor(ctx context.Context, evs []id.EventID, bound time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	missing, err := d.Wait(wctx, evs...)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("the homeserver did not push %s within %s before the daemon started", missing, bound)
}

func (d *drain) stop() { _ = d.Stop() }

// client is the few client-server API calls a replay makes.
type client struct {
	base string
	txn  int
	mu   sync.Mutex
}

func (c *client) do(ctx context.Context, method, path, token string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

func (c *client) createRoom(ctx context.Context, token, alias, name string) (id.RoomID, error) {
	lp := strings.TrimPrefix(strings.SplitN(alias, ":", 2)[0], "#")
	body := map[string]any{"preset": "public_chat", "room_alias_name": lp}
	if name != "" {
		body["name"] = name
	}
	var out struct {
		RoomID id.RoomID `json:"room_id"`
	}
	if err := c.do(ctx, http.MethodPost, "/_matrix/client/v3/createRoom", token, body, &out); err != nil {
		return "", err
	}
	return out.RoomID, nil
}

func (c *client) join(ctx context.Context, token string, room id.RoomID) error {
	return c.do(ctx, http.MethodPost, "/_matrix/client/v3/join/"+url.PathEscape(string(room)), token, map[string]any{}, nil)
}

func (c *client) send(ctx context.Context, token string, room id.RoomID, typ string, content map[string]any) (id.EventID, error) {
	c.mu.Lock()
	c.txn++
	txn := fmt.Sprintf("replay-%d-%s", c.txn, randomHex(4))
	c.mu.Unlock()
	var out struct {
		EventID id.EventID `json:"event_id"`
	}
	path := fmt.Sprintf("/_matrix/client/v3/rooms/%s/send/%s/%s", url.PathEscape(string(room)), url.PathEscape(typ), txn)
	if err := c.do(ctx, http.MethodPut, path, token, content, &out); err != nil {
		return "", err
	}
	if out.EventID == "" {
		return "", errors.New("the homeserver returned no event id")
	}
	return out.EventID, nil
}
