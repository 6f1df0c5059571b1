package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/daemon"
	"github.com/zooid-dev/zooid/zooid/preflight"
)

func cmdRun(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("zooid run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "zooid.yaml", "path to zooid.yaml")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	traceDir := fs.String("trace", "", "write the flight recorder's trace to this directory (overrides zooid.yaml's trace.dir)")
	reg := fs.String("registration", "", "the appservice registration the homeserver holds, to compare with the config at start (default: "+preflight.DefaultRegistration+" beside zooid.yaml, if there is one)")
	var others []string
	fs.Func("other-registration", "another appservice's registration on the same homeserver (repeatable): the daemon refuses to start when its namespaces overlap this daemon's, as zooid check does", func(v string) error {
		others = append(others, v)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintf(stderr, "zooid run: --log-level: %v\n", err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))

	if err := hardenProcess(); err != nil {
		logger.Warn("could not hide the daemon's environment from agents", "err", err)
	}
	cfg, err := config.Load(*path)
	if err != nil {
		fmt.Fprintf(stderr, "zooid run: %v\n", err)
		return 1
	}
	if err := preflight.Overlaps(cfg, preflight.RegistrationFile(cfg, preflight.Options{Registration: *reg}), others); err != nil {
		fmt.Fprintf(stderr, "zooid run: %s: %v\n", cfg.File, err)
		return 1
	}
	// What zooid check warns of, logged once here: the daemon starts anyway, and the
	// first mention or the homeserver would otherwise be the first to say it.
	for _, f := range preflight.Check(cfg, preflight.Options{Registration: *reg}) {
		logger.Warn("start-up check: "+f.Msg, "config", cfg.File, "key", f.Path)
	}
	if *traceDir != "" {
		if cfg.Trace == nil {
			cfg.Trace = &config.Trace{}
		}
		cfg.Trace.Dir = *traceDir
	}
	push, err := activatedPushListener()
	if err != nil {
		fmt.Fprintf(stderr, "zooid run: %v\n", err)
		return 1
	}
	d, err := daemon.New(daemon.Options{Config: cfg, Logger: logger, PushListener: push})
	if err != nil {
		fmt.Fprintf(stderr, "zooid run: %v\n", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	logger.Info("zooid starting", "config", *path, "agents", len(cfg.Agents))
	if err := d.Run(ctx); err != nil {
		fmt.Fprintf(stderr, "zooid run: %v\n", err)
		return 1
	}
	logger.Info("zooid stopped")
	return 0
}

// activatedPushListener is the appservice push listener a supervisor handed
// down, systemd-style (LISTEN_FDS=1, the socket as descriptor 3, LISTEN_PID
// this process or unset): whoever wrote the homeserver's registration can
// bind the port first and keep it bound, so it is never free for something
// else to take before the daemon listens. Nil when none was handed down.
func activatedPushListener() (net.Listener, error) {
	n := os.Getenv("LISTEN_FDS")
	if n == "" {
		return nil, nil
	}
	if pid := os.Getenv("LISTEN_PID"); pid != "" && pid != strconv.Itoa(os.Getpid()) {
		return nil, nil // meant for another process
	}
	// Agents must not think the socket is theirs.
	for _, k := range []string{"LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES"} {
		_ = os.Unsetenv(k)
	}
	if n != "1" {
		return nil, fmt.Errorf("LISTEN_FDS=%s: zooid takes exactly one socket, the matrix transport's push listener", n)
	}
	f := os.NewFile(3, "LISTEN_FDS socket")
	defer f.Close()
	ln, err := net.FileListener(f)
	if err != nil {
		return nil, fmt.Errorf("LISTEN_FDS=1: descriptor 3 is not a listening socket: %w", err)
	}
	return ln, nil
}
