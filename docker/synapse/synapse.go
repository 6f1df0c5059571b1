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
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
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
	"maunium.net/go/mautrix/appservice"
	"maunium.net/go/mautrix/id"
)

// DefaultImage is the image docker/synapse-image.sh builds.
const DefaultImage = "zooid-synapse:local"

// ImageEnv names the environment variable that overrides DefaultImage.
const ImageEnv = "ZOOID_SYNAPSE_IMAGE"

// RoleLabel is set to "test-synapse" on every container this package starts, so leftovers
// of a killed test process can be found: docker ps -a --filter label=dev.zooid.role.
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
		{Reader: bytes.NewReader(g.signingKey), ContainerFilePath: signingKeyPath, FileMode: 0o600},
	}
	for path, data := range g.appservices {
		files = append(files, testcontainers.ContainerFile{
			Reader: bytes.NewReader(data), ContainerFilePath: path, FileMode: 0o600,
		})
	}

	ctr, err := start(ctx, testcontainers.ContainerRequest{
		Image: s.image,
		Files: files,
		// Run the homeserver module directly rather than an image's own entrypoint
		// (matrixdotorg/synapse's start.py generates its own config and drops to
		// another user); any image with python3 and synapse works the same way.
		Entrypoint: []string{"python3", "-m", "synapse.app.homeserver"},
		Cmd:        []string{"--config-path", configPath},
		// The role label finds containers a killed test left behind; the URL label
		// tells concurrent test processes' containers apart.
		Labels: map[string]string{RoleLabel: "test-synapse", URLLabel: fmt.Sprintf("http://127.0.0.1:%d", s.port)},
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
	if err := c.waitReady(ctx); err != nil {
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

// waitReady polls /_matrix/client/versions until it answers 200, and gives up early
// with the container's log when Synapse exits (a bad config, a port already taken).
func (c *Container) waitReady(ctx context.Context) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, startTimeout)
		defer cancel()
	}
	probe := &http.Client{Timeout: 2 * time.Second}
	url := c.baseURL + "/_matrix/client/versions"
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var lastErr error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("building readiness request: %w", err)
		}
		resp, err := probe.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			lastErr = fmt.Errorf("GET %s: %s", url, resp.Status)
		} else {
			lastErr = err
		}
		if st, err := c.ctr.State(ctx); err == nil && !st.Running {
			return fmt.Errorf("synapse exited (code %d) before answering; log:\n%s", st.ExitCode, c.logTail(ctx))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last: %v); log:\n%s", url, ctx.Err(), lastErr,
				c.logTail(context.WithoutCancel(ctx)))
		case <-tick.C:
		}
	}
}

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

// matrixError is the body of a Matrix error response.
type matrixError struct {
	ErrCode string `json:"errcode"`
	Error   string `json:"error"`
}

// do sends a JSON request and decodes a 200 response into out.
func (c *Container) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encoding %s %s: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.baseURL+path, rd)
	if err != nil {
		return fmt.Errorf("building %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("%s %s: reading response: %w", method, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		var me matrixError
		if json.Unmarshal(data, &me) == nil && me.ErrCode != "" {
			return fmt.Errorf("%s %s: %s: %s: %s", method, path, resp.Status, me.ErrCode, me.Error)
		}
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(data)))
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%s %s: decoding response: %w", method, path, err)
		}
	}
	return nil
}

// RegisterUser creates a user with Synapse's shared-secret registration
// (/_synapse/admin/v1/register) and returns its id and an access token.
func (c *Container) RegisterUser(ctx context.Context, localpart, password string, admin bool) (id.UserID, string, error) {
	if localpart == "" {
		return "", "", errors.New("synapse: registering user: empty localpart")
	}
	const path = "/_synapse/admin/v1/register"
	var nonce struct {
		Nonce string `json:"nonce"`
	}
	if err := c.do(ctx, http.MethodGet, path, nil, &nonce); err != nil {
		return "", "", fmt.Errorf("synapse: registering %q: getting nonce: %w", localpart, err)
	}
	adminWord := "notadmin"
	if admin {
		adminWord = "admin"
	}
	// The MAC covers nonce, user, password and admin flag, NUL-separated, keyed with
	// registration_shared_secret (HMAC-SHA1, as Synapse defines it).
	mac := hmac.New(sha1.New, []byte(c.sharedSecret))
	mac.Write([]byte(nonce.Nonce + "\x00" + localpart + "\x00" + password + "\x00" + adminWord))
	body := map[string]any{
		"nonce":    nonce.Nonce,
		"username": localpart,
		"password": password,
		"admin":    admin,
		"mac":      hex.EncodeToString(mac.Sum(nil)),
	}
	var out struct {
		UserID      id.UserID `json:"user_id"`
		AccessToken string    `json:"access_token"`
	}
	if err := c.do(ctx, http.MethodPost, path, body, &out); err != nil {
		return "", "", fmt.Errorf("synapse: registering %q: %w", localpart, err)
	}
	if out.UserID == "" || out.AccessToken == "" {
		return "", "", fmt.Errorf("synapse: registering %q: response without user_id or access_token", localpart)
	}
	return out.UserID, out.AccessToken, nil
}
