package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
	"maunium.net/go/mautrix/id"
)

var (
	agentNameRE = regexp.MustCompile(`^[a-z][a-z0-9-]{0,31}$`)
	envNameRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// localpartRE is the Matrix user id localpart grammar.
	localpartRE = regexp.MustCompile(`^[a-z0-9._=/+-]+$`)
)

// maxRunDir keeps socket paths under the 108-byte sun_path limit with room
// for a per-agent directory and socket name.
const maxRunDir = 60

// field is one key of a mapping with its value.
type field struct {
	key, val *yaml.Node
}

type parser struct {
	file     string
	base     string
	lookup   func(string) (string, bool)
	errs     ErrorList
	dirLines map[string]int
}

func newParser(file, base string, lookup func(string) (string, bool)) *parser {
	return &parser{file: file, base: base, lookup: lookup, dirLines: map[string]int{}}
}

func (p *parser) errorAt(line int, path, format string, args ...any) {
	p.errs = append(p.errs, &Error{File: p.file, Line: line, Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (p *parser) errorf(n *yaml.Node, path, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	p.errorAt(line, path, format, args...)
}

func (p *parser) result() error {
	if len(p.errs) == 0 {
		return nil
	}
	sort.SliceStable(p.errs, func(i, j int) bool { return p.errs[i].Line < p.errs[j].Line })
	return p.errs
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

// fields reads a mapping, refusing duplicate and unknown keys.
func (p *parser) fields(n *yaml.Node, path string, allowed ...string) map[string]field {
	n = deref(n)
	out := map[string]field{}
	if isNull(n) {
		return out
	}
	if n.Kind != yaml.MappingNode {
		p.errorf(n, path, "must be a mapping, got %s", kindName(n))
		return out
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.errorf(k, path, "keys must be plain strings")
			continue
		}
		if prev, dup := out[k.Value]; dup {
			p.errorf(k, join(path, k.Value), "duplicate key (first at line %d)", prev.key.Line)
			continue
		}
		if allowed != nil && !contains(allowed, k.Value) {
			msg := fmt.Sprintf("unknown key %q", k.Value)
			if s := suggest(k.Value, allowed); s != "" {
				msg += fmt.Sprintf(" (did you mean %q?)", s)
			}
			p.errorf(k, path, "%s", msg)
			continue
		}
		out[k.Value] = field{k, v}
	}
	return out
}

// entries reads a mapping of operator-chosen names, in file order.
func (p *parser) entries(n *yaml.Node, path string) []field {
	n = deref(n)
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		p.errorf(n, path, "must be a mapping of names, got %s", kindName(n))
		return nil
	}
	seen := map[string]int{}
	var out []field
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			p.errorf(k, path, "names must be plain strings")
			continue
		}
		if line, dup := seen[k.Value]; dup {
			p.errorf(k, join(path, k.Value), "duplicate name (first at line %d)", line)
			continue
		}
		seen[k.Value] = k.Line
		out = append(out, field{k, v})
	}
	return out
}

// str reads a scalar as a string with ${VAR} expanded; ok is false when the
// value is missing or invalid (an error has then been recorded if invalid).
func (p *parser) str(f field, path string) (string, bool) {
	n := deref(f.val)
	if f.val == nil || isNull(n) {
		return "", false
	}
	if n.Kind != yaml.ScalarNode {
		p.errorf(n, path, "must be a string, got %s", kindName(n))
		return "", false
	}
	v, err := expand(n.Value, p.lookup)
	if err != nil {
		p.errorf(n, path, "%v", err)
		return "", false
	}
	return v, true
}

func (p *parser) strList(f field, path string) []string {
	n := deref(f.val)
	if f.val == nil || isNull(n) {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, path, "must be a list, got %s", kindName(n))
		return nil
	}
	out := make([]string, 0, len(n.Content))
	for i, item := range n.Content {
		ip := fmt.Sprintf("%s[%d]", path, i)
		v, ok := p.str(field{val: item}, ip)
		if !ok {
			if isNull(deref(item)) {
				p.errorf(item, ip, "must not be empty")
			}
			continue
		}
		out = append(out, v)
	}
	return out
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("%q", n.Value)
	}
	return "something else"
}

// expand replaces ${NAME} with its value; $${ is a literal ${.
func expand(s string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(s, "$") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "$${"):
			b.WriteString("${")
			i += 3
		case strings.HasPrefix(s[i:], "${"):
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", fmt.Errorf("unterminated ${ (write $${ for a literal ${)")
			}
			name := s[i+2 : i+2+end]
			if !envNameRE.MatchString(name) {
				return "", fmt.Errorf("invalid variable name %q in ${...}", name)
			}
			v, ok := lookup(name)
			if !ok {
				return "", fmt.Errorf("environment variable %s is not set", name)
			}
			b.WriteString(v)
			i += 3 + end
		default:
			b.WriteByte(s[i])
			i++
		}
	}
	return b.String(), nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// suggest returns the allowed key closest to k when it is a likely typo.
func suggest(k string, allowed []string) string {
	best, bestD := "", 3
	for _, a := range allowed {
		if d := distance(k, a); d < bestD {
			best, bestD = a, d
		}
	}
	return best
}

func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

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
	top := p.fields(root, "", "transports", "agents", "state_dir", "run_dir", "turn_timeout", "idle_timeout")
	cfg := &Config{File: p.file}

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
	if f, ok := top["agents"]; ok {
		userIDs := map[id.UserID]string{}
		for _, e := range p.entries(f.val, "agents") {
			if a, ok := p.agent(e, cfg, userIDs); ok {
				cfg.Agents = append(cfg.Agents, a)
			}
		}
	}
	if len(cfg.Agents) == 0 && !p.hasErrorUnder("agents") {
		p.errorf(keyOr(top, "agents", root), "agents", "at least one agent is required")
	}

	cfg.StateDir = filepath.Join(p.base, ".zooid")
	if v, ok := p.str(top["state_dir"], "state_dir"); ok && v != "" {
		cfg.StateDir = p.abs(v)
	}
	cfg.TurnTimeout = p.duration(top, "turn_timeout")
	cfg.IdleTimeout = p.duration(top, "idle_timeout")
	cfg.RunDir = p.defaultRunDir()
	if v, ok := p.str(top["run_dir"], "run_dir"); ok && v != "" {
		cfg.RunDir = p.abs(v)
		if len(cfg.RunDir) > maxRunDir {
			p.errorf(top["run_dir"].val, "run_dir", "%s is %d bytes long; unix socket paths need it to be at most %d", cfg.RunDir, len(cfg.RunDir), maxRunDir)
		}
	}
	return cfg
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

// peek finds key in a mapping without recording errors; the section's own
// parser reports problems with the mapping.
func peek(n *yaml.Node, key string) (field, bool) {
	n = deref(n)
	if n == nil || n.Kind != yaml.MappingNode {
		return field{}, false
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Kind == yaml.ScalarNode && n.Content[i].Value == key {
			return field{n.Content[i], n.Content[i+1]}, true
		}
	}
	return field{}, false
}

func keyOr(m map[string]field, k string, def *yaml.Node) *yaml.Node {
	if f, ok := m[k]; ok {
		return f.key
	}
	return def
}

func (p *parser) hasErrorUnder(path string) bool {
	for _, e := range p.errs {
		if e.Path == path || strings.HasPrefix(e.Path, path+".") {
			return true
		}
	}
	return false
}

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

func (p *parser) errAtYAML(err error) {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		for _, m := range te.Errors {
			p.yamlMsg(m)
		}
		return
	}
	p.yamlMsg(err.Error())
}

func (p *parser) yamlMsg(msg string) {
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		p.errorAt(line, "", "invalid YAML: %s", m[2])
		return
	}
	p.errorAt(0, "", "invalid YAML: %s", strings.TrimPrefix(msg, "yaml: "))
}

func (p *parser) abs(path string) string {
	if filepath.IsAbs(path) {
		return filepath.Clean(path)
	}
	return filepath.Join(p.base, path)
}

func (p *parser) defaultRunDir() string {
	if d, ok := p.lookup("XDG_RUNTIME_DIR"); ok && d != "" && len(d) <= maxRunDir-6 {
		return filepath.Join(d, "zooid")
	}
	tmp := os.TempDir()
	if len(tmp) > maxRunDir-20 {
		tmp = "/tmp"
	}
	return filepath.Join(tmp, "zooid-"+strconv.Itoa(os.Getuid()))
}

var matrixKeys = []string{"type", "homeserver", "server_name", "as_token", "hs_token", "listen", "id", "sender_localpart"}
var httpKeys = []string{"type", "port", "listen", "token"}

func (p *parser) transport(e field) (Transport, bool) {
	name := e.key.Value
	path := "transports." + name
	t := Transport{Name: name}
	if !agentNameRE.MatchString(name) {
		p.errorf(e.key, path, "transport name must match ^[a-z][a-z0-9-]{0,31}$")
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
	m.ASToken, _ = p.required(f, e.key, path, "as_token")
	m.HSToken, _ = p.required(f, e.key, path, "hs_token")
	if m.ASToken != "" && m.ASToken == m.HSToken {
		p.errorf(f["hs_token"].val, path+".hs_token", "must differ from as_token")
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
		if !localpartRE.MatchString(v) {
			p.errorf(f["sender_localpart"].val, path+".sender_localpart", "%q is not a valid Matrix localpart (a-z 0-9 . _ = - / +)", v)
		}
		m.SenderLocalpart = v
	}
	return m
}

func validServerName(s string) bool {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return false
	}
	n, err := strconv.Atoi(port)
	return host != "" && !strings.ContainsAny(host, "/@# ") && err == nil && n > 0 && n < 65536
}

func checkHostPort(v string) error {
	_, port, err := net.SplitHostPort(v)
	if err != nil {
		return fmt.Errorf("must be host:port, got %q", v)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("port must be a number 0-65535, got %q", port)
	}
	return nil
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
	h.Token, _ = p.str(f["token"], path+".token")
	return h
}

var agentKeys = []string{"acp", "dir", "matrix", "http", "permission"}

func (p *parser) agent(e field, cfg *Config, userIDs map[id.UserID]string) (Agent, bool) {
	name := e.key.Value
	path := "agents." + name
	before := len(p.errs)
	a := Agent{Name: name, Dir: p.base, Permission: PermissionDeny}
	if !agentNameRE.MatchString(name) {
		p.errorf(e.key, path, "agent name must match ^[a-z][a-z0-9-]{0,31}$")
	}
	f := p.fields(e.val, path, agentKeys...)

	if af, ok := f["acp"]; ok {
		a.ACP = p.acp(af, path+".acp")
	} else {
		p.errorf(e.key, path+".acp", "is required (a preset or a command)")
	}
	if v, ok := p.str(f["dir"], path+".dir"); ok && v != "" {
		a.Dir = p.abs(v)
		p.dirLines[name] = f["dir"].val.Line
	} else {
		p.dirLines[name] = e.key.Line
	}
	if v, ok := p.str(f["permission"], path+".permission"); ok {
		if v != PermissionDeny && v != PermissionAllow {
			p.errorf(f["permission"].val, path+".permission", "must be %q or %q, got %q", PermissionDeny, PermissionAllow, v)
		}
		a.Permission = v
	}

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
	return a, len(p.errs) == before
}

func (p *parser) acp(af field, path string) ACP {
	f := p.fields(af.val, path, "preset", "command", "args", "env")
	var a ACP
	if v, ok := p.str(f["preset"], path+".preset"); ok && v != "" {
		if _, known := presets[v]; !known {
			p.errorf(f["preset"].val, path+".preset", "unknown preset %q (known: %s)", v, strings.Join(PresetNames(), ", "))
		}
		a.Preset = v
	}
	if v, ok := p.str(f["command"], path+".command"); ok && v != "" {
		if strings.Contains(v, "/") && !filepath.IsAbs(v) {
			v = filepath.Join(p.base, v)
		}
		a.Command = v
	}
	if a.Preset == "" && a.Command == "" && !p.hasErrorUnder(path) {
		p.errorf(af.key, path, "needs a preset or a command")
	}
	a.Args = p.strList(f["args"], path+".args")
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
			a.Env[k] = s
		}
	}
	return a
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

	if raw, n := p.required(f, mf.key, path, "user_id"); n != nil {
		uid, err := normaliseUserID(raw, server)
		switch {
		case err != nil && lenient && errors.Is(err, errNoServer):
		case err != nil:
			p.errorf(n, path+".user_id", "%v", err)
		default:
			if other, dup := userIDs[uid]; dup {
				p.errorf(n, path+".user_id", "%s is already used by agent %s", uid, other)
			}
			userIDs[uid] = name
			if t != nil && uid.Localpart() == t.Matrix.SenderLocalpart {
				p.errorf(n, path+".user_id", "%s is the appservice sender of transport %s", uid, t.Name)
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
	seen := map[string]bool{}
	items := []*yaml.Node{}
	if n := deref(rf.val); n != nil && n.Kind == yaml.SequenceNode {
		items = n.Content
	}
	for i, r := range rooms {
		at := rf.val
		if i < len(items) {
			at = items[i]
		}
		room, err := normaliseRoom(r, server)
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

// errNoServer is a short-form id with no server_name to complete it.
var errNoServer = errors.New("has no server part and the transport has no server_name")

func normaliseUserID(raw, server string) (id.UserID, error) {
	if !strings.HasPrefix(raw, "@") {
		return "", fmt.Errorf("must start with @, got %q", raw)
	}
	if !strings.Contains(raw, ":") {
		if server == "" {
			return "", fmt.Errorf("%q %w", raw, errNoServer)
		}
		raw += ":" + server
	}
	uid := id.UserID(raw)
	local, hs, err := uid.Parse()
	if err != nil || hs == "" {
		return "", fmt.Errorf("%q is not a Matrix user id", raw)
	}
	if !localpartRE.MatchString(local) {
		return "", fmt.Errorf("%q: localpart must use only a-z 0-9 . _ = - / +", raw)
	}
	if server != "" && hs != server {
		return "", fmt.Errorf("%s is not on the transport's server %s", raw, server)
	}
	return uid, nil
}

func normaliseRoom(raw, server string) (string, error) {
	switch {
	case strings.HasPrefix(raw, "!"):
		if len(raw) < 2 {
			return "", fmt.Errorf("%q is not a room id", raw)
		}
		return raw, nil
	case strings.HasPrefix(raw, "#"):
		local, _, _ := strings.Cut(raw[1:], ":")
		if local == "" {
			return "", fmt.Errorf("%q is not a room alias", raw)
		}
		if !strings.Contains(raw, ":") {
			if server == "" {
				return "", fmt.Errorf("%q %w", raw, errNoServer)
			}
			raw += ":" + server
		}
		return raw, nil
	}
	return "", fmt.Errorf("must be a room alias (#name) or room id (!id), got %q", raw)
}

func (p *parser) agentHTTP(hf field, path string, cfg *Config) *AgentHTTP {
	f := p.fields(hf.val, path, "transport")
	h := &AgentHTTP{}
	if t := p.pickTransport(f, hf.key, path, TypeHTTP, cfg); t != nil {
		h.Transport = t.Name
	}
	return h
}
