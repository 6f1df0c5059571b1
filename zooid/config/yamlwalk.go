package config

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// This file is the schema-free half of the parser: walking YAML nodes with
// their line numbers, ${VAR} expansion, and collecting errors in line order.
// schema.go says which keys exist and what they mean.

var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// field is one key of a mapping with its value.
type field struct {
	key, val *yaml.Node
}

type parser struct {
	file   string
	base   string
	lookup func(string) (string, bool)
	errs   ErrorList
	// dirLines is the line of each agent's dir (or name) for Load's checks.
	dirLines map[string]int
	// secrets are the transports' tokens with the key each came from, for
	// refusing them wherever an agent could read them.
	secrets []secret
	// matrixAt is the line of the first matrix transport.
	matrixAt int
	// runDirLine is the line of run_dir, if set.
	runDirLine int
	// userLines is the line of the user: each agent runs as (its own or the
	// top-level one), for Load's checks; secretFiles the *_file paths read.
	userLines   map[string]int
	secretFiles []secretFile
	// runtime and containerDefault are the workforce defaults (top-level
	// runtime: and container:).
	runtime          string
	containerDefault *Container
	// sandboxDefault is the top-level sandbox:, every local agent's
	// default; sandboxPaths its and the agents' read and write entries.
	sandboxDefault *Sandbox
	sandboxPaths   []sandboxPath
	// agentLines is the line of each agent's name, for Load's checks.
	agentLines map[string]int
}

// secretFile is a file a token was read from, and the key that named it.
type secretFile struct {
	path, key string
	line      int
}

func newParser(file, base string, lookup func(string) (string, bool)) *parser {
	return &parser{file: file, base: base, lookup: lookup, dirLines: map[string]int{}, userLines: map[string]int{}, agentLines: map[string]int{}}
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
		if allowed != nil && !slices.Contains(allowed, k.Value) {
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

var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
