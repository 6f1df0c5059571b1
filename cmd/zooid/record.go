package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"maunium.net/go/mautrix"
	"maunium.net/go/mautrix/id"

	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/e2ee"
	"github.com/zooid-dev/zooid/zooid/recording"
)

// recordTokenEnv is where `zooid record` takes its access token from when no
// --token-file is given; a token on the command line would show in ps and
// the shell's history.
const recordTokenEnv = "ZOOID_RECORD_TOKEN"

func cmdRecord(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return runRecord(ctx, args, os.LookupEnv, stdout, stderr)
}

// runRecord writes a recording of a room's latest events to stdout; what it
// had to leave out is said on stderr.
func runRecord(ctx context.Context, args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("zooid record", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o recording.RecordOptions
	var tokenFile, asUser, configPath, oldToken string
	fs.StringVar(&o.Homeserver, "homeserver", "", "homeserver base URL, e.g. http://127.0.0.1:8008")
	fs.StringVar(&tokenFile, "token-file", "", "file holding the access token (default: $"+recordTokenEnv+")")
	fs.StringVar(&oldToken, "token", "", "no longer accepted: use $"+recordTokenEnv+" or --token-file")
	fs.StringVar(&asUser, "as-user", "", "read as this appservice user (@bot:server) with the appservice's as_token")
	fs.StringVar(&o.Room, "room", "", "room alias (#ops:server) or id (!abc:server)")
	fs.IntVar(&o.Limit, "limit", 500, "record at most this many of the newest events")
	fs.StringVar(&configPath, "config", "", "zooid.yaml whose Matrix agents mark members as agents, with their rooms and trigger")
	var strip, agents stringList
	fs.Var(&strip, "strip-prefix", "prefix to cut from localparts to get names, e.g. zs- (repeatable)")
	fs.Var(&agents, "agent", "a member (@user:server) that is an agent bound to this room with trigger mention (repeatable)")
	fs.BoolVar(&o.Anonymize, "anonymize", false, "people become stable pseudonyms, text same-shape text; mentions, threads and msgtypes stay exact")
	var decrypt bool
	fs.BoolVar(&decrypt, "decrypt", false, "decrypt an encrypted room's events with the --as-user agent's device, from the --config daemon's state_dir (encryption: true); each is marked \"decrypted\"")
	fs.StringVar(&o.TraceFile, "trace", "", "the daemon's trace directory (zooid run --trace DIR; the recorded room's files are taken) or one trace file, carried in the recording")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: ZOOID_RECORD_TOKEN=... zooid record --homeserver URL --room '#alias:server' [--as-user @bot:server] [--config zooid.yaml] [--anonymize] [--limit N] > scenarios/name.json")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if oldToken != "" {
		fmt.Fprintf(stderr, "zooid record: --token is no longer accepted (a token on the command line shows in ps and shell history); put it in $%s or a file given with --token-file\n", recordTokenEnv)
		return 2
	}
	o.Strip = strip
	var missing []string
	for _, f := range []struct{ name, v string }{{"--homeserver", o.Homeserver}, {"--room", o.Room}} {
		if f.v == "" {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 || fs.NArg() > 0 || o.Limit < 1 {
		fmt.Fprintf(stderr, "zooid record: need %s and a --limit of at least 1\n", strings.Join(missing, ", "))
		fs.Usage()
		return 2
	}
	tok, err := recordToken(tokenFile, lookupEnv)
	if err != nil {
		fmt.Fprintf(stderr, "zooid record: %v\n", err)
		return 2
	}
	o.Token = tok
	if asUser != "" {
		if _, _, err := id.UserID(asUser).Parse(); err != nil {
			fmt.Fprintf(stderr, "zooid record: --as-user %q is not a user id like @bot:server: %v\n", asUser, err)
			return 2
		}
		o.AsUser = id.UserID(asUser)
	}
	o.Agents = map[id.UserID]recording.Agent{}
	if decrypt && (configPath == "" || o.AsUser == "") {
		fmt.Fprintln(stderr, "zooid record: --decrypt needs --config (the daemon whose state_dir holds the devices) and --as-user (the agent whose device reads)")
		return 2
	}
	if configPath != "" {
		cfg, err := config.Load(configPath)
		if err != nil {
			fmt.Fprintf(stderr, "zooid record: %v\n", err)
			return 1
		}
		if decrypt {
			reader, err := openRecordDevice(ctx, cfg, o)
			if err != nil {
				fmt.Fprintf(stderr, "zooid record: --decrypt: %v\n", err)
				return 1
			}
			defer func() { _ = reader.Close() }()
			o.Decrypt = reader.Decrypt
		}
		for _, a := range cfg.Agents {
			if a.Matrix != nil {
				rooms := make([]string, len(a.Matrix.Rooms))
				for i, r := range a.Matrix.Rooms {
					rooms[i] = string(r)
				}
				o.Agents[a.Matrix.UserID] = recording.Agent{Rooms: rooms, Trigger: a.Matrix.Trigger}
			}
		}
	}
	for _, a := range agents {
		if _, _, err := id.UserID(a).Parse(); err != nil {
			fmt.Fprintf(stderr, "zooid record: --agent %q is not a user id like @agent-a:server\n", a)
			return 2
		}
		if _, ok := o.Agents[id.UserID(a)]; !ok {
			o.Agents[id.UserID(a)] = recording.Agent{Trigger: config.TriggerMention}
		}
	}
	rec, notes, err := recording.Record(ctx, o)
	if err != nil {
		fmt.Fprintf(stderr, "zooid record: %v\n", err)
		return 1
	}
	for _, n := range notes {
		fmt.Fprintf(stderr, "zooid record: %s\n", n)
	}
	if err := rec.Write(stdout); err != nil {
		fmt.Fprintf(stderr, "zooid record: %v\n", err)
		return 1
	}
	fmt.Fprintf(stderr, "zooid record: %d events, %d members (%d agents)\n", len(rec.Events), len(rec.Members), len(rec.Agents))
	return 0
}

// openRecordDevice opens the --as-user agent's device from cfg's state dir,
// read-only in effect: it decrypts with the keys the daemon stored.
func openRecordDevice(ctx context.Context, cfg *config.Config, o recording.RecordOptions) (*e2ee.Reader, error) {
	if !cfg.Encryption {
		return nil, fmt.Errorf("%s does not set encryption: true, so its agents have no devices", cfg.File)
	}
	agent := false
	for _, a := range cfg.Agents {
		agent = agent || (a.Matrix != nil && a.Matrix.UserID == o.AsUser)
	}
	if !agent {
		return nil, fmt.Errorf("%s is not a Matrix agent of %s", o.AsUser, cfg.File)
	}
	cli, err := mautrix.NewClient(o.Homeserver, o.AsUser, o.Token)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", o.Homeserver, err)
	}
	cli.SetAppServiceUserID = true
	return e2ee.OpenReader(ctx, filepath.Join(cfg.StateDir, "e2ee"), o.AsUser, cli, nil)
}

// recordToken reads the access token from --token-file, else the environment.
func recordToken(file string, lookupEnv func(string) (string, bool)) (string, error) {
	if file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("reading the token: %w", err)
		}
		tok := strings.TrimSpace(string(b))
		if tok == "" {
			return "", fmt.Errorf("the token file %s is empty", file)
		}
		return tok, nil
	}
	if tok, ok := lookupEnv(recordTokenEnv); ok && strings.TrimSpace(tok) != "" {
		return strings.TrimSpace(tok), nil
	}
	return "", fmt.Errorf("no access token: set $%s or give --token-file (the appservice's as_token with --as-user)", recordTokenEnv)
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }
