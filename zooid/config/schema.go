package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
	"maunium.net/go/mautrix/id"
)

// This file is zooid.yaml's schema: which keys exist, their defaults, and
// every rule a config must pass. It is the one place that says yes or no:
// `zooid check` and `zooid run` both call Load, and nothing downstream
// validates the config again.

// maxRunDir keeps socket paths under the 108-byte sun_path limit with room
// for a per-agent directory and socket name.
const maxRunDir = 60

func (p *parser) parse(data []byte) *Config {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		p.errAtYAML(err)
		return nil
	}
	if len(doc.Content) == 0 {
		p.errorAt(0, "", "the file is empty")
		return nil
	}
	root := doc.Content[0]
	top := p.fields(root, "", "transports", "agents", "state_dir", "run_dir", "turn_timeout", "idle_timeout", "trace", "user", "runtime", "container", "max_processes", "prewarm", "queue_notice_after", "tool_timeout", "post_timeout", "task_timeout", "rooms", "sandbox", "workstation", "encryption", "room_key_wait")
	cfg := &Config{File: p.file}
	cfg.Workstation = p.workstation(top["workstation"])

	if f, ok := top["transports"]; ok {
		for _, e := range p.entries(f.val, "transports") {
			// Kept even when invalid, so agents referring to it don't
			// pile up follow-on errors.
			if t, ok := p.transport(e); ok || t.Type != "" {
				cfg.Transports = append(cfg.Transports, t)
			}
		}
	}
	if len(cfg.Transports) == 0 && !p.hasErrorUnder("transports") {
		p.errorf(keyOr(top, "transports", root), "transports", "at least one transport is required")
	}
	topUser, topUserLine := p.user(top["user"], "user")
	cfg.User = topUser
	// The workforce defaults come before the agents, which start from them,
	// and after the transports, whose tokens they must not carry.
	p.runtime = p.runtimeOf(top["runtime"], "runtime", RuntimeLocal)
	p.containerDefault = p.container(top["container"], "container", nil)
	p.sandboxDefault = p.sandboxOf(top["sandbox"], "sandbox", nil)
	cfg.Prewarm = p.flag(top["prewarm"], "prewarm", false)
	if f, ok := top["agents"]; ok {
		userIDs := map[id.UserID]string{}
		for _, e := range p.entries(f.val, "agents") {
			if a, ok := p.agent(e, cfg, userIDs); ok {
				if a.User == nil && topUser != nil {
					a.User = topUser
					p.userLines[a.Name] = topUserLine
				}
				cfg.Agents = append(cfg.Agents, a)
			}
		}
	}
	if len(cfg.Agents) == 0 && !p.hasErrorUnder("agents") {
		p.errorf(keyOr(top, "agents", root), "agents", "at least one agent is required")
	}
	fillServerNames(cfg)
	p.rooms(top, cfg)
	p.encryption(top, cfg)

	cfg.StateDir = filepath.Join(p.base, ".zooid")
	if v, ok := p.str(top["state_dir"], "state_dir"); ok && v != "" {
		cfg.StateDir = p.abs(v)
	}
	cfg.TurnTimeout = p.duration(top, "turn_timeout")
	cfg.IdleTimeout = p.duration(top, "idle_timeout")
	cfg.Trace = p.trace(top)
	p.limits(top, cfg)
	p.timeouts(top, cfg)
	for _, sf := range p.secretFiles {
		cfg.SecretFiles = append(cfg.SecretFiles, sf.path)
	}
	cfg.RunDir = p.defaultRunDir()
	if v, ok := p.str(top["run_dir"], "run_dir"); ok && v != "" {
		cfg.RunDir = p.abs(v)
		p.runDirLine = top["run_dir"].val.Line
		if len(cfg.RunDir) > maxRunDir {
			p.errorf(top["run_dir"].val, "run_dir", "%s is %d bytes long; unix socket paths need it to be at most %d", cfg.RunDir, len(cfg.RunDir), maxRunDir)
		}
	}
	return cfg
}

// workstation reads the optional top-level workstation name.
func (p *parser) workstation(f field) string {
	v, ok := p.str(f, "workstation")
	if !ok {
		return ""
	}
	if !ValidName(v) {
		p.errorf(f.val, "workstation", "must match %s, got %q", NamePattern, v)
		return ""
	}
	return v
}

// duration reads an optional top-level duration of at least a second.
func (p *parser) duration(top map[string]field, key string) time.Duration {
	v, ok := p.str(top[key], key)
	if !ok || v == "" {
		return 0
	}
	d, err := time.ParseDuration(v)
	switch {
	case err != nil:
		p.errorf(top[key].val, key, "must be a duration such as 30m or 90s, got %q", v)
	case d < time.Second:
		p.errorf(top[key].val, key, "must be at least 1s, got %s", d)
	default:
		return d
	}
	return 0
}

// defaultRunDir is $XDG_RUNTIME_DIR/zooid: a per-user directory the system
// made for exactly this. Without it the answer is "" and the daemon makes a
// fresh private directory of its own at start (see mcpserver.PrepareRunDir):
// a fixed name in a shared temp dir is one another user can plant first.
func (p *parser) defaultRunDir() string {
	if d, ok := p.lookup("XDG_RUNTIME_DIR"); ok && filepath.IsAbs(d) && len(d) <= maxRunDir-6 {
		return filepath.Join(d, "zooid")
	}
	return ""
}

// fillServerNames gives a matrix transport without server_name the server of
// its agents' user ids (the parser made sure they agree).
func fillServerNames(cfg *Config) {
	for i := range cfg.Transports {
		t := &cfg.Transports[i]
		if t.Matrix == nil || t.Matrix.ServerName != "" {
			continue
		}
		for _, a := range cfg.Agents {
			if a.Matrix != nil && a.Matrix.Transport == t.Name {
				t.Matrix.ServerName = a.Matrix.UserID.Homeserver()
				break
			}
		}
	}
}

var matrixKeys = []string{"type", "homeserver", "server_name", "as_token", "as_token_file", "hs_token", "hs_token_file", "listen", "id", "sender_localpart"}
var httpKeys = []string{"type", "port", "listen", "token", "token_file"}

func (p *parser) transport(e field) (Transport, bool) {
	name := e.key.Value
	path := "transports." + name
	t := Transport{Name: name}
	if !ValidName(name) {
		p.errorf(e.key, path, "transport name must match %s", NamePattern)
	}
	typ := ""
	if f, ok := peek(e.val, "type"); ok {
		typ, _ = p.str(f, path+".type")
		if typ != TypeMatrix && typ != TypeHTTP {
			p.errorf(f.val, path+".type", "must be %q or %q, got %q", TypeMatrix, TypeHTTP, typ)
			return t, false
		}
	} else if name == TypeMatrix || name == TypeHTTP {
		typ = name
	} else {
		p.errorf(e.key, path, "type is required (%q or %q) unless the transport is named after its type", TypeMatrix, TypeHTTP)
		return t, false
	}
	t.Type = typ
	before := len(p.errs)
	if typ == TypeMatrix {
		// One daemon serves one homeserver: serving only one of two
		// would leave the other's agents deaf.
		if p.matrixAt != 0 {
			p.errorf(e.key, path, "a daemon serves one matrix transport and the first is at line %d: run one daemon per homeserver", p.matrixAt)
		} else {
			p.matrixAt = e.key.Line
		}
	}
	switch typ {
	case TypeMatrix:
		t.Matrix = p.matrixTransport(e, path)
	case TypeHTTP:
		t.HTTP = p.httpTransport(e, path)
	}
	return t, len(p.errs) == before
}

func (p *parser) required(f map[string]field, at *yaml.Node, path, key string) (string, *yaml.Node) {
	v, ok := p.str(f[key], join(path, key))
	if !ok || v == "" {
		if fk, present := f[key]; present {
			if ok || isNull(deref(fk.val)) {
				p.errorf(fk.key, join(path, key), "must not be empty")
			}
		} else {
			p.errorf(at, join(path, key), "is required")
		}
		return "", nil
	}
	return v, f[key].val
}

func (p *parser) matrixTransport(e field, path string) *MatrixTransport {
	f := p.fields(e.val, path, matrixKeys...)
	m := &MatrixTransport{ID: "zooid", SenderLocalpart: "zooid"}
	if hs, n := p.required(f, e.key, path, "homeserver"); n != nil {
		u, err := url.Parse(hs)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			p.errorf(n, path+".homeserver", "must be an http(s) URL, got %q", hs)
		} else {
			m.Homeserver = strings.TrimRight(hs, "/")
		}
	}
	if v, ok := p.str(f["server_name"], path+".server_name"); ok && v != "" {
		if strings.ContainsAny(v, "/@:# ") && !validServerName(v) {
			p.errorf(f["server_name"].val, path+".server_name", "must be a server name like example.org, got %q", v)
		} else {
			m.ServerName = v
		}
	}
	m.ASToken = p.secretValue(f, e.key, path, "as_token", true)
	m.HSToken = p.secretValue(f, e.key, path, "hs_token", true)
	m.HSTokenFrom = p.secretSource(f, "hs_token")
	if m.ASToken != "" && m.ASToken == m.HSToken {
		p.errorf(keyOr(f, "hs_token", keyOr(f, "hs_token_file", e.key)), path+".hs_token", "must differ from as_token")
	}
	if v, ok := p.str(f["listen"], path+".listen"); ok && v != "" {
		if err := checkHostPort(v); err != nil {
			p.errorf(f["listen"].val, path+".listen", "%v", err)
		}
		m.Listen = v
	}
	if v, ok := p.str(f["id"], path+".id"); ok && v != "" {
		m.ID = v
	}
	if v, ok := p.str(f["sender_localpart"], path+".sender_localpart"); ok && v != "" {
		if err := id.ValidateUserLocalpart(v); err != nil {
			p.errorf(f["sender_localpart"].val, path+".sender_localpart", "%v", err)
		}
		m.SenderLocalpart = v
	}
	return m
}

func (p *parser) httpTransport(e field, path string) *HTTPTransport {
	f := p.fields(e.val, path, httpKeys...)
	h := &HTTPTransport{}
	pf, hasPort := f["port"]
	if hasPort {
		v, ok := p.str(pf, path+".port")
		n, err := strconv.Atoi(v)
		if ok && (err != nil || n < 1 || n > 65535) {
			p.errorf(pf.val, path+".port", "must be a number 1-65535, got %q", v)
		}
		h.Port = n
	}
	if v, ok := p.str(f["listen"], path+".listen"); ok && v != "" {
		if hasPort {
			p.errorf(f["listen"].key, path+".listen", "set port or listen, not both")
		} else if err := checkHostPort(v); err != nil {
			p.errorf(f["listen"].val, path+".listen", "%v", err)
		}
		h.Listen = v
	}
	switch {
	case h.Listen == "" && hasPort:
		h.Listen = net.JoinHostPort("127.0.0.1", strconv.Itoa(h.Port))
	case h.Listen == "" && !hasPort:
		p.errorf(e.key, path, "port or listen is required")
	}
	h.Token = p.secretValue(f, e.key, path, "token", false)
	if h.Token == "" && h.Listen != "" && !isLoopback(h.Listen) && !p.hasErrorUnder(path+".token") && !p.hasErrorUnder(path+".token_file") {
		at := keyOr(f, "listen", keyOr(f, "port", e.key))
		p.errorf(at, path+".token", "is required because %s is not a loopback address: set token (or token_file), or listen on 127.0.0.1", h.Listen)
	}
	return h
}

var agentKeys = []string{"acp", "dir", "matrix", "http", "permission", "user", "runtime", "container", "max_processes", "sessions_per_process", "prewarm", "sandbox"}

func (p *parser) agent(e field, cfg *Config, userIDs map[id.UserID]string) (Agent, bool) {
	name := e.key.Value
	path := "agents." + name
	before := len(p.errs)
	a := Agent{Name: name, Permission: PermissionDeny}
	if !ValidName(name) {
		p.errorf(e.key, path, "agent name must match %s", NamePattern)
	}
	p.agentLines[name] = e.key.Line
	f := p.fields(e.val, path, agentKeys...)
	a.Runtime = p.runtimeOf(f["runtime"], path+".runtime", p.runtime)
	a.Container = p.container(f["container"], path+".container", p.containerDefault)
	a.Sandbox = p.sandboxOf(f["sandbox"], path+".sandbox", p.sandboxDefault)

	if af, ok := f["acp"]; ok {
		a.ACP = p.acp(af, path+".acp", a.Runtime == RuntimeDocker)
	} else {
		p.errorf(e.key, path+".acp", "is required (a preset or a command)")
	}
	if v, ok := p.str(f["dir"], path+".dir"); ok && v != "" {
		a.Dir = p.abs(v)
		p.dirLines[name] = f["dir"].val.Line
		p.refuseSecret(f["dir"].val, path+".dir", "the directory", a.Dir)
	}
	if uf, ok := f["user"]; ok {
		a.User, p.userLines[name] = p.user(uf, path+".user")
	}
	if v, ok := p.str(f["permission"], path+".permission"); ok {
		if v != PermissionDeny && v != PermissionAllow {
			p.errorf(f["permission"].val, path+".permission", "must be %q or %q, got %q", PermissionDeny, PermissionAllow, v)
		}
		a.Permission = v
	}
	p.agentLimits(f, path, &a)
	a.Prewarm = p.flag(f["prewarm"], path+".prewarm", cfg.Prewarm)

	mf, hasMatrix := f["matrix"]
	hf, hasHTTP := f["http"]
	switch {
	case hasMatrix && hasHTTP:
		p.errorf(hf.key, path, "an agent binds exactly one transport: both matrix and http are set")
	case !hasMatrix && !hasHTTP:
		p.errorf(e.key, path, "an agent binds exactly one transport: set matrix or http")
	case hasMatrix:
		a.Matrix = p.agentMatrix(mf, path+".matrix", name, cfg, userIDs)
	case hasHTTP:
		a.HTTP = p.agentHTTP(hf, path+".http", cfg)
	}
	p.finishContainer(&a, e.key, path)
	p.finishSandbox(&a, f, path)
	return a, len(p.errs) == before
}

// acp reads an agent's acp mapping. In a container (inImage) the command is
// a path inside the image, so a relative one is not resolved on the host.
func (p *parser) acp(af field, path string, inImage bool) ACP {
	f := p.fields(af.val, path, "preset", "command", "args", "env", "inherit_env")
	var a ACP
	if v, ok := p.str(f["preset"], path+".preset"); ok && v != "" {
		if _, known := presets[v]; !known {
			p.errorf(f["preset"].val, path+".preset", "unknown preset %q (known: %s)", v, strings.Join(PresetNames(), ", "))
		}
		a.Preset = v
	}
	if v, ok := p.str(f["command"], path+".command"); ok && v != "" {
		if strings.Contains(v, "/") && !filepath.IsAbs(v) && !inImage {
			v = filepath.Join(p.base, v)
		}
		a.Command = v
		p.refuseSecret(f["command"].val, path+".command", "the command", v)
	}
	if a.Preset == "" && a.Command == "" && !p.hasErrorUnder(path) {
		p.errorf(af.key, path, "needs a preset or a command")
	}
	a.Args = p.strList(f["args"], path+".args")
	if n := deref(f["args"].val); n != nil && n.Kind == yaml.SequenceNode {
		for i, item := range n.Content {
			if i < len(a.Args) {
				p.refuseSecret(item, fmt.Sprintf("%s.args[%d]", path, i), "the argument", a.Args[i])
			}
		}
	}
	if ef, ok := f["env"]; ok {
		a.Env = map[string]string{}
		for k, v := range p.fields(ef.val, path+".env") {
			if !envNameRE.MatchString(k) {
				p.errorf(v.key, path+".env", "invalid variable name %q", k)
				continue
			}
			s, ok := p.str(v, path+".env."+k)
			if !ok && !isNull(deref(v.val)) {
				continue
			}
			// A token here is refused, not dropped: an agent started without
			// a variable its operator set would fail in a confusing way.
			if p.refuseSecret(v.val, path+".env."+k, "the value", s) {
				continue
			}
			a.Env[k] = s
		}
	}
	a.InheritEnv = p.inheritEnv(f["inherit_env"], path+".inherit_env")
	return a
}

// inheritEnv reads the names of daemon environment variables an agent may
// inherit beyond the allowlist. A name whose current value carries a token is
// refused: it would hand the token to the agent.
func (p *parser) inheritEnv(f field, path string) []string {
	names := p.strList(f, path)
	n := deref(f.val)
	seen := map[string]bool{}
	var out []string
	for i, name := range names {
		at := f.val
		if n != nil && n.Kind == yaml.SequenceNode && i < len(n.Content) {
			at = n.Content[i]
		}
		ip := fmt.Sprintf("%s[%d]", path, i)
		switch {
		case !envNameRE.MatchString(name):
			p.errorf(at, ip, "invalid variable name %q", name)
			continue
		case seen[name]:
			p.errorf(at, ip, "%s is listed twice", name)
			continue
		}
		seen[name] = true
		if v, ok := p.lookup(name); ok && p.refuseSecret(at, ip, "$"+name, v) {
			continue
		}
		out = append(out, name)
	}
	return out
}

// pickTransport resolves an agent's transport reference of the given type.
func (p *parser) pickTransport(f map[string]field, at *yaml.Node, path, typ string, cfg *Config) *Transport {
	if v, ok := p.str(f["transport"], path+".transport"); ok && v != "" {
		t, found := cfg.Transport(v)
		switch {
		case !found:
			p.errorf(f["transport"].val, path+".transport", "no transport named %q", v)
			return nil
		case t.Type != typ:
			p.errorf(f["transport"].val, path+".transport", "transport %q is of type %s, not %s", v, t.Type, typ)
			return nil
		}
		return t
	}
	var of []*Transport
	for i := range cfg.Transports {
		if cfg.Transports[i].Type == typ {
			of = append(of, &cfg.Transports[i])
		}
	}
	switch len(of) {
	case 0:
		if !p.hasErrorUnder("transports") {
			p.errorf(at, path, "no %s transport is configured", typ)
		}
		return nil
	case 1:
		return of[0]
	default:
		p.errorf(at, path+".transport", "is required: there are %d %s transports", len(of), typ)
		return nil
	}
}

func (p *parser) agentMatrix(mf field, path, name string, cfg *Config, userIDs map[id.UserID]string) *AgentMatrix {
	f := p.fields(mf.val, path, "transport", "user_id", "display_name", "rooms", "trigger")
	m := &AgentMatrix{Trigger: TriggerMention, DisplayName: name}
	t := p.pickTransport(f, mf.key, path, TypeMatrix, cfg)
	server := ""
	if t != nil {
		m.Transport = t.Name
		server = t.Matrix.ServerName
	}
	// Without a transport the server part is unknown; that error is enough.
	lenient := t == nil

	// user_id is optional: one daemon's agent defaults to @name, a
	// workstation's to @workstation.name, so several daemons' agents of the
	// same name don't collide on one homeserver.
	raw, at := DefaultUserID(cfg.Workstation, name), mf.key
	if _, present := f["user_id"]; present {
		raw, at = p.required(f, mf.key, path, "user_id")
	}
	if at != nil {
		uid, err := normaliseUserID(raw, server)
		switch {
		case err != nil && lenient && errors.Is(err, errNoServer):
		case err != nil && f["user_id"].val == nil:
			p.errorf(at, path+".user_id", "the default user id %v; set server_name on the transport, or user_id here", err)
		case err != nil:
			p.errorf(at, path+".user_id", "%v", err)
		default:
			if other, dup := userIDs[uid]; dup {
				p.errorf(at, path+".user_id", "%s is already used by agent %s", uid, other)
			}
			userIDs[uid] = name
			if t != nil && uid.Localpart() == t.Matrix.SenderLocalpart {
				p.errorf(at, path+".user_id", "%s is the appservice sender of transport %s", uid, t.Name)
			}
			m.UserID = uid
		}
	}
	if v, ok := p.str(f["display_name"], path+".display_name"); ok && v != "" {
		m.DisplayName = v
	}
	rf, ok := f["rooms"]
	rooms := p.strList(rf, path+".rooms")
	if !ok || (len(rooms) == 0 && !p.hasErrorUnder(path+".rooms")) {
		p.errorf(keyOr(f, "rooms", mf.key), path+".rooms", "at least one room is required")
	}
	seen := map[RoomRef]bool{}
	items := []*yaml.Node{}
	if n := deref(rf.val); n != nil && n.Kind == yaml.SequenceNode {
		items = n.Content
	}
	for i, r := range rooms {
		at := rf.val
		if i < len(items) {
			at = items[i]
		}
		room, err := ParseRoomRef(r, server)
		if err != nil {
			if lenient && errors.Is(err, errNoServer) {
				continue
			}
			p.errorf(at, fmt.Sprintf("%s.rooms[%d]", path, i), "%v", err)
			continue
		}
		if seen[room] {
			p.errorf(at, fmt.Sprintf("%s.rooms[%d]", path, i), "%s is listed twice", room)
			continue
		}
		seen[room] = true
		m.Rooms = append(m.Rooms, room)
	}
	if v, ok := p.str(f["trigger"], path+".trigger"); ok {
		if v != TriggerMention && v != TriggerAny {
			p.errorf(f["trigger"].val, path+".trigger", "must be %q or %q, got %q", TriggerMention, TriggerAny, v)
		}
		m.Trigger = v
	}
	return m
}

func (p *parser) agentHTTP(hf field, path string, cfg *Config) *AgentHTTP {
	f := p.fields(hf.val, path, "transport")
	h := &AgentHTTP{}
	if t := p.pickTransport(f, hf.key, path, TypeHTTP, cfg); t != nil {
		h.Transport = t.Name
	}
	return h
}
