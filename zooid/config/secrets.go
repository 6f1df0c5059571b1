package config

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"
)

// MinSecretLen is the shortest token accepted. A shorter one is guessable,
// and it would also make the daemon's by-value scrub of agent environments
// match (and delete) unrelated variables.
const MinSecretLen = 16

// secret is a token from the config and the key it came from.
type secret struct {
	value, path string
}

// secretSource describes where the token of key in f comes from without
// giving its value: the file it is read from, the ${VAR} reference as
// written, or that it is written inline.
func (p *parser) secretSource(f map[string]field, key string) string {
	if file, ok := f[key+"_file"]; ok {
		if n := deref(file.val); n != nil && n.Kind == yaml.ScalarNode {
			if name, err := expand(n.Value, p.lookup); err == nil {
				return key + "_file " + p.abs(name)
			}
		}
		return key + "_file"
	}
	if inline, ok := f[key]; ok {
		if n := deref(inline.val); n != nil && n.Kind == yaml.ScalarNode && envRefOnly.MatchString(strings.TrimSpace(n.Value)) {
			return key + " " + strings.TrimSpace(n.Value)
		}
		return key + " (written inline in " + filepath.Base(p.file) + ")"
	}
	return key
}

// envRefOnly matches a value that is nothing but one ${VAR} reference, which
// names where a token comes from without giving it away.
var envRefOnly = regexp.MustCompile(`^\$\{[A-Za-z_][A-Za-z0-9_]*\}$`)

// secretValue reads a token given either inline as key (usually ${VAR}) or as
// key_file, a file holding it (relative paths against the config's
// directory; surrounding whitespace, such as a trailing newline, is dropped).
// Exactly one of the two may be set; required says whether one must be.
func (p *parser) secretValue(f map[string]field, at *yaml.Node, path, key string, required bool) string {
	fileKey := key + "_file"
	inline, hasInline := f[key]
	file, hasFile := f[fileKey]
	var v string
	var n *yaml.Node
	switch {
	case hasInline && hasFile:
		p.errorf(file.key, join(path, fileKey), "set %s or %s, not both", key, fileKey)
		return ""
	case hasFile:
		name, ok := p.str(file, join(path, fileKey))
		if !ok || name == "" {
			if ok || isNull(deref(file.val)) {
				p.errorf(file.key, join(path, fileKey), "must not be empty")
			}
			return ""
		}
		p.secretFiles = append(p.secretFiles, secretFile{path: p.abs(name), key: join(path, fileKey), line: file.val.Line})
		data, err := os.ReadFile(p.abs(name))
		if err != nil {
			p.errorf(file.val, join(path, fileKey), "reading the token: %v", err)
			return ""
		}
		v, n, key = strings.TrimSpace(string(data)), file.val, fileKey
		if v == "" {
			p.errorf(n, join(path, key), "%s is empty", p.abs(name))
			return ""
		}
	case hasInline:
		s, ok := p.str(inline, join(path, key))
		if !ok || s == "" {
			if ok || isNull(deref(inline.val)) {
				p.errorf(inline.key, join(path, key), "must not be empty")
			}
			return ""
		}
		v, n = s, inline.val
	default:
		if required {
			p.errorf(at, join(path, key), "is required (or %s)", fileKey)
		}
		return ""
	}
	if len(v) < MinSecretLen {
		p.errorf(n, join(path, key), "is %d characters long; a token must have at least %d (generate one with: openssl rand -hex 32)", len(v), MinSecretLen)
		return ""
	}
	p.secrets = append(p.secrets, secret{value: v, path: join(path, key)})
	return v
}

// carriesSecret names the key of the first token s contains, if any.
func (p *parser) carriesSecret(s string) (string, bool) {
	for _, sec := range p.secrets {
		if strings.Contains(s, sec.value) {
			return sec.path, true
		}
	}
	return "", false
}

// refuseSecret records an error when value, which an agent can read, carries
// a token.
func (p *parser) refuseSecret(n *yaml.Node, path, what, value string) bool {
	if from, ok := p.carriesSecret(value); ok {
		p.errorf(n, path, "%s carries the token of %s; agents must never see a token (remove it, or give the agent a credential of its own)", what, from)
		return true
	}
	return false
}
