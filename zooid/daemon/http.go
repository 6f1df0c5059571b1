package daemon

import (
	"context"
	"fmt"

	acp "github.com/coder/acp-go-sdk"

	"github.com/zooid-dev/zooid/zooid/acpagent"
	"github.com/zooid-dev/zooid/zooid/httpapi"
)

// startHTTP serves every HTTP transport that has agents. HTTP sessions own no
// durable conversation, so their agents get no Zooid MCP server.
func (d *Daemon) startHTTP() error {
	for _, t := range d.opts.Config.Transports {
		if t.Type != "http" || t.HTTP == nil {
			continue
		}
		agents := map[string]httpapi.Agent{}
		for _, rt := range d.agents {
			a := rt.cfg
			if a.HTTP == nil || (a.HTTP.Transport != "" && a.HTTP.Transport != t.Name) {
				continue
			}
			dir, err := d.workDir(a)
			if err != nil {
				return err
			}
			rt.workDir = dir
			if sandboxed(a) {
				if rt.tmpDir, err = d.tmpDir(a); err != nil {
					return err
				}
			}
			command, args := d.agentCommand(a.ACP, false)
			spec, err := d.sandboxSpec(rt, acpagent.Spec{Command: command, Args: args, Env: agentEnvFor(d.secrets(), a, dir), Dir: dir, Credential: credential(a)})
			if err != nil {
				return err
			}
			agents[a.Name] = httpapi.Agent{Name: a.Name, Spec: spec}
		}
		if len(agents) == 0 {
			continue
		}
		srv, err := httpapi.Start(httpapi.Options{
			Listen:      t.HTTP.Listen,
			Token:       t.HTTP.Token,
			Agents:      agents,
			TurnTimeout: d.opts.TurnTimeout,
			Logger:      d.log.With("component", "http", "transport", t.Name),
			Acquire:     d.httpPlace,
		})
		if err != nil {
			return fmt.Errorf("starting http transport %s: %w", t.Name, err)
		}
		d.http = append(d.http, srv)
	}
	return nil
}

// httpPlace holds a place in the process pool for one HTTP session: its
// process counts against the caps for its whole life, like a busy thread's,
// and may take the place of another agent's idle process at the daemon's cap.
func (d *Daemon) httpPlace(ctx context.Context, agent string) (func(), error) {
	g, err := d.pool.acquire(ctx, agent, d.sessions.arrive(), 0, nil)
	if err != nil {
		return nil, err
	}
	if g.victim != nil {
		d.log.Info("stopping the least recently used idle agent process to make room", "agent", g.victim.agent, "for", agent)
		d.closeProc(g.victim)
	}
	d.pool.started(g.p, nil, acp.AgentCapabilities{})
	return func() {
		d.pool.done(g.p)
		if d.pool.detach(g.p, "") {
			d.pool.gone(g.p)
		}
	}, nil
}

// HTTPURLs lists the base URLs of the HTTP transports the daemon serves.
func (d *Daemon) HTTPURLs() []string {
	var out []string
	for _, h := range d.http {
		out = append(out, h.URL())
	}
	return out
}
