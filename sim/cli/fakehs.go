package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"syscall"

	"maunium.net/go/mautrix/appservice"

	"github.com/zooid-dev/zooid/fakehs"
)

// cmdFakehs serves the fake homeserver until SIGINT or SIGTERM.
func cmdFakehs(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return runFakehs(ctx, args, stdout, stderr)
}

// runFakehs serves until ctx ends; it prints the base URL on stdout as one
// line once the server listens, so a script can read it.
func runFakehs(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("zooid fakehs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8008", "listen address")
	serverName := fs.String("server-name", "localhost", "server name in user, room and alias ids")
	level := fs.String("log-level", "info", "log level: debug, info, warn, error")
	profileName := fs.String("profile", "synapse", "behaviour: synapse, or degraded (no /threads, no bundled aggregations, no relation filters, filters after the limit, history for non-members, new events visible 200 ms after the send)")
	var regs []string
	fs.Func("appservice", "appservice registration YAML file (repeatable)", func(v string) error {
		regs = append(regs, v)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "zooid fakehs: unexpected arguments: %v\n", fs.Args())
		return 2
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintf(stderr, "zooid fakehs: --log-level: %v\n", err)
		return 2
	}
	profile, err := fakehs.ProfileByName(*profileName)
	if err != nil {
		fmt.Fprintf(stderr, "zooid fakehs: --profile: %v\n", err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
	opts := []fakehs.Option{fakehs.WithAddr(*addr), fakehs.WithServerName(*serverName), fakehs.WithLogger(logger), fakehs.WithProfile(profile)}
	for _, path := range regs {
		reg, err := appservice.LoadRegistration(path)
		if err != nil {
			fmt.Fprintf(stderr, "zooid fakehs: loading appservice registration %s: %v\n", path, err)
			return 1
		}
		opts = append(opts, fakehs.WithAppservice(reg))
	}
	srv, err := fakehs.Start(opts...)
	if err != nil {
		fmt.Fprintf(stderr, "zooid fakehs: %v\n", err)
		return 1
	}
	fmt.Fprintln(stdout, srv.URL())
	logger.Info("fakehs listening", "url", srv.URL(), "server_name", srv.ServerName(), "profile", *profileName, "appservices", len(regs))
	<-ctx.Done()
	if err := srv.Close(); err != nil {
		fmt.Fprintf(stderr, "zooid fakehs: %v\n", err)
		return 1
	}
	logger.Info("fakehs stopped")
	return 0
}
