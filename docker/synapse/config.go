package synapse

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"fmt"

	"github.com/zooid-dev/zooid/internal/randid"

	"go.yaml.in/yaml/v3"
	"maunium.net/go/mautrix/appservice"
)

// Paths inside the container. /data is where both the Debian-built image and
// matrixdotorg/synapse keep Synapse's state, so one layout serves both.
const (
	dataDir         = "/data"
	configPath      = dataDir + "/homeserver.yaml"
	logConfigPath   = dataDir + "/log.config"
	signingKeyPath  = dataDir + "/signing.key"
	startScriptPath = dataDir + "/zooid-start.py"
	appserviceDir   = dataDir + "/appservices"
	tlsCertPath     = dataDir + "/federation.crt"
	tlsKeyPath      = dataDir + "/federation.key"
	caCertPath      = dataDir + "/test-ca.crt"
)

// generated is everything Run writes into the container before Synapse starts.
type generated struct {
	homeserver   []byte
	logConfig    []byte
	signingKey   []byte
	appservices  map[string][]byte // container path → registration YAML
	tls          map[string][]byte // container path → federation certificate, key, CA
	sharedSecret string
}

// signingKey writes a key in Synapse's own file format ("ed25519 <key id> <unpadded
// base64 seed>"), so Synapse needs no separate --generate-keys run before it starts.
func signingKey() ([]byte, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating signing key: %w", err)
	}
	keyID := randid.Hex(3)
	seed := base64.RawStdEncoding.EncodeToString(priv.Seed())
	return []byte(fmt.Sprintf("ed25519 a_%s %s\n", keyID, seed)), nil
}

// unlimited is a rate limit no test reaches; Synapse's defaults throttle a test that
// registers users, joins rooms or sends messages in quick succession.
var unlimited = map[string]any{"per_second": 100000, "burst_count": 1000000}

// rateLimits raises every rc_* limit Synapse knows. Keys an older Synapse does not know
// are ignored by it.
func rateLimits() map[string]any {
	return map[string]any{
		"rc_message":                     unlimited,
		"rc_registration":                unlimited,
		"rc_registration_token_validity": unlimited,
		"rc_login": map[string]any{
			"address":         unlimited,
			"account":         unlimited,
			"failed_attempts": unlimited,
		},
		"rc_admin_redaction": unlimited,
		"rc_joins": map[string]any{
			"local":  unlimited,
			"remote": unlimited,
		},
		"rc_joins_per_room":     unlimited,
		"rc_3pid_validation":    unlimited,
		"rc_third_party_invite": unlimited,
		"rc_invites": map[string]any{
			"per_room":   unlimited,
			"per_user":   unlimited,
			"per_issuer": unlimited,
		},
		"rc_media_create":       unlimited,
		"rc_presence":           map[string]any{"per_user": unlimited},
		"rc_delayed_event_mgmt": unlimited,
		"rc_reports":            unlimited,
		"rc_room_creation":      unlimited,
		"rc_send_to_device":     unlimited,
		"rc_key_requests":       unlimited,
		"rc_user_directory":     unlimited,
		"rc_set_displayname":    unlimited,
		"rc_set_avatar_url":     unlimited,
		"rc_federation": map[string]any{
			"window_size":  1000,
			"sleep_limit":  100000,
			"sleep_delay":  1,
			"reject_limit": 100000,
			"concurrent":   100000,
		},
	}
}

// experimentalFeatures turns on the homeserver's half of what an appservice
// needs to give each of its users a device of its own and to run that
// device's encryption without a /sync per user (issue 37). A registration
// still opts in to each with its own flag, so an appservice that does not
// (the daemon's, today) gets transactions exactly as before:
//
//   - msc2409_to_device_messages_enabled: to-device messages for the
//     appservice's users' devices go into its transactions, as
//     "de.sorunome.msc2409.to_device", each with "to_user_id" and
//     "to_device_id" (registration: receive_ephemeral).
//   - msc3202_transaction_extensions: transactions carry the one-time key
//     counts and unused fallback key types of its users' devices and the
//     device list changes of users sharing a room with them
//     ("org.matrix.msc3202.device_one_time_keys_count",
//     "org.matrix.msc3202.device_unused_fallback_key_types",
//     "org.matrix.msc3202.device_lists"; registration: org.matrix.msc3202).
//
// MSC4190 (the appservice creates and deletes its users' devices with
// PUT and DELETE /devices/{deviceId}) has no homeserver switch in Synapse,
// only the registration's io.element.msc4190.
func experimentalFeatures() map[string]any {
	return map[string]any{
		"msc2409_to_device_messages_enabled": true,
		"msc3202_transaction_extensions":     true,
	}
}

// logConfig sends Synapse's log to the container's stdout at WARNING, so a failed start
// shows up in the container log without INFO noise on every request.
const logConfig = `version: 1
formatters:
  plain:
    format: '%(asctime)s %(levelname)s %(name)s: %(message)s'
handlers:
  console:
    class: logging.StreamHandler
    formatter: plain
    stream: ext://sys.stdout
root:
  level: WARNING
  handlers: [console]
disable_existing_loggers: false
`

// generate builds the homeserver config, the signing key and the appservice
// registration files for s.
func generate(s *settings) (*generated, error) {
	g := &generated{appservices: map[string][]byte{}, logConfig: []byte(logConfig)}
	var err error
	if g.signingKey, err = signingKey(); err != nil {
		return nil, err
	}
	g.sharedSecret = randid.Hex(32)
	macaroon, form := randid.Hex(32), randid.Hex(32)

	var asFiles []string
	for i, reg := range s.appservices {
		data, err := registrationYAML(reg)
		if err != nil {
			return nil, fmt.Errorf("appservice %d (%q): %w", i, reg.ID, err)
		}
		path := fmt.Sprintf("%s/%d.yaml", appserviceDir, i)
		g.appservices[path] = data
		asFiles = append(asFiles, path)
	}

	cfg := map[string]any{
		"server_name":    s.serverName,
		"pid_file":       dataDir + "/homeserver.pid",
		"public_baseurl": fmt.Sprintf("http://127.0.0.1:%d/", s.port),
		// Host networking: the listener is on the host's loopback and nowhere else.
		"listeners": []any{map[string]any{
			"port":           s.port,
			"bind_addresses": []string{"127.0.0.1"},
			"type":           "http",
			"tls":            false,
			"x_forwarded":    false,
			"resources": []any{map[string]any{
				"names":    []string{"client"},
				"compress": false,
			}},
		}},
		"database": map[string]any{
			"name": "sqlite3",
			"args": map[string]any{"database": dataDir + "/homeserver.db"},
		},
		"log_config":       logConfigPath,
		"media_store_path": dataDir + "/media_store",
		"signing_key_path": signingKeyPath,
		// No federation: never ask matrix.org (or anyone) for keys.
		"trusted_key_servers":                      []any{},
		"suppress_key_server_warning":              true,
		"report_stats":                             false,
		"enable_metrics":                           false,
		"url_preview_enabled":                      false,
		"enable_registration":                      true,
		"enable_registration_without_verification": true,
		"registration_shared_secret":               g.sharedSecret,
		"macaroon_secret_key":                      macaroon,
		"form_secret":                              form,
		"app_service_config_files":                 asFiles,
		// Presence is CPU Synapse spends on every request of a user (zooid
		// never reads it); tests share two cores with it.
		"presence": map[string]any{"enabled": false},
		// Every registration hashes a password; at the default 12 rounds that
		// took over 30 s on a loaded 2-core machine and failed scenarios.
		// Test passwords need no strength (4 is bcrypt's minimum).
		"bcrypt_rounds": 4,
		// Caches large enough for every event of the seeded-room snapshot (18
		// rooms of 2000 messages) and what a run adds: history walks read the
		// same 500-event chunks again and again. Side by side, mcp_paging on
		// Synapse took 25% less of Synapse's CPU and 12-18% less time with them
		// (docs/performance.md); a test Synapse holds a few hundred MB more.
		"event_cache_size": "100K",
		"caches":           map[string]any{"global_factor": 5.0},
		// Work Synapse does after every event for features zooid and its
		// tests never use: queueing it for other servers (a test Synapse has
		// none), the user directory (user search) and room statistics (the
		// room directory; zooid's rooms are not listed). Synapse's one process
		// bounds the feature pass once its children are light: with these off
		// it took 86 s of CPU and 106 s against 100 s and 124 s with them
		// (docs/performance.md).
		"federation_sender_instances": []any{},
		"update_user_directory":       false,
		"stats":                       map[string]any{"enabled": false},
		"experimental_features":       experimentalFeatures(),
	}
	for k, v := range rateLimits() {
		cfg[k] = v
	}
	if s.federation != nil {
		if err := federate(s, g, cfg); err != nil {
			return nil, err
		}
	}
	if g.homeserver, err = yaml.Marshal(cfg); err != nil {
		return nil, fmt.Errorf("encoding homeserver.yaml: %w", err)
	}
	return g, nil
}

// registrationYAML checks reg for what Synapse refuses to load and encodes it. The
// caller's registration is not modified.
func registrationYAML(reg *appservice.Registration) ([]byte, error) {
	if reg == nil {
		return nil, fmt.Errorf("registration is nil")
	}
	switch {
	case reg.ID == "":
		return nil, fmt.Errorf("registration has no id")
	case reg.AppToken == "":
		return nil, fmt.Errorf("registration has no as_token")
	case reg.ServerToken == "":
		return nil, fmt.Errorf("registration has no hs_token")
	case reg.SenderLocalpart == "":
		return nil, fmt.Errorf("registration has no sender_localpart")
	}
	c := *reg
	if c.RateLimited == nil {
		// Synapse rate-limits an appservice unless the registration says otherwise,
		// and a bridge sends many messages for many users.
		no := false
		c.RateLimited = &no
	}
	out, err := c.YAML()
	if err != nil {
		return nil, fmt.Errorf("encoding registration: %w", err)
	}
	return []byte(out), nil
}

// startScript runs Synapse's homeserver module with SQLite told not to fsync each
// commit (PRAGMA synchronous = OFF). A test Synapse's data goes with its container,
// and a snapshot is committed only after Synapse has stopped and closed the
// database, so nothing a test reads depends on the fsyncs; they cost a commit
// milliseconds, and on a busy disk far more (issue 15: a feature subset took 152 s
// with them and 84 s without, side by side). Synapse has no setting for it, so the
// script wraps the engine's per-connection setup, and prints what the connection
// reports, for the log and TestRunSweepsContainersOfEndedProcesses.
//
// It also gives SQLite's query planner statistics of the tables it finds
// (PRAGMA optimize, which runs ANALYZE where they are missing or stale). Without
// them SQLite 3.53 plans the edits lookup of every /messages page (Synapse's
// bundled aggregations) as a scan of the room's events per event of the page:
// 1.1 s a 200-event page in the snapshot's 2,000-message rooms, against 1.6 ms
// with them, and 89% of Synapse's database time in mcp_paging
// (docs/performance.md). A snapshot's database gets them when Synapse opens it,
// in about 0.2 s (TestSnapshotStartsWithPlannerStatistics).
const startScript = `import runpy, sys
from synapse.storage.engines.sqlite import Sqlite3Engine

_setup = Sqlite3Engine.on_new_connection

def _on_new_connection(self, db_conn):
    _setup(self, db_conn)
    db_conn.execute("PRAGMA synchronous = OFF;")
    db_conn.execute("PRAGMA optimize = 0x10002;")
    db_conn.commit()
    level = db_conn.execute("PRAGMA synchronous;").fetchone()[0]
    stats = 0
    if db_conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_stat1'").fetchone():
        stats = db_conn.execute("SELECT count(DISTINCT tbl) FROM sqlite_stat1").fetchone()[0]
    print("zooid-start: sqlite synchronous=%d, planner statistics for %d tables" % (level, stats), file=sys.stderr, flush=True)

Sqlite3Engine.on_new_connection = _on_new_connection
runpy.run_module("synapse.app.homeserver", run_name="__main__", alter_sys=True)
`

// federate turns on federation in cfg: a TLS listener for the federation API on
// 127.0.0.1 with a certificate of the harness's CA, that CA as the only one
// trusted for other servers, and loopback allowed as a destination (Synapse
// refuses to federate with private addresses unless told otherwise). The other
// servers are found by their server names, localhost:PORT, so no resolver,
// SRV record or .well-known file is involved.
func federate(s *settings, g *generated, cfg map[string]any) error {
	f := s.federation
	cert, key, err := f.ca.Issue("localhost")
	if err != nil {
		return fmt.Errorf("federation certificate: %w", err)
	}
	g.tls = map[string][]byte{tlsCertPath: cert, tlsKeyPath: key, caCertPath: f.ca.CertPEM()}
	cfg["listeners"] = append(cfg["listeners"].([]any), map[string]any{
		"port":           f.port,
		"bind_addresses": []string{"127.0.0.1"},
		"type":           "http",
		"tls":            true,
		"x_forwarded":    false,
		"resources": []any{map[string]any{
			"names":    []string{"federation"},
			"compress": false,
		}},
	})
	cfg["tls_certificate_path"] = tlsCertPath
	cfg["tls_private_key_path"] = tlsKeyPath
	cfg["federation_custom_ca_list"] = []string{caCertPath}
	cfg["federation_verify_certificates"] = true
	cfg["ip_range_whitelist"] = []string{"127.0.0.1"}
	// The single server's setting that stops queueing events for other
	// servers would stop federation itself.
	delete(cfg, "federation_sender_instances")
	return nil
}
