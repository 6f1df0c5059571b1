package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds arbitrary bytes as zooid.yaml: Parse returns a config or an
// error, never both, never neither, never a panic; a refusal is an ErrorList.
func FuzzParse(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "*", "*.yaml"))
	for _, p := range seeds {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{"", "{}", "agents: []", "transports: {matrix: {type: matrix}}", "state_dir: ${X}", "- a\n- b", ":\n\t:", "agents: [{name: a, acp: {command: x}}]"} {
		f.Add([]byte(s))
	}
	env := func(k string) (string, bool) {
		if k == "SET" {
			return "value", true
		}
		return "", false
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Parse(data, "/fuzz/zooid.yaml", env)
		if (cfg == nil) == (err == nil) {
			t.Fatalf("Parse returned config %v and error %v; want exactly one", cfg != nil, err)
		}
		if err != nil {
			var el ErrorList
			var e *Error
			if !errors.As(err, &el) && !errors.As(err, &e) {
				t.Fatalf("refusal is %T (%v), want config errors with a place", err, err)
			}
		}
	})
}
