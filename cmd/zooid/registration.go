package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/zooid-dev/zooid/zooid/config"
	"github.com/zooid-dev/zooid/zooid/daemon"
)

// cmdRegistration prints the appservice registration YAML an operator installs
// on the homeserver (Synapse: app_service_config_files) for a zooid.yaml.
func cmdRegistration(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("zooid registration", flag.ContinueOnError)
	fs.SetOutput(stderr)
	path := fs.String("config", "zooid.yaml", "path to zooid.yaml")
	url := fs.String("url", "", "URL the homeserver pushes to (default: http:// + the matrix transport's listen address)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, err := config.Load(*path)
	if err != nil {
		fmt.Fprintf(stderr, "zooid registration: %v\n", err)
		return 1
	}
	if *url == "" {
		for _, t := range cfg.Transports {
			if t.Matrix == nil {
				continue
			}
			if t.Matrix.Listen == "" {
				// A registration with url "" tells the homeserver to push nowhere
				// useful; say what to do instead of printing one.
				fmt.Fprintf(stderr, "zooid registration: transports.%s has no listen address, so there is no URL for the homeserver to push to: set transports.%s.listen or pass --url\n", t.Name, t.Name)
				return 1
			}
			*url = "http://" + t.Matrix.Listen
		}
	}
	reg, err := daemon.Registration(cfg, *url)
	if err != nil {
		fmt.Fprintf(stderr, "zooid registration: %v\n", err)
		return 1
	}
	out, err := reg.YAML()
	if err != nil {
		fmt.Fprintf(stderr, "zooid registration: %v\n", err)
		return 1
	}
	fmt.Fprint(stdout, out)
	return 0
}
