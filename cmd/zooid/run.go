package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"syscall"

	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/daemon"
)

func cmdRun(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("zooid run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "zooid.yaml", "path to zooid.yaml")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	traceDir := fs.String("trace", "", "write the flight recorder's trace to this directory (overrides zooid.yaml's trace.dir)")
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
	if *traceDir != "" {
		if cfg.Trace == nil {
			cfg.Trace = &config.Trace{}
		}
		cfg.Trace.Dir = *traceDir
	}
	d, err := daemon.New(daemon.Options{Config: cfg, Logger: logger})
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
