package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/zooid-dev/zooid/modeldouble"
)

func cmdModelDouble(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	return runModelDouble(ctx, args, stdout, stderr)
}

// runModelDouble serves scripted model APIs until ctx ends. Once it listens
// it prints, for each scripted agent, its base URL of each API as
// "AGENT API URL" lines on stdout, so a script can read them; every request
// is logged (at debug, what the double answered).
func runModelDouble(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("zooid modeldouble", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8090", "listen address (loopback)")
	level := fs.String("log-level", "debug", "log level: debug (every request), info, warn, error")
	scripts := map[string]string{}
	var order []string
	fs.Func("script", "AGENT=FILE: the agent's model script, one JSON step a line: "+
		`{"call": "zooid_get_room_info", "args": {}}, {"say": "text with {result} and {prompt}"}, `+
		`{"fault": {"kind": "status", "status": 429, "retry_after": 1}}, {"fault": {"kind": "cut"}} (repeatable)`, func(v string) error {
		agent, file, ok := strings.Cut(v, "=")
		if !ok || agent == "" || file == "" {
			return fmt.Errorf("want AGENT=FILE, got %q", v)
		}
		if _, dup := scripts[agent]; dup {
			return fmt.Errorf("agent %s has two scripts", agent)
		}
		scripts[agent] = file
		order = append(order, agent)
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "zooid modeldouble: unexpected arguments: %v\n", fs.Args())
		return 2
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*level)); err != nil {
		fmt.Fprintf(stderr, "zooid modeldouble: --log-level: %v\n", err)
		return 2
	}
	steps := map[string][]modeldouble.Step{}
	for _, agent := range order {
		st, err := readScript(scripts[agent])
		if err != nil {
			fmt.Fprintf(stderr, "zooid modeldouble: %v\n", err)
			return 2
		}
		steps[agent] = st
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
	srv, err := modeldouble.Start(modeldouble.WithAddr(*addr), modeldouble.WithLogger(logger))
	if err != nil {
		fmt.Fprintf(stderr, "zooid modeldouble: %v\n", err)
		return 1
	}
	for _, agent := range order {
		srv.Script(agent).Add(steps[agent]...)
		for _, api := range []modeldouble.API{modeldouble.Anthropic, modeldouble.OpenAI, modeldouble.Gemini} {
			fmt.Fprintf(stdout, "%s %s %s\n", agent, api, srv.BaseURL(agent, api))
		}
	}
	logger.Info("modeldouble listening", "url", srv.URL(), "agents", len(order))
	<-ctx.Done()
	code := 0
	for _, agent := range order {
		sc := srv.Script(agent)
		taken, total := sc.Taken()
		logger.Info("script", "agent", agent, "steps_taken", taken, "steps", total, "misses", len(sc.Misses()))
		for _, m := range sc.Misses() {
			fmt.Fprintf(stderr, "zooid modeldouble: %s\n", m)
			code = 1
		}
	}
	if err := srv.Close(); err != nil {
		fmt.Fprintf(stderr, "zooid modeldouble: %v\n", err)
		return 1
	}
	return code
}

// readScript reads a script file: one JSON step a line, blank lines and
// lines starting with # left out; a bad line is refused with its number.
func readScript(path string) ([]modeldouble.Step, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading the script: %w", err)
	}
	defer f.Close()
	var out []modeldouble.Step
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 4<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		var st modeldouble.Step
		if err := dec.Decode(&st); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		if err := st.Validate(); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		out = append(out, st)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	return out, nil
}
