// Package matrix is Zooid's Matrix application-service transport: it registers the agents'
// users, joins their rooms, receives events by appservice push or by an impersonated /sync
// loop, records them durably before acknowledging, dedupes them and hands each to the daemon
// once, and sends events as an agent with idempotent transaction ids and bounded retries.
package matrix

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/appservice"
	"maunium.net/go/mautrix/event"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/roomstate"
	"github.com/zooid-dev/zooid/zooid/trace"
)

// Agent is one agent's Matrix identity and the rooms it is bound to.
type Agent struct {
	Name        string
	UserID      id.UserID
	DisplayName string
	// Rooms are the agent's rooms as zooid.yaml names them.
	Rooms []config.RoomRef
}

// Options configures a Transport. The daemon builds them from a config.Config
// that passed validation; New checks only what it needs to run at all.
type Options struct {
	Homeserver string
	ServerName string
	ASToken    string
	HSToken    string
	// HSTokenFrom names where HSToken came from (config.MatrixTransport's
	// HSTokenFrom), so a refused homeserver token is traced to the file or
	// variable to fix; empty says "hs_token".
	HSTokenFrom string
	// ID is the appservice registration's id. With a push listener, Start
	// pings the appservice through the homeserver under this id to check the
	// registration before anything else; empty skips that check.
	ID string
	// SenderLocalpart is the registration's sender_localpart; default "zooid".
	SenderLocalpart string
	// Listen is the address of the appservice push listener ("127.0.0.1:0" picks a port).
	// Empty means no push: each agent runs an impersonated /sync loop instead.
	Listen string
	// Listener, when set, is an already bound push listener that the transport
	// serves on (and closes) instead of binding Listen itself: whoever named the
	// address to the homeserver can hold the port from then on, so nothing else
	// takes it in between.
	Listener net.Listener
	// StateDir holds the bbolt file with since tokens, seen event ids and the inbox.
	StateDir string
	Agents   []Agent
	// Workstation is the daemon's workstation (zooid.yaml workstation:), which
	// each agent's dev.zooid.agent state event names; "" when none.
	Workstation string
	// Rooms are the settings of rooms under zooid.yaml's rooms: (how the daemon creates
	// a room, whom it invites); a room not in it is private and invites nobody.
	Rooms  map[config.RoomRef]config.Room
	Logger *slog.Logger
	// Trace records every post (trace.KindPost); nil records nothing.
	Trace trace.Recorder
	// PostTimeout bounds one try of Send: a try the homeserver leaves
	// unanswered that long is given up and tried again with the same txn
	// id. Zero means config.DefaultPostTimeout.
	PostTimeout time.Duration
	// Received, when set, hears of each pushed transaction once it is
	// recorded: its events' ids and when its request arrived (where the
	// daemon's part of an event's way begins). Called on the push handler's
	// goroutine; it must be quick.
	Received func(events []id.EventID, at time.Time)
	// Encryption asks the homeserver, in the registration, for what the
	// agents' devices need: to-device messages, key counts and device lists
	// in transactions and device management without a login.
	Encryption bool
	// OpenCrypto, when set, gives the agents end-to-end encryption devices
	// (zooid/e2ee) once Start has set them up; nil reads and writes
	// encrypted rooms not at all.
	OpenCrypto CryptoOpener
}

// OptionsFromConfig gives the options for mt, a matrix transport of cfg, which
// config.Load has validated: its homeserver and tokens, the agents bound to
// it, and <state_dir>/matrix for the transport's state. Logger is the
// caller's to set.
func OptionsFromConfig(cfg *config.Config, mt *config.MatrixTransport) Options {
	name := ""
	for _, t := range cfg.Transports {
		if t.Matrix == mt {
			name = t.Name
		}
	}
	opts := Options{
		Homeserver:      mt.Homeserver,
		ServerName:      mt.ServerName,
		ASToken:         mt.ASToken,
		HSToken:         mt.HSToken,
		HSTokenFrom:     mt.HSTokenFrom,
		ID:              mt.ID,
		SenderLocalpart: mt.SenderLocalpart,
		Listen:          mt.Listen,
		StateDir:        filepath.Join(cfg.StateDir, "matrix"),
		Rooms:           cfg.Rooms,
		Workstation:     cfg.Workstation,

		PostTimeout: cfg.PostTimeout,
		Encryption:  cfg.Encryption,
	}
	for _, a := range cfg.Agents {
		if a.Matrix == nil || (a.Matrix.Transport != "" && a.Matrix.Transport != name) {
			continue
		}
		opts.Agents = append(opts.Agents, Agent{
			Name:        a.Name,
			UserID:      a.Matrix.UserID,
			DisplayName: a.Matrix.DisplayName,
			Rooms:       a.Matrix.Rooms,
		})
	}
	return opts
}

// Handler receives each event once, in order per room.
type Handler func(ctx context.Context, ev *event.Event)

// Transport is a running Matrix appservice connection for a set of agents.
type Transport struct {
	opts  Options
	log   *slog.Logger
	trace trace.Recorder
	store *store
	// state is the bound rooms' state, kept from the events delivered
	// (deliver.go) and read once a room at start (Start).
	state *roomstate.Cache

	listener net.Listener
	server   *http.Server
	pings    pings // pings the homeserver forwarded to the listener
	// crypto are the agents' devices (nil without Options.OpenCrypto),
	// set before cryptoReady is closed and not changed after.
	crypto      Crypto
	cryptoReady chan struct{}
	refusals    refusals // requests the listener refused for their token

	clientsMu sync.Mutex
	clients   map[id.UserID]*mautrix.Client
	// conns is the agents' connections to the homeserver, one pool for all
	// of them (see newConnPool).
	conns *http.Transport

	roomsMu sync.RWMutex
	rooms   map[config.RoomRef]id.RoomID // configured room → resolved id
	bound   map[id.RoomID]bool
	members map[id.UserID]map[id.RoomID]bool // the bound rooms each agent is in

	wake chan struct{} // nudges the dispatcher after new inbox records
	// handed are records just filed, handed to the dispatcher as they are
	// so it need not read them back from the inbox (deliver.go's pump).
	handedMu sync.Mutex
	handed   []pending
	// disp is the running dispatcher, which a push pumps itself (handOver).
	disp   atomic.Pointer[dispatcher]
	ready  chan struct{}
	closed chan struct{}

	mu        sync.Mutex
	started   bool
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	// retry tuning; tests shorten them.
	sendAttempts  int
	sendTryLimit  time.Duration // one try of Send, unanswered, is given up after this
	backoffBase   time.Duration
	maxRetryAfter time.Duration
	syncTimeout   time.Duration
	// sendPatience is how long Send keeps retrying past sendAttempts: a
	// homeserver restart should not lose a post.
	sendPatience time.Duration
	// syncTimelineLimit is the timeline size asked of /sync and the page size of gap fills.
	syncTimelineLimit int
}

// New validates opts, opens the state file and, in push mode, binds the listener so that
// PushURL is known before Start.
func New(opts Options) (*Transport, error) {
	if err := validate(&opts); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	st, err := openStore(opts.StateDir)
	if err != nil {
		return nil, err
	}
	t := &Transport{
		opts:          opts,
		log:           log.With("component", "matrix"),
		trace:         trace.Or(opts.Trace),
		store:         st,
		clients:       map[id.UserID]*mautrix.Client{},
		conns:         newConnPool(),
		rooms:         map[config.RoomRef]id.RoomID{},
		bound:         map[id.RoomID]bool{},
		members:       map[id.UserID]map[id.RoomID]bool{},
		wake:          make(chan struct{}, 1),
		ready:         make(chan struct{}),
		cryptoReady:   make(chan struct{}),
		closed:        make(chan struct{}),
		sendAttempts:  5,
		sendTryLimit:  cmp.Or(opts.PostTimeout, config.DefaultPostTimeout),
		backoffBase:   250 * time.Millisecond,
		maxRetryAfter: 30 * time.Second,
		syncTimeout:   30 * time.Second,
		sendPatience:  defaultSendPatience,

		syncTimelineLimit: 100,
	}
	for _, a := range opts.Agents {
		if _, err := t.newClient(a.UserID); err != nil {
			_ = st.close()
			return nil, err
		}
	}
	t.state = roomstate.New(roomstate.Options{Load: t.loadRoomState, Ours: t.isAgent, Logger: log})
	t.listener = opts.Listener
	if t.listener == nil && opts.Listen != "" {
		ln, err := net.Listen("tcp", opts.Listen)
		if err != nil {
			_ = st.close()
			return nil, fmt.Errorf("listening for appservice pushes on %s: %w", opts.Listen, err)
		}
		t.listener = ln
	}
	if t.listener != nil {
		// The homeserver is the only legitimate client: it sends a transaction
		// promptly and keeps the connection alive between them. Anyone else
		// holding a connection open, idle or dribbling a body, is cut off.
		t.server = &http.Server{
			Handler:           t.pushHandler(),
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       60 * time.Second,
			WriteTimeout:      60 * time.Second,
			IdleTimeout:       120 * time.Second,
		}
	}
	return t, nil
}

// validate refuses options the transport can't run with. Whether a config is
// acceptable is config's to say (zooid check and run share it); this only
// guards against a caller that skipped it.
func validate(o *Options) error {
	switch {
	case o.Homeserver == "" || o.ASToken == "":
		return errors.New("matrix transport options: homeserver and as_token are required")
	case (o.Listen != "" || o.Listener != nil) && o.HSToken == "":
		return errors.New("matrix transport options: a push listener needs hs_token")
	case o.StateDir == "":
		return errors.New("matrix transport options: state dir is empty")
	}
	return nil
}

// maxIdleConnsPerHost is how many idle connections to the homeserver the
// daemon keeps for reuse. Every request of every agent goes to that one host,
// many at once in a busy room (reads, posts, the tools' calls); with
// net/http's default of two, each request past the second at once opened a
// connection and closed it after, about 150 in a 2 s routing load
// (docs/performance.md, item 6), each a handshake behind TLS. (A homeserver
// that speaks HTTP/2 over TLS gets one connection, multiplexed, either way.)
// Idle ones close after net/http's 90 s.
const maxIdleConnsPerHost = 64

// newConnPool is the daemon's own pool of connections to the homeserver:
// net/http's defaults (proxy from the environment, dial and TLS timeouts,
// HTTP/2) with maxIdleConnsPerHost, apart from http.DefaultTransport so that
// nothing else in the process shares or closes its connections.
func newConnPool() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = maxIdleConnsPerHost
	tr.MaxIdleConnsPerHost = maxIdleConnsPerHost
	return tr
}

func (t *Transport) newClient(user id.UserID) (*mautrix.Client, error) {
	cli, err := mautrix.NewClient(t.opts.Homeserver, user, t.opts.ASToken)
	if err != nil {
		return nil, fmt.Errorf("client for %s at %s: %w", user, t.opts.Homeserver, err)
	}
	cli.SetAppServiceUserID = true
	// mautrix's own retries stay off (DefaultHTTPRetries 0): reads are retried
	// by retryReads, sends by Send, each with the homeserver's retry_after_ms.
	// No Client.Timeout: retryReads bounds each request in its context
	// (requestTimeout), which costs no goroutine per request.
	cli.Client = &http.Client{
		Transport: &retryReads{next: t.conns, attempts: readAttempts, base: t.backoffBase, maxWait: maxReadWait, timeout: requestTimeout},
	}
	t.clientsMu.Lock()
	t.clients[user] = cli
	t.clientsMu.Unlock()
	return cli, nil
}

// Client returns the cached client that acts as user through the appservice token, for reads
// done as the agent. A user outside the configured agents still gets a client; the homeserver
// refuses it unless the user is in the appservice's namespace.
func (t *Transport) Client(user id.UserID) *mautrix.Client {
	t.clientsMu.Lock()
	cli := t.clients[user]
	t.clientsMu.Unlock()
	if cli != nil {
		return cli
	}
	cli, err := t.newClient(user)
	if err != nil {
		// The homeserver URL was already parsed for the agents, so this can't fail in practice.
		t.log.Error("creating client", "user", user, "err", err)
		return nil
	}
	return cli
}

// RoomState is the bound rooms' state as the daemon has seen it: the room
// tools answer from it (history.Options.State).
func (t *Transport) RoomState() *roomstate.Cache { return t.state }

// RoomID maps a configured room ("#alias:server" or "!id:server") to its resolved id; it is
// known once Start has joined the rooms.
func (t *Transport) RoomID(room config.RoomRef) (id.RoomID, bool) {
	t.roomsMu.RLock()
	defer t.roomsMu.RUnlock()
	r, ok := t.rooms[room]
	return r, ok
}

// AgentRoomID is RoomID for the agent user: the room's id only when Start got that agent
// into it. A room that refused the agent (or was not served at all) is not one to route
// to it: it could neither read there nor answer.
func (t *Transport) AgentRoomID(user id.UserID, room config.RoomRef) (id.RoomID, bool) {
	t.roomsMu.RLock()
	defer t.roomsMu.RUnlock()
	r, ok := t.rooms[room]
	if !ok || !t.members[user][r] {
		return "", false
	}
	return r, true
}

// PushURL is the URL the homeserver should push transactions to (the real bound port); ""
// in /sync mode.
func (t *Transport) PushURL() string {
	if t.listener == nil {
		return ""
	}
	return "http://" + t.listener.Addr().String()
}

// Ready is closed once Start has set up users and rooms and is receiving events.
func (t *Transport) Ready() <-chan struct{} { return t.ready }

// Start checks the appservice registration with a ping (push mode with an ID; see
// checkRegistration), registers the agents' users, sets display names, joins (or creates) their rooms, and
// then receives events, calling handle for each once, in order per room. It returns when ctx
// ends or Close is called (nil), or early with the setup error.
func (t *Transport) Start(ctx context.Context, handle Handler) error {
	t.mu.Lock()
	if t.started {
		t.mu.Unlock()
		return errors.New("matrix transport already started")
	}
	select {
	case <-t.closed:
		t.mu.Unlock()
		return errors.New("matrix transport is closed")
	default:
	}
	t.started = true
	ctx, cancel := context.WithCancel(ctx)
	t.cancel = cancel
	// Start counts as one of the goroutines Close waits for, so every later wg.Add
	// happens while the count is above zero.
	t.wg.Add(1)
	t.mu.Unlock()
	defer t.wg.Done()
	defer cancel()

	// Serve pushes from the start: events arriving during setup are recorded and wait in
	// the inbox until the rooms are resolved.
	if t.server != nil {
		t.wg.Add(1)
		go func() {
			defer t.wg.Done()
			if err := t.server.Serve(t.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
				t.log.Error("appservice listener stopped", "err", err)
			}
		}()
	}
	if err := t.checkRegistration(ctx); err != nil {
		close(t.cryptoReady)
		t.shutdownServer()
		return err
	}
	if err := t.setup(ctx); err != nil {
		close(t.cryptoReady)
		t.shutdownServer()
		return err
	}
	if err := t.openCrypto(ctx); err != nil {
		t.shutdownServer()
		return err
	}
	// Each bound room's state is read once, in the background; what the
	// dispatcher delivers from now on is applied on top (roomstate.Seed).
	t.state.Seed(t.boundRooms()...)
	d := newDispatcher(t, handle)
	t.disp.Store(d)
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		d.run(ctx)
	}()
	if t.server == nil {
		var first sync.WaitGroup
		for _, a := range t.opts.Agents {
			first.Add(1)
			t.wg.Add(1)
			go func() {
				defer t.wg.Done()
				t.syncLoop(ctx, a.UserID, first.Done)
			}()
		}
		first.Wait()
	}
	close(t.ready)
	t.log.Info("matrix transport ready", "push_url", t.PushURL(), "agents", len(t.opts.Agents))
	<-ctx.Done()
	t.shutdownServer()
	return nil
}

func (t *Transport) shutdownServer() {
	if t.server == nil {
		return
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = t.server.Shutdown(sctx)
}

// CloseIdleConnections closes the connections to the homeserver kept for
// reuse that no request is using.
func (t *Transport) CloseIdleConnections() { t.conns.CloseIdleConnections() }

// Close stops the listener and loops, waits for their goroutines and closes the state file.
func (t *Transport) Close() error {
	t.closeOnce.Do(func() {
		t.mu.Lock()
		close(t.closed)
		if t.cancel != nil {
			t.cancel()
		}
		started := t.started
		t.mu.Unlock()
		if !started && t.listener != nil {
			_ = t.listener.Close()
		}
		t.shutdownServer()
		t.wg.Wait()
		t.state.Close()
		t.conns.CloseIdleConnections()
		t.closeErr = t.store.close()
		if c := t.devices(); c != nil {
			t.closeErr = errors.Join(t.closeErr, c.Close())
		}
	})
	return t.closeErr
}

// handOver gives records just filed to the dispatcher: it pumps them to
// their rooms' workers on this goroutine when it can, else nudges the
// dispatcher's loop to.
func (t *Transport) handOver(filed []pending) {
	if len(filed) == 0 {
		return
	}
	t.handedMu.Lock()
	t.handed = append(t.handed, filed...)
	t.handedMu.Unlock()
	if d := t.disp.Load(); d != nil && d.pumpFiled() {
		return
	}
	t.notify()
}

// takeHanded takes the records handed over since the last call.
func (t *Transport) takeHanded() []pending {
	t.handedMu.Lock()
	defer t.handedMu.Unlock()
	h := t.handed
	t.handed = nil
	return h
}

// notify nudges the dispatcher without blocking.
func (t *Transport) notify() {
	select {
	case t.wake <- struct{}{}:
	default:
	}
}

func (t *Transport) isBound(room id.RoomID) bool {
	t.roomsMu.RLock()
	defer t.roomsMu.RUnlock()
	return t.bound[room]
}

// Registration builds the appservice registration an operator installs on the homeserver:
// the tokens, the push URL, exclusive user namespaces covering exactly the agents' users,
// and non-exclusive alias namespaces for the configured room aliases. Synapse refuses an
// appservice user creating an alias outside its alias namespaces (400 M_EXCLUSIVE), and
// the daemon creates a configured room that does not exist yet; non-exclusive, because
// humans may create those rooms too.
func Registration(opts Options, url string) *appservice.Registration {
	reg := &appservice.Registration{
		ID:          cmp.Or(opts.ID, "zooid"),
		URL:         url,
		AppToken:    opts.ASToken,
		ServerToken: opts.HSToken,
	}
	f := false
	reg.RateLimited = &f
	// A dedicated sender keeps the bare as_token from acting as any one agent.
	reg.SenderLocalpart = cmp.Or(opts.SenderLocalpart, "zooid")
	if opts.Encryption {
		// Each agent's device hears its room keys (MSC2409), key counts and
		// device lists (MSC3202) only in transactions, and is made without a
		// login (MSC4190). Synapse also needs them on in experimental_features
		// (docs/security.md).
		reg.EphemeralEvents = true
		reg.SoruEphemeralEvents = true
		reg.MSC3202 = true
		reg.MSC4190 = true
	}
	for _, a := range opts.Agents {
		reg.Namespaces.UserIDs = append(reg.Namespaces.UserIDs, appservice.Namespace{
			Regex:     "^" + regexp.QuoteMeta(string(a.UserID)) + "$",
			Exclusive: true,
		})
	}
	seen := map[id.RoomAlias]bool{}
	for _, a := range opts.Agents {
		for _, room := range a.Rooms {
			alias, ok := room.Alias()
			if !ok || seen[alias] {
				continue
			}
			seen[alias] = true
			reg.Namespaces.RoomAliases = append(reg.Namespaces.RoomAliases, appservice.Namespace{
				Regex: "^" + regexp.QuoteMeta(string(alias)) + "$",
			})
		}
	}
	return reg
}
