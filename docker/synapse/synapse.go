// Package synapse runs a real Synapse homeserver in a container for tests, with
// testcontainers-go.
//
// The container uses host networking and listens on 127.0.0.1 only, so the homeserver
// reaches appservices listening on the host's loopback and tests reach the homeserver
// without port mapping. The default image, zooid-synapse:local, is built without any
// registry by docker/synapse-image.sh; ZOOID_SYNAPSE_IMAGE or WithImage selects another
// (for example matrixdotorg/synapse), which must have python3 with the synapse package.
//
// The package disables testcontainers' Ryuk reaper (its image cannot be pulled where no
// registry is reachable), so nothing reaps a leaked container: call Terminate, or use
// RunForTest, which registers it with t.Cleanup.
package synapse

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/zooid-dev/zooid/internal/freeport"

	"github.com/moby/moby/api/types/container"
	"github.com/testcontainers/testcontainers-go"
	tcexec "github.com/testcontainers/testcontainers-go/exec"
	"github.com/testcontainers/testcontainers-go/wait"
	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/appservice"
	"maunium.net/go/mautrix/id"
	"maunium.net/go/mautrix/synapseadmin"
)

// DefaultImage is the image docker/synapse-image.sh builds.
const DefaultImage = "zooid-synapse:local"

// ImageEnv names the environment variable that overrides DefaultImage.
const ImageEnv = "ZOOID_SYNAPSE_IMAGE"

// RoleLabel is set to "test-synapse" on every container this package starts, so leftovers
// of a killed test process can be found: docker ps -a --filter label=dev.zooid.role.
// With the owner labels (OwnerPIDLabel and the rest) Run removes those whose process
// has ended (Sweep).
const RoleLabel = "dev.zooid.role"

// URLLabel carries the container's BaseURL.
const URLLabel = "dev.zooid.synapse.url"

// startTimeout bounds the wait for Synapse to answer when ctx has no deadline; a cold
// start takes a few seconds, a loaded CI machine maybe ten times that.
const startTimeout = 2 * time.Minute

func init() {
	// testcontainers reads its configuration once, on first use; the variable has to be
	// set before any testcontainers call in the process, including health checks.
	if _, set := os.LookupEnv("TESTCONTAINERS_RYUK_DISABLED"); !set {
		_ = os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	}
}

type settings struct {
	image       string
	serverName  string
	port        int
	appservices []*appservice.Registration
	keepKey     bool // the image has its signing key (a snapshot): don't write a new one
	federation  *federation
}

// federation is what WithFederation asks for.
type federation struct {
	ca   *TestCA
	port int
}

// Option configures Run.
type Option func(*settings)

// WithImage runs ref instead of ZOOID_SYNAPSE_IMAGE or DefaultImage.
func WithImage(ref string) Option {
	return func(s *settings) { s.image = ref }
}

// WithServerName sets Synapse's server_name; the default is "localhost".
func WithServerName(name string) Option {
	return func(s *settings) { s.serverName = name }
}

// WithPort makes Synapse listen on 127.0.0.1:port instead of a free port.
func WithPort(port int) Option {
	return func(s *settings) { s.port = port }
}

// WithAppservice registers reg with Synapse (app_service_config_files). It may be given
// more than once. A registration without rate_limited is written with rate_limited:
// false; reg itself is not modified. reg.URL should point at 127.0.0.1, where Synapse
// can reach the host through host networking.
func WithAppservice(reg *appservice.Registration) Option {
	return func(s *settings) { s.appservices = append(s.appservices, reg) }
}

// WithFederation makes Synapse federate: it serves the federation API over TLS
// on 127.0.0.1:port with a certificate ca issued, trusts only ca for other
// servers, and may reach other servers on loopback. Its server name becomes
// localhost:port (unless WithServerName comes after), which is how another
// server finds it. Federate starts several such servers.
func WithFederation(ca *TestCA, port int) Option {
	return func(s *settings) {
		s.federation = &federation{ca: ca, port: port}
		s.serverName = fmt.Sprintf("localhost:%d", port)
	}
}

// Container is a running Synapse.
type Container struct {
	ctr          *testcontainers.DockerContainer
	baseURL      string
	serverName   string
	sharedSecret string
	client       *http.Client

	terminateOnce sync.Once
	terminateErr  error
}

// BaseURL returns the client-server API's base URL, http://127.0.0.1:PORT.
func (c *Container) BaseURL() string { return c.baseURL }

// ServerName returns Synapse's server_name, the part after the colon in user ids.
func (c *Container) ServerName() string { return c.serverName }

// Terminate stops and removes the container. Calling it again returns the first result.
func (c *Container) Terminate(ctx context.Context) error {
	c.terminateOnce.Do(func() {
		if err := c.ctr.Terminate(ctx); err != nil {
			c.terminateErr = fmt.Errorf("terminating synapse container: %w", err)
		}
	})
	return c.terminateErr
}

// ConfigPath is where Synapse's homeserver.yaml is inside the container (with the
// registration_shared_secret register_new_matrix_user reads).
const ConfigPath = configPath

// Exec runs cmd inside the container, as an operator's `docker exec` does, and returns its
// exit code and its output (stdout and stderr, in order).
func (c *Container) Exec(ctx context.Context, cmd []string) (int, string, error) {
	code, r, err := c.ctr.Exec(ctx, cmd, tcexec.Multiplexed())
	if err != nil {
		return 0, "", fmt.Errorf("exec %q in synapse: %w", cmd, err)
	}
	out, err := io.ReadAll(r)
	if err != nil {
		return code, string(out), fmt.Errorf("reading the output of %q: %w", cmd, err)
	}
	return code, string(out), nil
}

// freePort finds a loopback port for Synapse (host networking: no port mapping).
func freePort() (int, error) { return freeport.Port() }

// Run starts Synapse and returns once its client API answers. On error nothing is left
// running.
func Run(ctx context.Context, opts ...Option) (*Container, error) {
	s := &settings{image: os.Getenv(ImageEnv), serverName: "localhost"}
	if s.image == "" {
		s.image = DefaultImage
	}
	for _, o := range opts {
		o(s)
	}
	if s.serverName == "" {
		return nil, errors.New("synapse: server name is empty")
	}
	if s.port == 0 {
		p, err := freePort()
		if err != nil {
			return nil, fmt.Errorf("synapse: %w", err)
		}
		s.port = p
	} else if s.port < 0 || s.port > 65535 {
		return nil, fmt.Errorf("synapse: port %d out of range", s.port)
	}
	g, err := generate(s)
	if err != nil {
		return nil, fmt.Errorf("synapse: generating config: %w", err)
	}

	files := []testcontainers.ContainerFile{
		{Reader: bytes.NewReader(g.homeserver), ContainerFilePath: configPath, FileMode: 0o600},
		{Reader: bytes.NewReader(g.logConfig), ContainerFilePath: logConfigPath, FileMode: 0o644},
		{Reader: strings.NewReader(startScript), ContainerFilePath: startScriptPath, FileMode: 0o644},
	}
	if !s.keepKey {
		files = append(files, testcontainers.ContainerFile{Reader: bytes.NewReader(g.signingKey), ContainerFilePath: signingKeyPath, FileMode: 0o600})
	}
	for path, data := range g.appservices {
		files = append(files, testcontainers.ContainerFile{
			Reader: bytes.NewReader(data), ContainerFilePath: path, FileMode: 0o600,
		})
	}
	for path, data := range g.tls {
		files = append(files, testcontainers.ContainerFile{
			Reader: bytes.NewReader(data), ContainerFilePath: path, FileMode: 0o600,
		})
	}

	// Leftovers of killed test processes hold ports, memory and CPU; they go
	// before this run adds a container of its own.
	if _, err := Sweep(ctx); err != nil {
		return nil, fmt.Errorf("synapse: %w", err)
	}
	labels := map[string]string{RoleLabel: "test-synapse", URLLabel: fmt.Sprintf("http://127.0.0.1:%d", s.port)}
	for k, v := range selfOwner().labels() {
		labels[k] = v
	}
	ctr, err := start(ctx, testcontainers.ContainerRequest{
		Image: s.image,
		Files: files,
		// Run the homeserver module directly rather than an image's own entrypoint
		// (matrixdotorg/synapse's start.py generates its own config and drops to
		// another user); any image with python3 and synapse works the same way.
		Entrypoint: []string{"python3", startScriptPath},
		Cmd:        []string{"--config-path", configPath},
		// The role and owner labels find containers a killed test left behind
		// (Sweep); the URL label tells concurrent test processes' containers apart.
		Labels: labels,
		ConfigModifier: func(cfg *container.Config) {
			// Docker creates the working directory, so the files above have a parent
			// in any image.
			cfg.WorkingDir = dataDir
		},
		HostConfigModifier: func(hc *container.HostConfig) {
			hc.NetworkMode = "host"
		},
	})
	if err != nil {
		hint := ""
		if s.image == DefaultImage {
			hint = " (build the image with docker/synapse-image.sh)"
		}
		return nil, fmt.Errorf("synapse: starting container from %s%s: %w", s.image, hint, err)
	}

	c := &Container{
		ctr:          ctr,
		baseURL:      fmt.Sprintf("http://127.0.0.1:%d", s.port),
		serverName:   s.serverName,
		sharedSecret: g.sharedSecret,
		client:       &http.Client{Timeout: 30 * time.Second},
	}
	if err := c.waitReady(ctx, s.port); err != nil {
		_ = c.Terminate(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("synapse: %w", err)
	}
	return c, nil
}

// start creates and starts the container, and removes it again when starting fails.
//
// It goes through a provider whose default network is "host" instead of through
// testcontainers.Run: an engine started with --bridge=none has no "bridge" network, and
// then testcontainers creates a bridge network of its own ("reaper_default") and attaches
// every container to it, which a host-networked container cannot join.
func start(ctx context.Context, req testcontainers.ContainerRequest) (*testcontainers.DockerContainer, error) {
	p, err := testcontainers.NewDockerProvider(testcontainers.WithDefaultBridgeNetwork("host"))
	if err != nil {
		return nil, fmt.Errorf("connecting to the Docker engine: %w", err)
	}
	defer p.Close()
	created, err := p.CreateContainer(ctx, req)
	// CreateContainer may return a container together with an error.
	ctr, _ := created.(*testcontainers.DockerContainer)
	if err != nil {
		if ctr != nil {
			_ = ctr.Terminate(context.WithoutCancel(ctx))
		}
		return nil, fmt.Errorf("creating container: %w", err)
	}
	if ctr == nil {
		if created != nil {
			_ = created.Terminate(context.WithoutCancel(ctx))
		}
		return nil, fmt.Errorf("creating container: unexpected container type %T", created)
	}
	if err := ctr.Start(ctx); err != nil {
		_ = ctr.Terminate(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("starting container: %w", err)
	}
	return ctr, nil
}

// waitReady waits with testcontainers' wait.ForHTTP until /_matrix/client/versions
// answers 200; the strategy gives up early when the container exits (a bad config, a
// port already taken), and the error then carries the end of Synapse's log.
func (c *Container) waitReady(ctx context.Context, port int) error {
	timeout := startTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	strategy := wait.ForHTTP("/_matrix/client/versions").
		WithPort(fmt.Sprintf("%d/tcp", port)).
		WithPollInterval(100 * time.Millisecond).
		WithStartupTimeout(timeout)
	if err := strategy.WaitUntilReady(ctx, loopback{c.ctr}); err != nil {
		if st, serr := c.ctr.State(context.WithoutCancel(ctx)); serr == nil && !st.Running {
			return fmt.Errorf("synapse exited (code %d) before answering: %w; log:\n%s", st.ExitCode, err, c.logTail(context.WithoutCancel(ctx)))
		}
		return fmt.Errorf("waiting for %s/_matrix/client/versions: %w; log:\n%s", c.baseURL, err, c.logTail(context.WithoutCancel(ctx)))
	}
	return nil
}

// loopback is the container as the wait strategy sees it: with host networking
// Synapse listens on the host's 127.0.0.1, while testcontainers would look for a
// container at a network gateway's address when this process runs in a container.
type loopback struct {
	*testcontainers.DockerContainer
}

func (loopback) Host(context.Context) (string, error) { return "127.0.0.1", nil }

// logTail returns the end of the container's log for error messages.
func (c *Container) logTail(ctx context.Context) string {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	rc, err := c.ctr.Logs(ctx)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil && len(b) == 0 {
		return fmt.Sprintf("(no log: %v)", err)
	}
	const max = 8 << 10
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

// RegisterUser creates a user with Synapse's shared-secret registration
// (mautrix's synapseadmin) and returns its id and an access token.
func (c *Container) RegisterUser(ctx context.Context, localpart, password string, admin bool) (id.UserID, string, error) {
	return c.RegisterNamedUser(ctx, localpart, password, "", admin)
}

// RegisterNamedUser is RegisterUser with a display name (empty: the localpart),
// set in the same request.
func (c *Container) RegisterNamedUser(ctx context.Context, localpart, password, displayName string, admin bool) (id.UserID, string, error) {
	if localpart == "" {
		return "", "", errors.New("synapse: registering user: empty localpart")
	}
	cli, err := mautrix.NewClient(c.baseURL, "", "")
	if err != nil {
		return "", "", fmt.Errorf("synapse: registering %q: %w", localpart, err)
	}
	cli.Client = c.client
	admCli := synapseadmin.Client{Client: cli}
	resp, err := admCli.SharedSecretRegister(ctx, c.sharedSecret, synapseadmin.ReqSharedSecretRegister{
		Username: localpart, Password: password, Displayname: displayName, Admin: admin,
	})
	if err != nil {
		return "", "", fmt.Errorf("synapse: registering %q: %w", localpart, err)
	}
	if resp.UserID == "" || resp.AccessToken == "" {
		return "", "", fmt.Errorf("synapse: registering %q: response without user_id or access_token", localpart)
	}
	return resp.UserID, resp.AccessToken, nil
}
